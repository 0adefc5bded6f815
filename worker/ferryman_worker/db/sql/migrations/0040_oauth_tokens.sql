-- OAuth2 tokens of source credentials whose refresh tokens rotate: the one copy of the current
-- refresh token, shared by every worker. A refresh holds the credential's row lock from before
-- the token endpoint is called until the rotated token is committed, so the fleet spends each
-- refresh token once.
CREATE TABLE ferryman_oauth_tokens (
    credential    text        PRIMARY KEY,  -- the credential's non-secret id
    seed_sha256   text        NOT NULL,     -- which refresh token the Secret held for this chain
    refresh_token text        NOT NULL,     -- the current one; single-use where the server rotates
    access_token  text,
    expires_at    timestamptz,
    rotations     bigint      NOT NULL DEFAULT 0,
    refreshed_at  timestamptz
);
