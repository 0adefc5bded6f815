-- A claim commits asynchronously (claims at fleet scale). Each claim's commit waited
-- for its WAL to reach disk while the thread still held the job it had just finished, so at 256
-- jobs running a 200 ms job held its claim 218 ms (median; 390 ms at the 99th percentile) on
-- this kind of disk: the flush, not the scan, set the fleet's throughput. Nothing a claim writes
-- needs to survive a crash on its own (WAL replays in order): see the comment in the function.

CREATE OR REPLACE FUNCTION ferryman_claim(p_queue text, p_window integer,
                                          p_release bigint DEFAULT NULL,
                                          p_release_key text DEFAULT NULL,
                                          p_batch bigint DEFAULT NULL,
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
