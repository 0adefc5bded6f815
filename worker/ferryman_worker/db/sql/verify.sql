-- Named queries of a run's verification: the source's ids listed again and compared with the
-- workspace's ledger, kind by kind (engine/verification.py, engine/verify.py).

-- name: request_verification
-- Ask for the run's verification (again): queued, its last result kept until the new one is in.
-- No row: the run does not exist, or it is still running.
INSERT INTO ferryman_verifications (run_id, request, state)
SELECT r.id, %(request)s, 'queued' FROM ferryman_runs r
 WHERE r.id = %(run_id)s AND r.state <> 'running'
ON CONFLICT (run_id) DO UPDATE
   SET request = EXCLUDED.request, state = 'queued', error = NULL, requested_at = now(),
       finished_at = NULL
RETURNING run_id;

-- name: start_verification
-- The verification's job takes it (again, after a crash); no row: there is none to do.
UPDATE ferryman_verifications SET state = 'running'
 WHERE run_id = %(run_id)s AND state IN ('queued', 'running')
RETURNING request;

-- name: finish_verification
UPDATE ferryman_verifications SET state = %(state)s, error = %(error)s, finished_at = now()
 WHERE run_id = %(run_id)s AND state = 'running';

-- name: forget_listed
-- What an earlier attempt listed of the run's kind (a crash, a retry): listed again from the start.
DELETE FROM ferryman_verify_listed WHERE run_id = %(run_id)s AND kind = %(kind)s;

-- name: keep_listed
-- One page's ids; an id listed twice (a listing that shifted meanwhile) is kept once.
INSERT INTO ferryman_verify_listed (run_id, kind, source_id)
SELECT %(run_id)s, %(kind)s, unnest(%(source_ids)s::text[])
ON CONFLICT DO NOTHING;

-- name: listed_parents
-- The ids the verification listed of a tree kind's parent kind, in the order a tree task takes
-- them (by length, then text: integers come in numeric order).
SELECT source_id FROM ferryman_verify_listed
 WHERE run_id = %(run_id)s AND kind = %(kind)s
 ORDER BY length(source_id), source_id;

-- name: compare_kind
-- The kind's ids as listed against the workspace's ledger: missing (listed, not in the ledger,
-- and no row error of the run says why), gone (in the ledger, not listed, and no delta saw the
-- source delete it), with how many and the first ten of each.
WITH listed AS (
    SELECT source_id FROM ferryman_verify_listed WHERE run_id = %(run_id)s AND kind = %(kind)s
), held AS (
    SELECT source_id FROM ferryman_ledger
     WHERE workspace = %(workspace)s AND kind = %(kind)s AND source_deleted_at IS NULL
), missing AS (
    SELECT l.source_id FROM listed l
     WHERE NOT EXISTS (SELECT 1 FROM ferryman_ledger h
                        WHERE h.workspace = %(workspace)s AND h.kind = %(kind)s
                          AND h.source_id = l.source_id)
       AND NOT EXISTS (SELECT 1 FROM ferryman_row_errors e
                        WHERE e.run_id = %(run_id)s AND e.kind = %(kind)s
                          AND e.source_id = l.source_id)
), gone AS (
    SELECT h.source_id FROM held h
     WHERE NOT EXISTS (SELECT 1 FROM listed l WHERE l.source_id = h.source_id)
)
SELECT (SELECT count(*) FROM listed) AS listed,
       (SELECT count(*) FROM missing) AS missing,
       (SELECT count(*) FROM gone) AS gone,
       ARRAY(SELECT source_id FROM missing ORDER BY length(source_id), source_id LIMIT 10)
           AS missing_ids,
       ARRAY(SELECT source_id FROM gone ORDER BY length(source_id), source_id LIMIT 10)
           AS gone_ids;

-- name: save_verified_kind
INSERT INTO ferryman_verified_kinds (run_id, kind, listed, missing, gone, missing_ids, gone_ids,
                                     note)
VALUES (%(run_id)s, %(kind)s, %(listed)s, %(missing)s, %(gone)s, %(missing_ids)s, %(gone_ids)s,
        %(note)s)
ON CONFLICT (run_id, kind) DO UPDATE
   SET listed = EXCLUDED.listed, missing = EXCLUDED.missing, gone = EXCLUDED.gone,
       missing_ids = EXCLUDED.missing_ids, gone_ids = EXCLUDED.gone_ids, note = EXCLUDED.note,
       verified_at = now();

-- name: forget_run_listed
-- The verification is over (done or failed): the ids it listed go.
DELETE FROM ferryman_verify_listed WHERE run_id = %(run_id)s;
