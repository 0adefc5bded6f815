-- A fair share of a lane between tenants. A job carries its tenant (a migration task job: its
-- run's namespace; '' for a job that names none); when several tenants have due jobs, a claim
-- serves the one with the fewest running jobs of the queue first, and claims in order within it.
-- One namespace's fifty runs queued ahead no longer hold back another namespace's run until
-- theirs drain.
ALTER TABLE ferryman_jobs ADD COLUMN tenant text NOT NULL DEFAULT '';

DROP INDEX ferryman_jobs_ready;
CREATE INDEX ferryman_jobs_ready ON ferryman_jobs (queue, tenant, priority DESC, id)
    WHERE status = 'ready' AND claimed_by IS NULL;
CREATE INDEX ferryman_jobs_running ON ferryman_jobs (queue, tenant)
    WHERE status = 'ready' AND claimed_by IS NOT NULL;

CREATE OR REPLACE FUNCTION ferryman_claim(p_queue text, p_window integer, p_release bigint DEFAULT NULL,
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
