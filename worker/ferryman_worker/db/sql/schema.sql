-- The whole current schema of ferryman, equal to applying every file in migrations/ in order
-- (a test checks it). Read this to learn the tables; change it together with a new migration.
-- A claim is a session advisory lock on the job id (bigint key space), never a state field.

-- ---- from migrations/0001_capsule.sql
-- The capsule: jobs, batches and worker processes.

CREATE TABLE ferryman_jobs (
    id              bigserial   PRIMARY KEY,
    queue           text        NOT NULL,
    name            text        NOT NULL,
    args            jsonb       NOT NULL DEFAULT '[]',
    kwargs          jsonb       NOT NULL DEFAULT '{}',
    priority        integer     NOT NULL DEFAULT 0,
    status          text        NOT NULL DEFAULT 'ready'
                    CHECK (status IN ('ready', 'succeeded', 'failed', 'discarded')),
    run_at          timestamptz NOT NULL DEFAULT now(),
    attempts        integer     NOT NULL DEFAULT 0,
    max_attempts    integer     NOT NULL DEFAULT 5 CHECK (max_attempts >= 1),
    deferrals       integer     NOT NULL DEFAULT 0,
    concurrency_key text,
    batch_id        bigint,
    cron_key        text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    finished_at     timestamptz,
    last_error      text,
    last_traceback  text,
    claims          integer     NOT NULL DEFAULT 0, -- claims taken; see migrations/0006
    -- the backend holding the claim (its advisory lock proves it alive) and since when; kept on
    -- a finished row; see migrations/0007
    claimed_by      integer,
    claimed_at      timestamptz,
    -- whose job it is, for a fair share of its lane (a task job: its run's namespace; '': no
    -- one's); see migrations/0130
    tenant          text        NOT NULL DEFAULT ''
) WITH (fillfactor = 80);  -- room on each page for the claim's and the outcome's row versions

-- The claim's index: only ready rows no one claimed, per tenant in claim order. Running jobs are
-- not in it.
CREATE INDEX ferryman_jobs_ready ON ferryman_jobs (queue, tenant, priority DESC, id)
    WHERE status = 'ready' AND claimed_by IS NULL;
-- Running jobs per queue and tenant: whose turn the next claim is (migrations/0130).
CREATE INDEX ferryman_jobs_running ON ferryman_jobs (queue, tenant)
    WHERE status = 'ready' AND claimed_by IS NOT NULL;
-- A batch member is live while its job is ready; see migrations/0008. No index is written for
-- a member that is claimed and ends, beyond those a plain job writes.
-- Claimed rows: for the dead-claim sweep (all of them), and for the live members of a batch.
CREATE INDEX ferryman_jobs_claimed ON ferryman_jobs (batch_id, id)
    WHERE status = 'ready' AND claimed_by IS NOT NULL;
-- Ready members no one holds.
CREATE INDEX ferryman_jobs_batch_ready ON ferryman_jobs (batch_id, id)
    WHERE status = 'ready' AND claimed_by IS NULL AND batch_id IS NOT NULL;
-- Members that failed for good (or were discarded after): the finisher's failed count.
CREATE INDEX ferryman_jobs_batch_failed ON ferryman_jobs (batch_id)
    WHERE status IN ('failed', 'discarded') AND batch_id IS NOT NULL;
-- One job per recurring entry and tick, whichever worker process inserts it first.
CREATE UNIQUE INDEX ferryman_jobs_cron ON ferryman_jobs (cron_key) WHERE cron_key IS NOT NULL;

CREATE TABLE ferryman_batches (
    id             bigserial   PRIMARY KEY,
    metadata       jsonb       NOT NULL DEFAULT '{}',
    on_finish      jsonb,
    on_success     jsonb,
    on_failure     jsonb,
    created_at     timestamptz NOT NULL DEFAULT now(),
    -- set when the block that enqueues the members ends: an unsealed batch never finishes
    sealed_at      timestamptz,
    finished_at    timestamptz,
    -- a snapshot written once, by the single finisher
    total_jobs     integer,
    completed_jobs integer,
    failed_jobs    integer
);

-- A row per enqueue statement and batch: how many jobs it added (the batch's total).
CREATE TABLE ferryman_batch_enqueues (
    batch_id bigint NOT NULL,
    jobs     integer NOT NULL
);
CREATE INDEX ferryman_batch_enqueues_batch ON ferryman_batch_enqueues (batch_id);

CREATE TABLE ferryman_workers (
    id           bigserial   PRIMARY KEY,
    hostname     text        NOT NULL,
    pid          integer     NOT NULL,
    lanes        text        NOT NULL,
    -- the backend of its LISTEN connection: gone from pg_stat_activity = the process is gone
    backend_pid  integer     NOT NULL,
    started_at   timestamptz NOT NULL DEFAULT now(),
    heartbeat_at timestamptz NOT NULL DEFAULT now()
);

-- Wake the workers of each queue when jobs are inserted; the payload is 'queue:n:id' for n jobs
-- due now (id: the first), and 'queue|epoch' for the earliest not yet due. NOTIFY is delivered
-- at commit.
CREATE FUNCTION ferryman_notify_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- the first id makes the payload unique: PostgreSQL delivers identical payloads of one
    -- transaction once, and two statements' jobs must add up
    PERFORM pg_notify('ferryman_jobs', q.queue || ':' || q.due_now || ':' || q.first)
    FROM (SELECT queue, count(*) AS due_now, min(id) AS first FROM inserted
           WHERE status = 'ready' AND run_at <= now() GROUP BY queue) q;
    PERFORM pg_notify('ferryman_jobs', q.queue || '|' || extract(epoch FROM q.due)::text)
    FROM (SELECT queue, min(run_at) AS due FROM inserted
           WHERE status = 'ready' AND run_at > now() GROUP BY queue) q;
    RETURN NULL;
END
$$;

CREATE TRIGGER ferryman_jobs_notify AFTER INSERT ON ferryman_jobs
    REFERENCING NEW TABLE AS inserted
    FOR EACH STATEMENT EXECUTE FUNCTION ferryman_notify_inserted();

-- Whether a batch has a live member, as of the caller's snapshot. From the newest member down:
-- members end roughly in id order, so the index entries of ended ones pile up at the old end.
CREATE FUNCTION ferryman_batch_live(p_batch bigint) RETURNS boolean LANGUAGE sql STABLE AS $$
    SELECT EXISTS (SELECT 1 FROM ferryman_jobs
                    WHERE batch_id = p_batch AND status = 'ready' AND claimed_by IS NULL
                    ORDER BY id DESC LIMIT 1)
        OR EXISTS (SELECT 1 FROM ferryman_jobs
                    WHERE batch_id = p_batch AND status = 'ready' AND claimed_by IS NOT NULL
                    ORDER BY id DESC LIMIT 1)
$$;

-- Finish a batch if no member is live: compare-and-set on finished_at, so exactly one caller
-- wins; the winner writes the counters' snapshot and enqueues the callbacks in its transaction.
CREATE FUNCTION ferryman_finish_batch(p_batch bigint) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    b ferryman_batches;
    v_total integer;
    v_failed integer;
    v_info jsonb;
    v_callback jsonb;
BEGIN
    IF ferryman_batch_live(p_batch) THEN
        RETURN false;
    END IF;
    PERFORM 1 FROM ferryman_batches
     WHERE id = p_batch AND finished_at IS NULL AND sealed_at IS NOT NULL;
    IF NOT FOUND THEN
        RETURN false;  -- finished already, or not sealed: nothing to count
    END IF;
    SELECT coalesce(sum(jobs), 0) INTO v_total FROM ferryman_batch_enqueues WHERE batch_id = p_batch;
    SELECT count(*) INTO v_failed FROM ferryman_jobs
     WHERE batch_id = p_batch AND status IN ('failed', 'discarded');
    UPDATE ferryman_batches
       SET finished_at = now(), total_jobs = v_total, failed_jobs = v_failed,
           completed_jobs = v_total - v_failed
     WHERE id = p_batch AND finished_at IS NULL AND sealed_at IS NOT NULL
       AND NOT ferryman_batch_live(p_batch)
    RETURNING * INTO b;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    v_info := jsonb_build_object('id', b.id, 'metadata', b.metadata, 'total', v_total,
                                 'completed', v_total - v_failed, 'failed', v_failed);
    FOR v_callback IN
        SELECT c FROM unnest(ARRAY[b.on_finish,
                                   CASE WHEN v_failed = 0 THEN b.on_success ELSE b.on_failure END]) c
        WHERE c IS NOT NULL
    LOOP
        INSERT INTO ferryman_jobs (queue, name, args, kwargs, priority, max_attempts)
        VALUES (v_callback->>'queue', v_callback->>'name', v_callback->'args',
                (v_callback->'kwargs') || jsonb_build_object('batch', v_info),
                (v_callback->>'priority')::integer, (v_callback->>'max_attempts')::integer);
    END LOOP;
    RETURN true;
END
$$;

-- The one statement between two jobs of a lane thread. First the previous job's business,
-- whose outcome has committed: drop its claim (p_release, p_release_key) and, if it was the last
-- member of its batch, finish the batch (p_batch). Then claim the first due job of the queue
-- that no one holds, of the tenant whose turn it is (migrations/0130): take its advisory lock (and its concurrency key's), then mark it claimed
-- (claimed_by, claimed_at: it leaves the ready index) in a fresh snapshot, since a finisher may
-- have completed it between our scan and our lock.
-- Returns no row when nothing is claimable. The new lock outlives this statement.
CREATE FUNCTION ferryman_claim(p_queue text, p_window integer, p_release bigint DEFAULT NULL,
                               p_release_key text DEFAULT NULL, p_batch bigint DEFAULT NULL,
                               p_succeed bigint DEFAULT NULL)
RETURNS SETOF ferryman_jobs LANGUAGE plpgsql AS $$
DECLARE
    -- The tenants with a due job, in the order they are served: the highest priority first,
    -- then the tenant with the fewest running jobs of the queue, then the oldest job. One index
    -- descent per tenant (a skip scan of the ready index) and one for its next job; the running
    -- counts read the claimed rows' index, one entry per running job.
    tenants CURSOR FOR
        WITH RECURSIVE waiting(tenant) AS (
            (SELECT j.tenant FROM ferryman_jobs j
              WHERE j.status = 'ready' AND j.claimed_by IS NULL AND j.queue = p_queue
              ORDER BY j.tenant LIMIT 1)
            UNION ALL
            SELECT (SELECT j.tenant FROM ferryman_jobs j
                     WHERE j.status = 'ready' AND j.claimed_by IS NULL AND j.queue = p_queue
                       AND j.tenant > w.tenant
                     ORDER BY j.tenant LIMIT 1)
              FROM waiting w WHERE w.tenant IS NOT NULL
        ), running AS (
            SELECT j.tenant, count(*) AS n FROM ferryman_jobs j
             WHERE j.status = 'ready' AND j.claimed_by IS NOT NULL AND j.queue = p_queue
             GROUP BY j.tenant
        )
        SELECT w.tenant FROM waiting w
         CROSS JOIN LATERAL (
             SELECT j.priority, j.id FROM ferryman_jobs j
              WHERE j.status = 'ready' AND j.claimed_by IS NULL AND j.queue = p_queue
                AND j.tenant = w.tenant AND j.run_at <= now()
              ORDER BY j.priority DESC, j.id LIMIT 1) head
          LEFT JOIN running r ON r.tenant = w.tenant
         WHERE w.tenant IS NOT NULL
         ORDER BY head.priority DESC, coalesce(r.n, 0), head.id;
    -- an explicit cursor reads one index entry per FETCH (a FOR loop would read ten at a time)
    candidates CURSOR (p_tenant text) FOR
        SELECT id, concurrency_key FROM ferryman_jobs
        WHERE status = 'ready' AND claimed_by IS NULL AND queue = p_queue AND tenant = p_tenant
          AND run_at <= now()
        ORDER BY priority DESC, id;
    served record;
    cand record;
    claimed ferryman_jobs;
    held_back integer;
BEGIN
    -- This transaction's commit does not wait for its WAL to reach disk: nothing it writes needs
    -- to outlive a database crash on its own. WAL is replayed in order, so it is lost only with
    -- everything written after it: a lost claim leaves the job unclaimed (its lock died with the
    -- crash), a lost success runs the job again (at least once: a job that must run exactly once
    -- commits its completion with its writes, ctx.completing(), synchronously). Waiting for the
    -- flush held every running job's claim for the disk's latency (docs/decisions.md).
    PERFORM set_config('synchronous_commit', 'off', true);
    -- the previous job returned: its success (the end of its batch membership, if it is a
    -- member) commits with this statement; its batch is checked by a later one, which sees that
    -- committed. Its lock goes before that commit, harmless now that its row is marked claimed
    -- (no claim looks at it, and the dead-claim sweep leaves rows of live backends alone).
    -- It no longer counts as running for its tenant's turn.
    IF p_succeed IS NOT NULL THEN
        UPDATE ferryman_jobs
           SET status = 'succeeded', finished_at = now(), attempts = attempts + 1
         WHERE id = p_succeed AND status = 'ready';
    END IF;
    IF p_release IS NOT NULL THEN
        PERFORM pg_advisory_unlock(p_release);
    END IF;
    IF p_release_key IS NOT NULL THEN
        PERFORM pg_advisory_unlock(1718772481, hashtext(p_release_key));
    END IF;
    IF p_batch IS NOT NULL THEN
        PERFORM ferryman_finish_batch(p_batch);
    END IF;
    FOR served IN tenants LOOP
        held_back := 0;
        OPEN candidates(served.tenant);
        LOOP
            FETCH candidates INTO cand;
            EXIT WHEN NOT FOUND;
            -- locked: another claim of this moment holds it (not counted: at most one per claimer)
            CONTINUE WHEN NOT pg_try_advisory_lock(cand.id);
            IF cand.concurrency_key IS NOT NULL
               AND NOT pg_try_advisory_lock(1718772481, hashtext(cand.concurrency_key)) THEN
                PERFORM pg_advisory_unlock(cand.id);
                -- its key runs elsewhere: look at most p_window of these per tenant
                held_back := held_back + 1;
                EXIT WHEN held_back >= p_window;
                CONTINUE;
            END IF;
            UPDATE ferryman_jobs
               SET claims = claims + 1, claimed_by = pg_backend_pid(), claimed_at = now()
             WHERE id = cand.id AND status = 'ready' AND claimed_by IS NULL
            RETURNING * INTO claimed;
            IF FOUND THEN
                CLOSE candidates;
                RETURN NEXT claimed;
                RETURN;
            END IF;
            PERFORM pg_advisory_unlock(cand.id);
            IF cand.concurrency_key IS NOT NULL THEN
                PERFORM pg_advisory_unlock(1718772481, hashtext(cand.concurrency_key));
            END IF;
        END LOOP;
        CLOSE candidates;
    END LOOP;
END
$$;

-- Make dead claims claimable again: claimed rows whose lock is free, whoever's backend they
-- name (gone, or alive but its lock lost: a statement after the claim failed and the pool's
-- reset dropped the lock). A live claim's lock is held from before its claimed_by commits until
-- after its outcome commits (or, in the same transaction, clears the mark or ends the job), so
-- the try-lock cannot take a live one. Returns, per queue, how many it freed, and wakes that
-- many of the queue's threads.
CREATE FUNCTION ferryman_free_dead_claims() RETURNS TABLE (queue text, freed integer)
LANGUAGE plpgsql AS $$
DECLARE
    cand record;
    queues text[] := '{}';
BEGIN
    FOR cand IN
        SELECT j.id, j.queue FROM ferryman_jobs j
         WHERE j.status = 'ready' AND j.claimed_by IS NOT NULL
    LOOP
        CONTINUE WHEN NOT pg_try_advisory_lock(cand.id);
        UPDATE ferryman_jobs j SET claimed_by = NULL, claimed_at = NULL
         WHERE j.id = cand.id AND j.status = 'ready' AND j.claimed_by IS NOT NULL;
        IF FOUND THEN
            queues := queues || cand.queue;
        END IF;
        PERFORM pg_advisory_unlock(cand.id);
    END LOOP;
    RETURN QUERY
        SELECT q.queue, count(*)::integer FROM unnest(queues) AS q(queue) GROUP BY q.queue;
    PERFORM pg_notify('ferryman_jobs', q.queue || ':' || count(*))
       FROM unnest(queues) AS q(queue) GROUP BY q.queue;
END
$$;

-- ---- from migrations/0002_engine.sql
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
    error          text,
    provider_definition jsonb,                      -- migrations/0014: a declarative provider as admitted
    mapping        jsonb                            -- migrations/0020: the mapping as admitted
);
CREATE UNIQUE INDEX ferryman_runs_one_live ON ferryman_runs (workspace) WHERE state = 'running';
-- migrations/0140: a workspace's runs (its earlier runs' kinds, its last successful runs).
CREATE INDEX ferryman_runs_by_workspace ON ferryman_runs (workspace);
-- migrations/0070: a run's definition is written once, at admission: the workspace, the source, the credential
-- reference, the kinds, phases and options, and the provider and mapping snapshots. No statement
-- of ferryman changes them afterwards; whatever else reaches the row (a write path into ferryman's
-- tables, a role that may update them) is refused, so what a worker reads back is what admission
-- checked.
CREATE FUNCTION ferryman_runs_as_admitted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF (NEW.workspace, NEW.provider, NEW.base_url, NEW.credential, NEW.kinds, NEW.phases,
        NEW.options, NEW.provider_definition, NEW.mapping)
       IS DISTINCT FROM
       (OLD.workspace, OLD.provider, OLD.base_url, OLD.credential, OLD.kinds, OLD.phases,
        OLD.options, OLD.provider_definition, OLD.mapping) THEN
        RAISE EXCEPTION 'run % is as it was admitted: its definition cannot change', OLD.name
            USING ERRCODE = 'integrity_constraint_violation',
                  HINT = 'admit a new run (a new MigrationRun) instead';
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER ferryman_runs_as_admitted BEFORE UPDATE ON ferryman_runs
    FOR EACH ROW EXECUTE FUNCTION ferryman_runs_as_admitted();

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
    -- migrations/0090: what the task's page listed, for its kind's reconciliation (a page walk's
    -- tasks, set when the task is done): its records, the total the source stated on it (NULL:
    -- none), and the stop rule that ended its chain there (NULL: the chain went on)
    listed           integer,
    stated_total     bigint,
    ended_by         text,
    -- migrations/0100: records matched by the kind's natural key to rows the application had
    rows_matched     integer     NOT NULL DEFAULT 0,
    UNIQUE (run_id, kind, cursor_key)
);
CREATE INDEX ferryman_tasks_open ON ferryman_tasks (run_id, phase, status)
    WHERE status IN ('pending', 'queued', 'running');

