-- A claim mark whose lock no one holds is freed, whoever's backend it names. A live connection
-- can lose its lock and keep its mark: a statement after the claim's commit fails (cancelled, a
-- lock timeout) and the connection goes back to the pool, whose reset drops every lock it held.
-- The sweep skipped marks of live backends, so such a job stayed claimed until its process
-- exited.

CREATE OR REPLACE FUNCTION ferryman_free_dead_claims() RETURNS TABLE (queue text, freed integer)
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
