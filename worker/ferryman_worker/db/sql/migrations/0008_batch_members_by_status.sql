-- A batch member costs no more writes than a plain job (the target: batch overhead <= 5 %).
-- A member is live while its job is 'ready' (waiting, claimed, or waiting out a retry): the
-- membership rows, inserted at enqueue and deleted at each member's end, go. The member's end
-- is the job row's own status change, already written; so is its claim. Liveness is read from
-- two partial indexes that cost a member nothing while it is drained: ready unclaimed members
-- (written at enqueue, and when a claim is given back), and claimed rows (the dead-claim sweep's
-- index, which every claim writes anyway, now keyed by batch). Finished members are not indexed
-- by batch; the finisher's totals come from a row per enqueue statement (the jobs it added to
-- the batch) and from the failed members, indexed as they fail (rare).

-- in-flight batches: their totals so far, before the membership rows go
CREATE TABLE ferryman_batch_enqueues (
    batch_id bigint NOT NULL,
    jobs     integer NOT NULL
);
CREATE INDEX ferryman_batch_enqueues_batch ON ferryman_batch_enqueues (batch_id);
INSERT INTO ferryman_batch_enqueues (batch_id, jobs)
SELECT j.batch_id, count(*) FROM ferryman_jobs j
  JOIN ferryman_batches b ON b.id = j.batch_id AND b.finished_at IS NULL
 GROUP BY j.batch_id;

DROP TABLE ferryman_batch_members;
DROP INDEX ferryman_jobs_batch;
DROP INDEX ferryman_jobs_claimed;
-- Claimed rows: for the dead-claim sweep (all of them), and for the live members of a batch.
CREATE INDEX ferryman_jobs_claimed ON ferryman_jobs (batch_id, id)
    WHERE status = 'ready' AND claimed_by IS NOT NULL;
-- Ready members no one holds.
CREATE INDEX ferryman_jobs_batch_ready ON ferryman_jobs (batch_id, id)
    WHERE status = 'ready' AND claimed_by IS NULL AND batch_id IS NOT NULL;
-- Members that failed for good (or were discarded after): the finisher's failed count.
CREATE INDEX ferryman_jobs_batch_failed ON ferryman_jobs (batch_id)
    WHERE status IN ('failed', 'discarded') AND batch_id IS NOT NULL;

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

CREATE OR REPLACE FUNCTION ferryman_finish_batch(p_batch bigint) RETURNS boolean
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
