-- Named queries of the capsule. Each starts with "-- name: <name>" and uses psycopg's
-- %(name)s placeholders. Loaded once by ferryman_worker.db.queries.

-- name: enqueue
-- Insert jobs given as parallel arrays (one element per job), and count them into their batch
-- (one row per statement and batch: the batch's total, when it finishes).
WITH inserted AS (
    INSERT INTO ferryman_jobs (queue, name, args, kwargs, priority, run_at, max_attempts,
                               concurrency_key, batch_id, tenant)
    SELECT q, n, a, k, p, coalesce(r, now()), m, c, b, t
      FROM unnest(%(queue)s::text[], %(name)s::text[], %(args)s::jsonb[], %(kwargs)s::jsonb[],
                  %(priority)s::integer[], %(run_at)s::timestamptz[], %(max_attempts)s::integer[],
                  %(concurrency_key)s::text[], %(batch_id)s::bigint[], %(tenant)s::text[])
           AS t(q, n, a, k, p, r, m, c, b, t)
    RETURNING id, batch_id
), counted AS (
    INSERT INTO ferryman_batch_enqueues (batch_id, jobs)
    SELECT batch_id, count(*) FROM inserted WHERE batch_id IS NOT NULL GROUP BY batch_id
)
SELECT id FROM inserted ORDER BY id;

-- name: enqueue_cron
-- Insert the job of one recurring entry's tick; a second process's insert does nothing.
INSERT INTO ferryman_jobs (queue, name, priority, max_attempts, run_at, cron_key)
VALUES (%(queue)s, %(name)s, %(priority)s, %(max_attempts)s, %(run_at)s, %(cron_key)s)
ON CONFLICT (cron_key) WHERE cron_key IS NOT NULL DO NOTHING
RETURNING id;

-- name: claim
-- Write the previous job's success (if asked), release it (if any), finish its batch (if asked),
-- claim the next; with how long it waited since it was due (its enqueue's commit, or its
-- scheduled or retry time), in seconds on the database's clock, for the wake-up metric.
SELECT *, extract(epoch FROM clock_timestamp() - greatest(run_at, created_at))::float8 AS waited
  FROM ferryman_claim(%(queue)s, %(window)s, %(release)s, %(release_key)s, %(batch)s,
                      %(succeed)s);

-- name: release
-- Give up the claim's locks once the job's outcome has committed.
SELECT pg_advisory_unlock(%(id)s::bigint),
       CASE WHEN %(concurrency_key)s::text IS NULL THEN true
            ELSE pg_advisory_unlock(1718772481, hashtext(%(concurrency_key)s::text)) END;

-- name: succeed
-- Mark a claimed job succeeded (a member leaves its batch: it is no longer ready). No row: it
-- was already finished.
UPDATE ferryman_jobs
   SET status = 'succeeded', finished_at = now(), attempts = attempts + 1
 WHERE id = %(id)s AND status = 'ready'
RETURNING id;

-- name: retry_later
-- A failed attempt with attempts to spare: run again at %(run_at)s, unclaimed.
UPDATE ferryman_jobs
   SET attempts = attempts + 1, run_at = %(run_at)s, last_error = %(error)s,
       last_traceback = %(traceback)s, claimed_by = NULL, claimed_at = NULL
 WHERE id = %(id)s AND status = 'ready'
RETURNING queue, pg_notify('ferryman_jobs', queue || '|' || extract(epoch FROM run_at)::text);

-- name: fail
-- The last attempt failed: keep the job for inspection (a member leaves its batch, failed).
UPDATE ferryman_jobs
   SET status = 'failed', finished_at = now(), attempts = attempts + 1,
       last_error = %(error)s, last_traceback = %(traceback)s
 WHERE id = %(id)s AND status = 'ready'
RETURNING id;

-- name: defer
-- Pressure: put the job back without running it and without counting an attempt.
UPDATE ferryman_jobs
   SET run_at = %(run_at)s, deferrals = deferrals + 1, claimed_by = NULL, claimed_at = NULL
 WHERE id = %(id)s AND status = 'ready'
RETURNING pg_notify('ferryman_jobs', queue || '|' || extract(epoch FROM run_at)::text);

-- name: unclaim
-- A claim given up without an outcome (the job's thread hit a database error but its connection
-- still works): the job is ready again at once, its claim counted as a died attempt.
WITH freed AS (
    UPDATE ferryman_jobs SET claimed_by = NULL, claimed_at = NULL
     WHERE id = %(id)s AND status = 'ready' AND claimed_by = pg_backend_pid()
    RETURNING queue
)
SELECT pg_advisory_unlock(%(id)s::bigint),
       CASE WHEN %(concurrency_key)s::text IS NULL THEN true
            ELSE pg_advisory_unlock(1718772481, hashtext(%(concurrency_key)s::text)) END,
       (SELECT pg_notify('ferryman_jobs', queue || ':1') FROM freed);

-- name: free_dead_claims
-- Claims whose backend is gone (process killed, connection cut, server restarted): claimable.
SELECT queue, freed FROM ferryman_free_dead_claims();

-- name: finish_batch
SELECT ferryman_finish_batch(%(batch_id)s) AS finished;

-- name: create_batch
INSERT INTO ferryman_batches (metadata, on_finish, on_success, on_failure)
VALUES (%(metadata)s, %(on_finish)s, %(on_success)s, %(on_failure)s)
RETURNING id;

-- name: seal_batch
UPDATE ferryman_batches SET sealed_at = now() WHERE id = %(batch_id)s AND sealed_at IS NULL;

-- name: active_queries
SELECT count(*) AS active FROM pg_stat_activity
 WHERE state = 'active' AND datname = current_database() AND pid <> pg_backend_pid();

-- name: new_worker_id
SELECT nextval('ferryman_workers_id_seq') AS id;

-- name: register_worker
-- On every (re)connect of the notifier: this process is alive behind this backend.
INSERT INTO ferryman_workers (id, hostname, pid, lanes, backend_pid)
VALUES (%(id)s, %(hostname)s, %(pid)s, %(lanes)s, pg_backend_pid())
ON CONFLICT (id) DO UPDATE SET backend_pid = pg_backend_pid(), heartbeat_at = now();

-- name: reap_dead_workers
-- Other worker processes whose LISTEN backend is gone: they died, or lost their connection.
-- Their claims went with their connections; the caller frees them. After a server restart
-- every backend is gone: a worker registered before it is only disconnected, and is reaped only
-- if it has not registered again within %(grace)s seconds.
DELETE FROM ferryman_workers w
 WHERE w.id <> %(self)s
   AND NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = w.backend_pid)
   AND (w.heartbeat_at >= pg_postmaster_start_time()
        OR pg_postmaster_start_time() < now() - make_interval(secs => %(grace)s))
