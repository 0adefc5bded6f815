-- The queries the worker's /metrics endpoint runs at scrape time (cached a few seconds, so
-- scrapes never load the database). Only ready rows are read: never the finished history.

-- name: queue_depth
-- Per queue: jobs ready (due, unclaimed), scheduled (not yet due), and the age in seconds of
-- the oldest ready one. Only unclaimed ready rows: the claim's own partial index.
SELECT queue,
       count(*) FILTER (WHERE run_at <= now()) AS ready,
       count(*) FILTER (WHERE run_at > now()) AS scheduled,
       coalesce(extract(epoch FROM now() - min(run_at) FILTER (WHERE run_at <= now())), 0)
           ::float8 AS oldest_ready_seconds
  FROM ferryman_jobs
 WHERE status = 'ready' AND claimed_by IS NULL
 GROUP BY queue;

-- name: ended_runs
-- Which of these runs have ended (their per-run series can go).
SELECT id FROM ferryman_runs WHERE id = ANY(%(ids)s) AND state <> 'running';
