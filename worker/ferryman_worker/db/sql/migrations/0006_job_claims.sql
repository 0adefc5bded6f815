-- Claims are counted: the claim's re-read of the job row (is it still ready?) becomes an update
-- of its claim count, committed with the claim. A claim that ends neither in an attempt's outcome
-- nor in a deferral is one whose process died (or lost its database) mid-job; the runner counts
-- those as attempts, so a job that crashes its worker every time fails for good after
-- max_attempts instead of being retried forever.

ALTER TABLE ferryman_jobs ADD COLUMN claims integer NOT NULL DEFAULT 0;
-- Room on each page for the claim's new row version: a heap-only update, no new index entries.
ALTER TABLE ferryman_jobs SET (fillfactor = 80);

CREATE OR REPLACE FUNCTION ferryman_claim(p_queue text, p_window integer, p_release bigint DEFAULT NULL,
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
        UPDATE ferryman_jobs SET claims = claims + 1 WHERE id = cand.id AND status = 'ready'
        RETURNING * INTO claimed;
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
