-- The migration engine: runs, tasks, the ledger, row errors and rate-limit budgets.

-- A run: admitted through a partial unique index, one live run per workspace.
CREATE TABLE ferryman_runs (
    id             bigserial   PRIMARY KEY,
    name           text        NOT NULL UNIQUE,     -- namespace/name of the MigrationRun
    workspace      text        NOT NULL,
    provider       text        NOT NULL,
    base_url       text        NOT NULL,
    credential     jsonb       NOT NULL,            -- the Secret reference, never the secret
    kinds          text[]      NOT NULL,
    phases         jsonb       NOT NULL,            -- [[kind, ...], ...] in order
    options        jsonb       NOT NULL,            -- stripes, page_size, window_size, ...
    state          text        NOT NULL DEFAULT 'running'
                   CHECK (state IN ('running', 'succeeded', 'failed', 'cancelled')),
    suspended      boolean     NOT NULL DEFAULT false,
    phase          integer     NOT NULL DEFAULT 0,  -- index into phases; the barrier moves it
    created_at     timestamptz NOT NULL DEFAULT now(),
    started_at     timestamptz NOT NULL DEFAULT now(),
    finished_at    timestamptz,
    heartbeat_at   timestamptz NOT NULL DEFAULT now(),
    error          text
);
CREATE UNIQUE INDEX ferryman_runs_one_live ON ferryman_runs (workspace) WHERE state = 'running';

-- A task: the unit of scheduling and retry. Owns a cursor and how far it got (processed_offset).
CREATE TABLE ferryman_tasks (
    id               bigserial   PRIMARY KEY,
    run_id           bigint      NOT NULL REFERENCES ferryman_runs (id) ON DELETE CASCADE,
    phase            integer     NOT NULL,
    kind             text        NOT NULL,
    cursor_key       text        NOT NULL,
    cursor           jsonb       NOT NULL,
    status           text        NOT NULL DEFAULT 'pending'
                     CHECK (status IN ('pending', 'queued', 'running', 'done', 'failed',
                                       'cancelled')),
    processed_offset integer     NOT NULL DEFAULT 0,
    job_id           bigint,                         -- the queue job that claimed it
    attempts         integer     NOT NULL DEFAULT 0,
    rows_written     integer     NOT NULL DEFAULT 0,
    rows_skipped     integer     NOT NULL DEFAULT 0, -- already in the ledger: written before
    rows_failed      integer     NOT NULL DEFAULT 0, -- malformed: rolled back, in row errors
    created_at       timestamptz NOT NULL DEFAULT now(),
    claimed_at       timestamptz,
    heartbeat_at     timestamptz,
    finished_at      timestamptz,
    error            text,
    UNIQUE (run_id, kind, cursor_key)
);
CREATE INDEX ferryman_tasks_open ON ferryman_tasks (run_id, phase, status)
    WHERE status IN ('pending', 'queued', 'running');

-- Every source row written, in the same transaction as the write: a retried page, a resumed
-- task, a shifted offset never writes a row twice. row_id resolves foreign keys.
CREATE TABLE ferryman_ledger (
    workspace text   NOT NULL,
    kind      text   NOT NULL,
    source_id text   NOT NULL,
    row_id    bigint NOT NULL,
    run_id    bigint NOT NULL,
    PRIMARY KEY (workspace, kind, source_id)
);

-- Rows rolled back as malformed, with their reason. They hold no ledger slot.
CREATE TABLE ferryman_row_errors (
    id        bigserial   PRIMARY KEY,
    run_id    bigint      NOT NULL REFERENCES ferryman_runs (id) ON DELETE CASCADE,
    task_id   bigint      NOT NULL,
    kind      text        NOT NULL,
    source_id text,
    reason    text        NOT NULL,
    at        timestamptz NOT NULL DEFAULT now(),
    UNIQUE (run_id, kind, source_id)
);

-- One budget per source credential, shared by every worker: leased in chunks, not per call.
CREATE TABLE ferryman_rate_budgets (
    credential   text             PRIMARY KEY,   -- a hash of base URL and token, never the token
    tokens       double precision NOT NULL,
    capacity     double precision NOT NULL,
    refill_per_s double precision NOT NULL,
    refilled_at  timestamptz      NOT NULL DEFAULT now(),
    paused_until timestamptz      NOT NULL DEFAULT 'epoch'
);
