-- A window in one statement: the provider's writer and ferryman_close_window run as functions
-- of one autocommit statement (no BEGIN/COMMIT round trips, one parse-free call per window).
-- The ledger compares its keys byte-wise: source ids are opaque, and a collation would cost
-- every index probe a locale comparison.

ALTER TABLE ferryman_ledger
    ALTER COLUMN workspace TYPE text COLLATE "C",
    ALTER COLUMN kind      TYPE text COLLATE "C",
    ALTER COLUMN source_id TYPE text COLLATE "C";

-- Close a window: record its malformed rows (NULL, or a jsonb array of {source_id, reason}; one
-- recorded before, by a resumed task, is not counted again), write the task's checkpoint, beat the
-- run's heartbeat (at most every 10 s). It is also the gate: when the task is no longer this
-- job's, or its run is no longer running (cancelled, suspended), it raises FM001 and the whole
-- window rolls back. Returns the number of row errors recorded now.
CREATE FUNCTION ferryman_close_window(
    p_task_id bigint, p_job_id bigint, p_run_id bigint, p_kind text, p_offset integer,
    p_written integer, p_skipped integer, p_errors jsonb
) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    failed integer := 0;
    beat timestamptz;
BEGIN
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
           heartbeat_at = now()
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