RETURNING id, hostname, pid;

-- name: heartbeat
-- Only while the process's LISTEN backend lives: after a server restart, a worker's heartbeat
-- says it registered again (see reap_dead_workers).
UPDATE ferryman_workers w SET heartbeat_at = now()
 WHERE w.id = %(id)s AND EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = w.backend_pid);

-- name: unregister_worker
DELETE FROM ferryman_workers WHERE id = %(id)s;

-- name: queue_counts
-- Per queue: ready (due, unclaimed), running (claimed: lock held), scheduled (not yet due),
-- failed. A claim is an advisory lock on the job id, visible in pg_locks.
WITH held AS (
    SELECT ((l.classid::bigint << 32) | l.objid::bigint) AS id
      FROM pg_locks l
     WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted
       AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
)
SELECT j.queue,
       count(*) FILTER (WHERE j.status = 'ready' AND h.id IS NULL AND j.run_at <= now()) AS ready,
       count(*) FILTER (WHERE j.status = 'ready' AND h.id IS NOT NULL) AS running,
       count(*) FILTER (WHERE j.status = 'ready' AND h.id IS NULL AND j.run_at > now())
           AS scheduled,
       count(*) FILTER (WHERE j.status = 'failed') AS failed,
       count(*) FILTER (WHERE j.status = 'succeeded') AS succeeded
  FROM ferryman_jobs j LEFT JOIN held h ON h.id = j.id
 WHERE j.status IN ('ready', 'failed', 'succeeded')
 GROUP BY j.queue ORDER BY j.queue;

-- name: failed_jobs
SELECT id, queue, name, attempts, finished_at, last_error FROM ferryman_jobs
 WHERE status = 'failed' ORDER BY id LIMIT %(limit)s;

