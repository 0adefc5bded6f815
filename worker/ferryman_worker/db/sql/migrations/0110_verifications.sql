-- A finished run can be verified: the source's ids listed again, kind by kind, and compared with
-- the workspace's ledger (`ferryman verify`, the MigrationRun annotation ferryman.dev/verify).
-- ferryman_verifications holds each run's latest request and where it stands; its job lists the
-- ids into ferryman_verify_listed (emptied once the kind is compared) and keeps each kind's
-- result in ferryman_verified_kinds.
CREATE TABLE ferryman_verifications (
    run_id       bigint      PRIMARY KEY REFERENCES ferryman_runs (id) ON DELETE CASCADE,
    request      text        NOT NULL,
    state        text        NOT NULL CHECK (state IN ('queued', 'running', 'done', 'failed')),
    error        text,
    requested_at timestamptz NOT NULL DEFAULT now(),
    finished_at  timestamptz
);

CREATE TABLE ferryman_verify_listed (
    run_id    bigint NOT NULL REFERENCES ferryman_runs (id) ON DELETE CASCADE,
    kind      text COLLATE "C" NOT NULL,
    source_id text COLLATE "C" NOT NULL,
    PRIMARY KEY (run_id, kind, source_id)
);

CREATE TABLE ferryman_verified_kinds (
    run_id      bigint      NOT NULL REFERENCES ferryman_runs (id) ON DELETE CASCADE,
    kind        text        NOT NULL,
    listed      bigint      NOT NULL,
    missing     bigint      NOT NULL,
    gone        bigint      NOT NULL,
    missing_ids text[]      NOT NULL,
    gone_ids    text[]      NOT NULL,
    note        text        NOT NULL,
    verified_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, kind)
);
