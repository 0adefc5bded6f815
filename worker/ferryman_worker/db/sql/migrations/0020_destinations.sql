-- Destinations: the landing table (a kind without a mapping lands here as jsonb), the run's
-- mapping snapshot, and the refusal of a reference that cannot resolve.

-- A kind without a mapping: each record as it came, with its source id; the ledger points here.
CREATE TABLE ferryman_landing (
    id        bigserial   PRIMARY KEY,
    workspace text        NOT NULL,
    kind      text        NOT NULL,
    source_id text        NOT NULL,
    record    jsonb       NOT NULL,
    run_id    bigint      NOT NULL,
    landed_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX ferryman_landing_by_kind ON ferryman_landing (workspace, kind, id);

-- The run's mapping as admitted (the mapping and what the catalog said of its tables): a run
-- resumed hours later writes with the same statements. NULL: the provider's own writers.
ALTER TABLE ferryman_runs ADD COLUMN mapping jsonb;

-- A reference with `unresolved: refuse` whose record is not in the ledger: the row is refused
-- (a foreign-key violation, so the engine records it alone, with this reason).
CREATE FUNCTION ferryman_unresolved(p_kind text, p_source_id text) RETURNS bigint
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION USING
        ERRCODE = 'foreign_key_violation',
        MESSAGE = format('references %s %s, which is not imported', p_kind, p_source_id);
END
$$;
