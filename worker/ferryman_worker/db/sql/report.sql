-- The migration report's own queries (worker/ferryman_worker/report). Its figures per kind are
-- those `ferryman status` shows (engine.sql: run_progress, kind_progress); these add what only the
-- report shows.

-- name: report_refusals
-- A run's refused records (row errors) grouped by kind and reason: how many, and the source ids
-- of the first few recorded; per kind the most frequent ``reasons`` reasons. A reason is grouped
-- by its shape: what names one record in it (the path of the request that found it gone, the id
-- of the record it references) is elided, so that such records are counted together.
WITH shaped AS (
    SELECT id, kind, source_id,
           left(regexp_replace(regexp_replace(reason,
                   '\m(GET|POST|PUT|PATCH|DELETE|HEAD) \S+:', '\1 …:', 'g'),
                   '(references \S+) \S+, which is not imported', '\1 …, which is not imported',
                   'g'), 300) AS reason
      FROM ferryman_row_errors
     WHERE run_id = %(run_id)s
), grouped AS (
    SELECT kind, reason, count(*) AS n,
           (array_agg(source_id ORDER BY id))[1:%(examples)s] AS examples,
           row_number() OVER (PARTITION BY kind ORDER BY count(*) DESC, reason) AS rank
      FROM shaped
     GROUP BY kind, reason
)
SELECT kind, reason, n, examples FROM grouped WHERE rank <= %(reasons)s ORDER BY kind, rank;

-- name: report_deleted
-- The records of the run's workspace its delta found deleted at the source: the ledger notes
-- when (source_deleted_at), and a workspace has one live run at a time, so a note made while the
-- run was live is the run's.
SELECT l.kind, count(*) AS deleted
  FROM ferryman_runs r
  JOIN ferryman_ledger l ON l.workspace = r.workspace
 WHERE r.id = %(run_id)s
   AND l.source_deleted_at BETWEEN r.started_at AND coalesce(r.finished_at, now())
 GROUP BY l.kind;
