-- A run says Succeeded only once each kind's listing adds up to what the source said it holds.
-- Each page walk's task keeps what its page listed (records, the total the source stated, the
-- stop rule that ended its chain there); the barrier that closes a phase judges each of its kinds
-- and keeps the verdict.
ALTER TABLE ferryman_tasks
    ADD COLUMN listed integer,
    ADD COLUMN stated_total bigint,
    ADD COLUMN ended_by text;

CREATE TABLE ferryman_run_kinds (
    run_id  bigint      NOT NULL REFERENCES ferryman_runs (id) ON DELETE CASCADE,
    kind    text        NOT NULL,
    verdict text        NOT NULL CHECK (verdict IN ('reconciled', 'unverified', 'short', 'refused')),
    listed  bigint,
    total   bigint,
    note    text        NOT NULL,
    at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, kind)
);
