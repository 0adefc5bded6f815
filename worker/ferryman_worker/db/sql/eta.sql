-- The work a run has left, for its ETA (worker/ferryman_worker/eta.py).

-- name: open_work
-- Per run of ``run_ids`` and kind: its phase, tasks (all, done), the rows handled (written, skipped or
-- malformed), the time some task of the kind was working, and for a tree kind its parents in
-- all and those already walked (a done task's all, a running one's up to its checkpoint); for a
-- page kind whose source states its total, the greatest total stated and the records listed.
SELECT t.run_id, t.kind, t.phase, count(*) AS tasks,
       max(t.stated_total) AS total, coalesce(sum(t.listed), 0)::bigint AS listed,
       count(*) FILTER (WHERE t.status = 'done') AS done,
       coalesce(sum(t.rows_written + t.rows_skipped + t.rows_failed), 0)::bigint AS rows,
       coalesce(sum(jsonb_array_length(t.cursor -> 'parents')), 0)::bigint AS parents,
       coalesce(sum(CASE WHEN t.status = 'done' THEN jsonb_array_length(t.cursor -> 'parents')
                         ELSE least(t.processed_offset, jsonb_array_length(t.cursor -> 'parents'))
                    END), 0)::bigint AS parents_done
  FROM ferryman_tasks t
 WHERE t.run_id = ANY(%(run_ids)s::bigint[])
 GROUP BY t.run_id, t.kind, t.phase ORDER BY t.run_id, t.phase, t.kind;
