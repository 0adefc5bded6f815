-- Claims at fleet scale. Running jobs leave the claim's index: the claim also writes
-- the claiming backend's pid into claimed_by, and the ready index holds only unclaimed rows, so
-- a claim's scan never walks past running jobs, however many run. The advisory lock is still the
-- proof that a claim is alive: a row whose claimed_by is set but whose lock no one holds is a
-- dead claim (its process or connection died), made claimable again by ferryman_free_dead_claims,
-- which workers call when one of them is gone, after a reconnect, and every poll interval.
-- claimed_by and claimed_at stay on a finished row: who ran it last.
-- The claim also writes the previous job's success (p_succeed): one commit per job fewer.
-- Notifications now say how many jobs are due ('queue:n:first id'), so a worker wakes that many
-- threads.

ALTER TABLE ferryman_jobs ADD COLUMN claimed_by integer;     -- pid of the claim's backend
ALTER TABLE ferryman_jobs ADD COLUMN claimed_at timestamptz; -- when it was claimed
DROP INDEX ferryman_jobs_ready;
CREATE INDEX ferryman_jobs_ready ON ferryman_jobs (queue, priority DESC, id)
    WHERE status = 'ready' AND claimed_by IS NULL;
CREATE INDEX ferryman_jobs_claimed ON ferryman_jobs (claimed_by)
    WHERE status = 'ready' AND claimed_by IS NOT NULL;

CREATE OR REPLACE FUNCTION ferryman_notify_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
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

DROP FUNCTION ferryman_claim(text, integer, bigint, text, bigint);
CREATE FUNCTION ferryman_claim(p_queue text, p_window integer, p_release bigint DEFAULT NULL,
                               p_release_key text DEFAULT NULL, p_batch bigint DEFAULT NULL,
                               p_succeed bigint DEFAULT NULL)
RETURNS SETOF ferryman_jobs LANGUAGE plpgsql AS $$
DECLARE
    -- an explicit cursor reads one index entry per FETCH (a FOR loop would read ten at a time)
    candidates CURSOR FOR
        SELECT id, concurrency_key FROM ferryman_jobs
        WHERE status = 'ready' AND claimed_by IS NULL AND queue = p_queue AND run_at <= now()
        ORDER BY priority DESC, id;
    cand record;
    claimed ferryman_jobs;
    held_back integer := 0;
BEGIN
    -- the previous job returned: its success (and the end of its batch membership) commits
    -- with this statement; its batch is checked by the next one, which sees that committed.
    -- Its lock goes before that commit, harmless now that its row is marked claimed (no claim
    -- looks at it, and the dead-claim sweep leaves rows of live backends alone).
    IF p_succeed IS NOT NULL THEN
        WITH done AS (
            UPDATE ferryman_jobs
               SET status = 'succeeded', finished_at = now(), attempts = attempts + 1
             WHERE id = p_succeed AND status = 'ready'
            RETURNING id, batch_id
        )
        DELETE FROM ferryman_batch_members m USING done
         WHERE m.batch_id = done.batch_id AND m.job_id = done.id;
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
    OPEN candidates;
    LOOP
        FETCH candidates INTO cand;
        EXIT WHEN NOT FOUND;
        -- locked: another claim of this moment holds it (not counted: at most one per claimer)
        CONTINUE WHEN NOT pg_try_advisory_lock(cand.id);
        IF cand.concurrency_key IS NOT NULL
           AND NOT pg_try_advisory_lock(1718772481, hashtext(cand.concurrency_key)) THEN
            PERFORM pg_advisory_unlock(cand.id);
            held_back := held_back + 1;  -- its key runs elsewhere: look at most p_window of these
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
END
$$;

-- Make dead claims claimable again: claimed rows whose claiming backend is gone (or is a newer
-- backend that reused its pid) and whose lock is free. A live claim's lock is held from before
-- its claimed_by commits until after its outcome commits, so the try-lock cannot take a live one.
-- Returns, per queue, how many it freed, and wakes that many of the queue's threads.
CREATE FUNCTION ferryman_free_dead_claims() RETURNS TABLE (queue text, freed integer)
LANGUAGE plpgsql AS $$
DECLARE
    cand record;
    queues text[] := '{}';
BEGIN
    FOR cand IN
        SELECT j.id, j.queue FROM ferryman_jobs j
         WHERE j.status = 'ready' AND j.claimed_by IS NOT NULL
           AND NOT EXISTS (SELECT 1 FROM pg_stat_activity a
                            WHERE a.pid = j.claimed_by AND a.backend_start <= j.claimed_at)
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