-- Every source row written, in the same transaction as the write: a retried page, a resumed
-- task, a shifted offset never writes a row twice. row_id resolves foreign keys.
CREATE TABLE ferryman_ledger (
    workspace text COLLATE "C" NOT NULL,
    kind      text COLLATE "C" NOT NULL,
    source_id text COLLATE "C" NOT NULL,
    row_id    bigint NOT NULL,
    run_id    bigint NOT NULL,
    source_version text COLLATE "C",  -- migrations/0050: the row's source version (NULL: unknown)
    source_deleted_at timestamptz,    -- migrations/0050: when a delta saw the record deleted
    version_run_id bigint,            -- migrations/0060: the delta that updated it (NULL: run_id)
    PRIMARY KEY (workspace, kind, source_id)
);

-- (from migrations/0090_kind_verdicts.sql) Each kind's verdict, written by the barrier that closes
-- its phase: whether what the run listed adds up to what the source said it holds (reconciled,
-- unverified: the source states no total, short), or too many of its records were refused.
CREATE TABLE ferryman_run_kinds (
    run_id  bigint      NOT NULL REFERENCES ferryman_runs (id) ON DELETE CASCADE,
    kind    text        NOT NULL,
    verdict text        NOT NULL CHECK (verdict IN ('reconciled', 'unverified', 'short', 'refused')),
    listed  bigint,                -- records its pages listed (NULL: a tree kind, per parent)
    total   bigint,                -- the least total the source stated (NULL: none)
    note    text        NOT NULL,  -- what the verdict rests on, and the drift it explains
    at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, kind)
);

