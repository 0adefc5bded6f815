-- The capsule: jobs, batches and worker processes.
-- A claim is a session advisory lock on the job id (bigint key space), never a state field:
-- a running job is a 'ready' row whose lock is held.

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
    last_traceback  text
);

-- The claim's index: only ready rows, in claim order.
CREATE INDEX ferryman_jobs_ready ON ferryman_jobs (queue, priority DESC, id) WHERE status = 'ready';
CREATE INDEX ferryman_jobs_batch ON ferryman_jobs (batch_id) WHERE batch_id IS NOT NULL;
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

-- A row per live member of a batch; deleted when the member succeeds or fails for good.
CREATE TABLE ferryman_batch_members (
    batch_id bigint NOT NULL,
    job_id   bigint NOT NULL,
    PRIMARY KEY (batch_id, job_id)
);

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

-- Wake the workers of each queue when jobs are inserted; the payload is the queue, and for
-- jobs not yet due '|' and the epoch second they are due. NOTIFY is delivered at commit.
CREATE FUNCTION ferryman_notify_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('ferryman_jobs',
                      q.queue || CASE WHEN q.due > now()
                                      THEN '|' || extract(epoch FROM q.due)::text ELSE '' END)
    FROM (SELECT queue, min(run_at) AS due FROM inserted WHERE status = 'ready' GROUP BY queue) q;
    RETURN NULL;
END
$$;

CREATE TRIGGER ferryman_jobs_notify AFTER INSERT ON ferryman_jobs
    REFERENCING NEW TABLE AS inserted
    FOR EACH STATEMENT EXECUTE FUNCTION ferryman_notify_inserted();

-- Finish a batch if no member is left: compare-and-set on finished_at, so exactly one caller
-- wins; the winner writes the counters' snapshot and enqueues the callbacks in its transaction.
CREATE FUNCTION ferryman_finish_batch(p_batch bigint) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    b ferryman_batches;
    v_total integer;
    v_failed integer;
    v_info jsonb;
    v_callback jsonb;
BEGIN
    -- Members finish roughly in id order, so look from the newest: the dead index entries of
    -- finished members pile up at the oldest end, and an EXISTS from there would step over them.
    PERFORM 1 FROM ferryman_batch_members WHERE batch_id = p_batch ORDER BY job_id DESC LIMIT 1;
    IF FOUND THEN
        RETURN false;
    END IF;
    SELECT count(*), count(*) FILTER (WHERE status IN ('failed', 'discarded'))
        INTO v_total, v_failed
        FROM ferryman_jobs WHERE batch_id = p_batch;
    UPDATE ferryman_batches
       SET finished_at = now(), total_jobs = v_total, failed_jobs = v_failed,
           completed_jobs = v_total - v_failed
     WHERE id = p_batch AND finished_at IS NULL AND sealed_at IS NOT NULL
       AND NOT EXISTS (SELECT 1 FROM ferryman_batch_members WHERE batch_id = p_batch)
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
-- that no one holds: take its advisory lock (and its concurrency key's), then re-read it in a
-- fresh snapshot, since a finisher may have completed it between our scan and our lock.
-- Returns no row when nothing is claimable. The new lock outlives this statement.
CREATE FUNCTION ferryman_claim(p_queue text, p_window integer, p_release bigint DEFAULT NULL,
                               p_release_key text DEFAULT NULL, p_batch bigint DEFAULT NULL)
RETURNS SETOF ferryman_jobs LANGUAGE plpgsql AS $$
DECLARE
    cand record;
    claimed ferryman_jobs;
BEGIN
    IF p_release IS NOT NULL THEN
        PERFORM pg_advisory_unlock(p_release);
    END IF;
    IF p_release_key IS NOT NULL THEN
        PERFORM pg_advisory_unlock(1718772481, hashtext(p_release_key));
    END IF;
    IF p_batch IS NOT NULL THEN
        PERFORM ferryman_finish_batch(p_batch);
    END IF;
    FOR cand IN
        SELECT id, concurrency_key FROM ferryman_jobs
        WHERE status = 'ready' AND queue = p_queue AND run_at <= now()
        ORDER BY priority DESC, id
        LIMIT p_window
    LOOP
        CONTINUE WHEN NOT pg_try_advisory_lock(cand.id);
        IF cand.concurrency_key IS NOT NULL
           AND NOT pg_try_advisory_lock(1718772481, hashtext(cand.concurrency_key)) THEN
            PERFORM pg_advisory_unlock(cand.id);
            CONTINUE;
        END IF;
        SELECT * INTO claimed FROM ferryman_jobs WHERE id = cand.id AND status = 'ready';
        IF FOUND THEN
            RETURN NEXT claimed;
            RETURN;
        END IF;
        PERFORM pg_advisory_unlock(cand.id);
        IF cand.concurrency_key IS NOT NULL THEN
            PERFORM pg_advisory_unlock(1718772481, hashtext(cand.concurrency_key));
        END IF;
    END LOOP;
END
$$;
