-- A window's statement says how its transaction commits (p_commit: 'off' for an asynchronous
-- commit, the default for a task's windows; NULL: as the session says), local to that
-- transaction. A task no longer sets synchronous_commit for its connection and resets it after:
-- two statements fewer a task, and nothing of the setting outlives the window. Last and
-- defaulting to NULL, so a worker of the release before closes its windows unchanged.
DROP FUNCTION ferryman_close_window(bigint, bigint, bigint, text, integer, integer, integer, jsonb,
                                    integer);

CREATE FUNCTION ferryman_close_window(
    p_task_id bigint, p_job_id bigint, p_run_id bigint, p_kind text, p_offset integer,
    p_written integer, p_skipped integer, p_errors jsonb, p_matched integer DEFAULT 0,
    p_commit text DEFAULT NULL
) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    failed integer := 0;
    beat timestamptz;
BEGIN
    IF p_commit IS NOT NULL THEN  -- how this window's transaction commits (its own setting)
        PERFORM set_config('synchronous_commit', p_commit, true);
    END IF;
    IF jsonb_array_length(p_errors) > 0 THEN
        INSERT INTO ferryman_row_errors (run_id, task_id, kind, source_id, reason)
        SELECT p_run_id, p_task_id, p_kind, e.source_id, e.reason
          FROM jsonb_to_recordset(p_errors) AS e(source_id text, reason text)
        ON CONFLICT (run_id, kind, source_id) DO NOTHING;
        GET DIAGNOSTICS failed = ROW_COUNT;
    END IF;
    UPDATE ferryman_tasks t
       SET processed_offset = p_offset, rows_written = t.rows_written + p_written,
           rows_skipped = t.rows_skipped + p_skipped, rows_failed = t.rows_failed + failed,
           rows_matched = t.rows_matched + p_matched, heartbeat_at = now()
      FROM ferryman_runs r
     WHERE t.id = p_task_id AND t.status = 'running' AND t.job_id = p_job_id
       AND r.id = t.run_id AND r.state = 'running' AND NOT r.suspended
    RETURNING r.heartbeat_at INTO beat;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'task % is no longer job %''s, or its run is not running', p_task_id,
            p_job_id USING ERRCODE = 'FM001';
    END IF;
    IF beat < now() - interval '10 seconds' THEN
        UPDATE ferryman_runs SET heartbeat_at = now() WHERE id = p_run_id;
    END IF;
    RETURN failed;
END
$$;
