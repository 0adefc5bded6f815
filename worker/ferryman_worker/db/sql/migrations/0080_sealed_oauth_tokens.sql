-- OAuth2 tokens are sealed in their row (Fernet, with a key derived from the credential's own
-- client id, client secret and first refresh token): a reader of the database or a dump of it
-- reads no token. SQL has no key, so rows written before stay in clear (sealed = false) until
-- the worker uses their credential again and seals them; their access tokens are dropped here
-- (the next use fetches a new one), and a refresh token cannot be dropped (where the server
-- rotates, the Secret's may be spent). A row whose credential is never used again can be deleted.
ALTER TABLE ferryman_oauth_tokens ADD COLUMN sealed boolean NOT NULL DEFAULT false;
ALTER TABLE ferryman_oauth_tokens ALTER COLUMN sealed SET DEFAULT true;
UPDATE ferryman_oauth_tokens SET access_token = NULL, expires_at = NULL WHERE NOT sealed;