-- (from migrations/0110_verifications.sql) A finished run's verification: the source's ids
-- listed again and compared with the workspace's ledger. The run's latest request and where it
-- stands (request: the annotation's value, or "cli"; queued, running, done or failed).
CREATE TABLE ferryman_verifications (
    run_id       bigint      PRIMARY KEY REFERENCES ferryman_runs (id) ON DELETE CASCADE,
    request      text        NOT NULL,
    state        text        NOT NULL CHECK (state IN ('queued', 'running', 'done', 'failed')),
    error        text,
    requested_at timestamptz NOT NULL DEFAULT now(),
    finished_at  timestamptz
);

-- The ids a verification listed of a kind, until the kind is compared (then emptied).
CREATE TABLE ferryman_verify_listed (
    run_id    bigint NOT NULL REFERENCES ferryman_runs (id) ON DELETE CASCADE,
    kind      text COLLATE "C" NOT NULL,
    source_id text COLLATE "C" NOT NULL,
    PRIMARY KEY (run_id, kind, source_id)
);

-- Each kind's comparison: ids listed, missing from the ledger, gone from the source, the first
-- of each (at most ten).
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

-- (from migrations/0030_tenancy.sql) A run's credential, sealed by the operator at admission from
-- the Secret in the run's own namespace; workers read it here and need no Kubernetes API rights.
CREATE TABLE ferryman_run_credentials (
    run_id  bigint      PRIMARY KEY REFERENCES ferryman_runs (id) ON DELETE CASCADE,
    hosts   text[]      NOT NULL,  -- the hosts the credential is bound to (not secret)
    sealed  bytea       NOT NULL,  -- Fernet, with the installation's sealing key
    at      timestamptz NOT NULL DEFAULT now()
);

-- The namespace that owns each workspace: the first to run in it. A run of another namespace
-- naming it is refused at admission (runs of `ferryman run` are not checked).
CREATE TABLE ferryman_workspaces (
    workspace  text        PRIMARY KEY,
    namespace  text        NOT NULL,
    claimed_at timestamptz NOT NULL DEFAULT now()
);

-- (from migrations/0004_windows.sql, like the ledger's byte-wise collation)
-- Close a window: record its malformed rows (NULL, or a jsonb array of {source_id, reason}; one
-- recorded before, by a resumed task, is not counted again), write the task's checkpoint, beat the
-- run's heartbeat (at most every 10 s). It is also the gate: when the task is no longer this
-- job's, or its run is no longer running (cancelled, suspended), it raises FM001 and the whole
-- window rolls back. Returns the number of row errors recorded now. (migrations/0100: p_matched,
-- the records matched by the kind's natural key to rows the application already had.)
CREATE FUNCTION ferryman_close_window(
    p_task_id bigint, p_job_id bigint, p_run_id bigint, p_kind text, p_offset integer,
    p_written integer, p_skipped integer, p_errors jsonb, p_matched integer DEFAULT 0,
    p_commit text DEFAULT NULL
) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    failed integer := 0;
    beat timestamptz;
BEGIN
    IF p_commit IS NOT NULL THEN  -- how this window's transaction commits (its own setting)
        PERFORM set_config('synchronous_commit', p_commit, true);
    END IF;
    IF jsonb_array_length(p_errors) > 0 THEN
        INSERT INTO ferryman_row_errors (run_id, task_id, kind, source_id, reason)
        SELECT p_run_id, p_task_id, p_kind, e.source_id, e.reason
          FROM jsonb_to_recordset(p_errors) AS e(source_id text, reason text)
        ON CONFLICT (run_id, kind, source_id) DO NOTHING;
        GET DIAGNOSTICS failed = ROW_COUNT;
    END IF;
    UPDATE ferryman_tasks t
       SET processed_offset = p_offset, rows_written = t.rows_written + p_written,
           rows_skipped = t.rows_skipped + p_skipped, rows_failed = t.rows_failed + failed,
           rows_matched = t.rows_matched + p_matched, heartbeat_at = now()
      FROM ferryman_runs r
     WHERE t.id = p_task_id AND t.status = 'running' AND t.job_id = p_job_id
       AND r.id = t.run_id AND r.state = 'running' AND NOT r.suspended
    RETURNING r.heartbeat_at INTO beat;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'task % is no longer job %''s, or its run is not running', p_task_id,
            p_job_id USING ERRCODE = 'FM001';
    END IF;
    IF beat < now() - interval '10 seconds' THEN
        UPDATE ferryman_runs SET heartbeat_at = now() WHERE id = p_run_id;
    END IF;
    RETURN failed;
END
$$;

-- One budget per source credential, shared by every worker: leased in chunks, not per call.
CREATE TABLE ferryman_rate_budgets (
    credential   text             PRIMARY KEY,   -- a hash of base URL and token, never the token
    tokens       double precision NOT NULL,
    capacity     double precision NOT NULL,
    refill_per_s double precision NOT NULL,
    refilled_at  timestamptz      NOT NULL DEFAULT now(),
    paused_until timestamptz      NOT NULL DEFAULT 'epoch'
);

-- ---- from migrations/0003_democrm.sql
-- Destination tables of the built-in democrm provider. Each row carries its workspace and
-- source id; foreign keys are resolved through the ledger (source id -> row id).

CREATE TABLE crm_organizations (
    id         bigserial    PRIMARY KEY,
    workspace  text         NOT NULL,
    source_id  bigint       NOT NULL,
    name       varchar(255) NOT NULL,
    domain     varchar(255),
    created_at timestamptz
);

CREATE TABLE crm_people (
    id              bigserial    PRIMARY KEY,
    workspace       text         NOT NULL,
    source_id       bigint       NOT NULL,
    organization_id bigint       REFERENCES crm_organizations (id),
    name            varchar(255) NOT NULL,
    email           varchar(255),
    phone           varchar(64)
);

CREATE TABLE crm_deals (
    id              bigserial     PRIMARY KEY,
    workspace       text          NOT NULL,
    source_id       bigint        NOT NULL,
    organization_id bigint        REFERENCES crm_organizations (id),
    title           varchar(255)  NOT NULL,
    value           numeric(14, 2),
    currency        varchar(3),
    stage           varchar(64),
    status          varchar(32)
);

CREATE TABLE crm_deal_people (
    deal_id   bigint NOT NULL REFERENCES crm_deals (id),
    person_id bigint NOT NULL REFERENCES crm_people (id),
    PRIMARY KEY (deal_id, person_id)
);

CREATE TABLE crm_messages (
    id        bigserial    PRIMARY KEY,
    workspace text         NOT NULL,
    source_id bigint       NOT NULL,
    deal_id   bigint       REFERENCES crm_deals (id),
    subject   varchar(255) NOT NULL,
    sender    varchar(255),
    sent_at   timestamptz,
    body      text
);

-- ---- from migrations/0005_democrm_writers.sql
-- Writers of the democrm destination tables, one function per kind, called by the engine as
-- <writer>(rows, workspace, kind, run_id) inside a window's statement. Each takes the window's
-- validated records as a jsonb array, writes them and claims their ledger slots in one
-- statement, and returns how many it wrote. A record the ledger already holds makes it fail on
-- the ledger's key: the engine then writes the window again row by row, and that row is skipped
-- (written once, before). Foreign keys resolve through the ledger, one index probe per row
-- (LATERAL ... LIMIT 1: a hash join would read a kind's whole ledger per window).
-- PL/pgSQL, not SQL functions: PL/pgSQL keeps each statement's plan for the session.

CREATE FUNCTION democrm_write_organizations(
    p_rows jsonb, p_workspace text, p_kind text, p_run_id bigint
) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    n integer;
BEGIN
    WITH input AS (
        SELECT * FROM jsonb_to_recordset(p_rows)
            AS r(id bigint, name text, domain text, created_at timestamptz)
    ), written AS (
        INSERT INTO crm_organizations (workspace, source_id, name, domain, created_at)
        SELECT p_workspace, f.id, f.name, f.domain, f.created_at FROM input f
        RETURNING id, source_id
    ), claimed AS (
        INSERT INTO ferryman_ledger (workspace, kind, source_id, row_id, run_id)
        SELECT p_workspace, p_kind, w.source_id::text, w.id, p_run_id FROM written w
    )
    SELECT count(*) INTO n FROM written;
    RETURN n;
END
$$;

CREATE FUNCTION democrm_write_people(
    p_rows jsonb, p_workspace text, p_kind text, p_run_id bigint
) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    n integer;
BEGIN
    WITH input AS (
        SELECT * FROM jsonb_to_recordset(p_rows)
            AS r(id bigint, org_id bigint, name text, email text, phone text)
    ), written AS (
        INSERT INTO crm_people (workspace, source_id, organization_id, name, email, phone)
        SELECT p_workspace, f.id, org.row_id, f.name, f.email, f.phone
          FROM input f
          LEFT JOIN LATERAL (SELECT l.row_id FROM ferryman_ledger l
                              WHERE l.workspace = p_workspace AND l.kind = 'organizations'
                                AND l.source_id = f.org_id::text LIMIT 1) org ON true
        RETURNING id, source_id
    ), claimed AS (
        INSERT INTO ferryman_ledger (workspace, kind, source_id, row_id, run_id)
        SELECT p_workspace, p_kind, w.source_id::text, w.id, p_run_id FROM written w
    )
    SELECT count(*) INTO n FROM written;
    RETURN n;
END
$$;

CREATE FUNCTION democrm_write_deals(
    p_rows jsonb, p_workspace text, p_kind text, p_run_id bigint
) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    n integer;
BEGIN
    WITH input AS (
        SELECT * FROM jsonb_to_recordset(p_rows)
            AS r(id bigint, org_id bigint, person_ids jsonb, title text, value numeric,
                 currency text, stage text, status text)
    ), written AS (
        INSERT INTO crm_deals (workspace, source_id, organization_id, title, value, currency,
                               stage, status)
        SELECT p_workspace, f.id, org.row_id, f.title, f.value, f.currency, f.stage, f.status
          FROM input f
          LEFT JOIN LATERAL (SELECT l.row_id FROM ferryman_ledger l
                              WHERE l.workspace = p_workspace AND l.kind = 'organizations'
                                AND l.source_id = f.org_id::text LIMIT 1) org ON true
        RETURNING id, source_id
    ), claimed AS (
        INSERT INTO ferryman_ledger (workspace, kind, source_id, row_id, run_id)
        SELECT p_workspace, p_kind, w.source_id::text, w.id, p_run_id FROM written w
    ), members AS (
        INSERT INTO crm_deal_people (deal_id, person_id)
        SELECT DISTINCT w.id, person.row_id
          FROM written w
          JOIN input i ON i.id = w.source_id
         CROSS JOIN LATERAL jsonb_array_elements_text(i.person_ids) AS p(source_id)
          JOIN LATERAL (SELECT l.row_id FROM ferryman_ledger l
                         WHERE l.workspace = p_workspace AND l.kind = 'people'
                           AND l.source_id = p.source_id LIMIT 1) person ON true
    )
    SELECT count(*) INTO n FROM written;
    RETURN n;
END
$$;

CREATE FUNCTION democrm_write_messages(
    p_rows jsonb, p_workspace text, p_kind text, p_run_id bigint
) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    n integer;
BEGIN
    WITH input AS (
        SELECT * FROM jsonb_to_recordset(p_rows)
            AS r(id bigint, deal_id bigint, subject text, sender text, sent_at timestamptz,
                 body text)
    ), written AS (
        INSERT INTO crm_messages (workspace, source_id, deal_id, subject, sender, sent_at, body)
        SELECT p_workspace, f.id, deal.row_id, f.subject, f.sender, f.sent_at, f.body
          FROM input f
          LEFT JOIN LATERAL (SELECT l.row_id FROM ferryman_ledger l
                              WHERE l.workspace = p_workspace AND l.kind = 'deals'
                                AND l.source_id = f.deal_id::text LIMIT 1) deal ON true
        RETURNING id, source_id
    ), claimed AS (
        INSERT INTO ferryman_ledger (workspace, kind, source_id, row_id, run_id)
        SELECT p_workspace, p_kind, w.source_id::text, w.id, p_run_id FROM written w
    )
    SELECT count(*) INTO n FROM written;
    RETURN n;
END
$$;

-- ---- from migrations/0020_destinations.sql (and ferryman_runs.mapping, above)
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

-- ---- from migrations/0040_oauth_tokens.sql (and its column sealed, 0080)
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
    refreshed_at  timestamptz,
    -- (0080) both tokens are sealed with a key derived from the credential's own values; false
    -- only on a row written before tokens were sealed, until its credential's next use
    sealed        boolean     NOT NULL DEFAULT true
);

-- ---- from migrations/0050_source_versions.sql
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
