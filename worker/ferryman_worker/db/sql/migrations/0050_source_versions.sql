-- Delta runs: the ledger keeps each row's source version, written in the same statement as the
-- row. A version is text with a tag: 't:' and a UTC time (YYYY-MM-DDTHH:MI:SS.US), 'n:' and a
-- zero-padded integer, or 'h:' and a hash of the record (a kind without a version field):
-- jsonb_hash_extended of the jsonb record (destinations/generate.py, HASHED; rows written before
-- hold an md5, which only makes the next delta apply such a record once more).
-- NULL: unknown (written before versions were kept, or the record had no version).
ALTER TABLE ferryman_ledger ADD COLUMN source_version text COLLATE "C";
-- When a delta run learned that the source deleted the record (a tombstone in a changed-since
-- listing); the row itself is left as it is.
ALTER TABLE ferryman_ledger ADD COLUMN source_deleted_at timestamptz;

-- Whether a record at version p_new should be applied over the row written at p_old: an
-- unknown version on either side, or a different one, unless both are times or integers and
-- p_new is not later (a change older than the imported version is never applied). A hash says
-- only "different".
CREATE FUNCTION ferryman_version_newer(p_new text, p_old text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT p_new IS NULL OR p_old IS NULL OR (
        p_new <> p_old AND (
            left(p_new, 2) <> left(p_old, 2) OR left(p_new, 2) = 'h:' OR p_new > p_old
        )
    )
$$;