-- name: retry_failed
-- Put failed jobs back; a member of a batch still live rejoins it (it is ready again), so the
-- batch waits for it; a finished batch stays finished.
WITH again AS (
    UPDATE ferryman_jobs
       SET status = 'ready', attempts = 0, claims = 0, deferrals = 0, run_at = now(),
           finished_at = NULL, claimed_by = NULL, claimed_at = NULL
     WHERE status = 'failed' AND (%(all)s OR id = ANY(%(ids)s::bigint[]))
    RETURNING id, queue, batch_id
), woken AS (
    SELECT pg_notify('ferryman_jobs', queue) FROM (SELECT DISTINCT queue FROM again) q
)
SELECT (SELECT count(*) FROM again) AS retried, (SELECT count(*) FROM woken) AS queues;

-- name: discard_failed
UPDATE ferryman_jobs SET status = 'discarded'
 WHERE status = 'failed' AND (%(all)s OR id = ANY(%(ids)s::bigint[]))
RETURNING id;

-- name: batches
-- A live batch's figures so far: total enqueued, failed members, pending (ready) members; the
-- rest completed. A finished batch's are its snapshot.
SELECT b.id, b.metadata, b.created_at, b.sealed_at, b.finished_at,
       coalesce(b.total_jobs, live.total) AS total,
       coalesce(b.completed_jobs, live.total - live.failed - live.pending) AS completed,
       coalesce(b.failed_jobs, live.failed) AS failed,
       coalesce(live.pending, 0) AS pending
  FROM ferryman_batches b
  LEFT JOIN LATERAL (
      SELECT (SELECT coalesce(sum(e.jobs), 0) FROM ferryman_batch_enqueues e
               WHERE e.batch_id = b.id) AS total,
             (SELECT count(*) FROM ferryman_jobs j
               WHERE j.batch_id = b.id AND j.status IN ('failed', 'discarded')) AS failed,
             (SELECT count(*) FROM ferryman_jobs j
               WHERE j.batch_id = b.id AND j.status = 'ready' AND j.claimed_by IS NULL)
           + (SELECT count(*) FROM ferryman_jobs j
               WHERE j.batch_id = b.id AND j.status = 'ready' AND j.claimed_by IS NOT NULL)
               AS pending
       WHERE b.finished_at IS NULL
  ) live ON true
 ORDER BY b.id DESC LIMIT %(limit)s;

-- name: seal_stalled_batches
-- Batches whose enqueuing process died before sealing them.
UPDATE ferryman_batches SET sealed_at = now()
 WHERE sealed_at IS NULL AND created_at < now() - make_interval(secs => %(stalled_for)s)
RETURNING id;

-- name: finish_stalled_batches
-- Sealed batches with no live member whose finisher's after-commit check was lost (its process
-- died), or whose members were finished, discarded or deleted by hand.
SELECT b.id, ferryman_finish_batch(b.id) AS finished FROM ferryman_batches b
 WHERE b.finished_at IS NULL AND b.sealed_at IS NOT NULL AND NOT ferryman_batch_live(b.id);

-- name: prune_jobs
-- Finished jobs past the retention, except members of a batch still live: its final snapshot
-- counts them. (Failed jobs stay until discarded.)
DELETE FROM ferryman_jobs
 WHERE id IN (SELECT j.id FROM ferryman_jobs j
               WHERE j.status IN ('succeeded', 'discarded')
                 AND j.finished_at < now() - make_interval(secs => %(older_than)s)
                 AND NOT EXISTS (SELECT 1 FROM ferryman_batches b
                                  WHERE b.id = j.batch_id AND b.finished_at IS NULL)
               LIMIT %(limit)s);

-- name: prune_batches
-- Batches finished before the retention, with their enqueue counts; never a live batch.
WITH pruned AS (
    DELETE FROM ferryman_batches
     WHERE finished_at < now() - make_interval(secs => %(older_than)s)
    RETURNING id
), counts AS (
    DELETE FROM ferryman_batch_enqueues e USING pruned WHERE e.batch_id = pruned.id
)
SELECT id FROM pruned;

-- name: prune_workers
DELETE FROM ferryman_workers
 WHERE heartbeat_at < now() - make_interval(secs => %(older_than)s);

-- name: connection_budget
-- The database's connection budget, for the operator's sizing of the worker pool:
-- reserved_connections exists from PostgreSQL 16 on (missing_ok, then 0).
SELECT current_setting('max_connections')::int AS max_connections,
       current_setting('superuser_reserved_connections')::int AS superuser_reserved,
       coalesce(current_setting('reserved_connections', true), '0')::int AS reserved;
