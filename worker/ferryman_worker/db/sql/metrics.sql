-- The queries the worker's /metrics endpoint runs at scrape time (cached a few seconds, so
-- scrapes never load the database). Only ready rows are read: never the finished history.

-- name: queue_depth
-- Per queue: jobs ready (due, unclaimed), scheduled (not yet due), and the age in seconds of
-- the oldest ready one. A claim is an advisory lock on the job id, visible in pg_locks.
WITH held AS (
    SELECT ((l.classid::bigint << 32) | l.objid::bigint) AS id
      FROM pg_locks l
     WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted
       AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
)
SELECT j.queue,
       count(*) FILTER (WHERE j.run_at <= now()) AS ready,
       count(*) FILTER (WHERE j.run_at > now()) AS scheduled,
       coalesce(extract(epoch FROM now() - min(j.run_at) FILTER (WHERE j.run_at <= now())), 0)
           ::float8 AS oldest_ready_seconds
  FROM ferryman_jobs j
 WHERE j.status = 'ready' AND NOT EXISTS (SELECT 1 FROM held h WHERE h.id = j.id)
 GROUP BY j.queue;

-- name: ended_runs
-- Which of these runs have ended (their per-run series can go).
SELECT id FROM ferryman_runs WHERE id = ANY(%(ids)s) AND state <> 'running';
