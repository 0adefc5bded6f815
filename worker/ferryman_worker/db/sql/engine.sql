-- Named queries of the migration engine (runs, phases, tasks, ledger, row errors, budgets).

-- name: admit_run
-- One live run per workspace: the partial unique index refuses a second, even under a race.
INSERT INTO ferryman_runs (name, workspace, provider, base_url, credential, kinds, phases, options,
                           provider_definition, mapping)
VALUES (%(name)s, %(workspace)s, %(provider)s, %(base_url)s, %(credential)s, %(kinds)s,
        %(phases)s, %(options)s, %(provider_definition)s, %(mapping)s)
RETURNING *;

-- name: delta_since
-- A delta run's starting point per kind: when the workspace's latest successful run that
-- imported the kind started (NULL: no successful run imported it).
SELECT k.kind, max(r.started_at) AS since
  FROM unnest(%(kinds)s::text[]) AS k(kind)
  LEFT JOIN ferryman_runs r
    ON r.workspace = %(workspace)s AND r.state = 'succeeded' AND k.kind = ANY (r.kinds)
 GROUP BY k.kind;

-- name: ledger_unwritten
-- Which of these source ids of a kind (a JSON array of strings) the ledger does not hold: those a
-- page of a re-run still has to write (in a re-run, usually none: nothing comes back). One
-- probe of the ledger's key per id, as ledger_written (a LATERAL with LIMIT stays a probe; an
-- anti-join could be planned as a scan of the kind's whole range).
SELECT s.source_id FROM jsonb_array_elements_text(%(source_ids)s::jsonb) AS s(source_id)
  LEFT JOIN LATERAL (SELECT true AS held FROM ferryman_ledger l
                      WHERE l.workspace = %(workspace)s AND l.kind = %(kind)s
                        AND l.source_id = s.source_id LIMIT 1) AS h ON true
 WHERE h.held IS NULL;

-- name: delta_renewed_parents
-- Of these parents of a tree kind (source ids of the parent kind), those this delta run wrote:
-- claimed or updated by it. A delta reads each of their children again.
-- (One probe of the ledger's key per id, as ledger_written.)
SELECT s.source_id FROM unnest(%(source_ids)s::text[]) AS s(source_id)
 CROSS JOIN LATERAL (SELECT FROM ferryman_ledger l
                      WHERE l.workspace = %(workspace)s AND l.kind = %(kind)s
                        AND l.source_id = s.source_id
                        AND (l.run_id = %(run_id)s OR l.version_run_id = %(run_id)s)
                      LIMIT 1) AS renewed;

-- name: claim_workspace
-- The workspace's owner: the namespace that claims it first keeps it.
WITH claimed AS (
    INSERT INTO ferryman_workspaces (workspace, namespace) VALUES (%(workspace)s, %(namespace)s)
    ON CONFLICT (workspace) DO NOTHING
    RETURNING namespace
)
SELECT namespace FROM claimed
UNION ALL
SELECT namespace FROM ferryman_workspaces WHERE workspace = %(workspace)s
LIMIT 1;

-- name: store_credential
-- The run's credential, sealed by the operator at admission (same transaction as the run), or
-- sealed again when the run is retried.
INSERT INTO ferryman_run_credentials (run_id, hosts, sealed)
VALUES (%(run_id)s, %(hosts)s, %(sealed)s)
ON CONFLICT (run_id) DO UPDATE SET hosts = excluded.hosts, sealed = excluded.sealed, at = now();

-- name: missing_writers
-- Writer functions (the providers' (jsonb, text, text, bigint) signature) not in this database.
SELECT array_agg(w) AS missing
  FROM unnest(%(writers)s::text[]) AS w
 WHERE to_regprocedure(format('%%I(jsonb, text, text, bigint)', w)) IS NULL;

-- name: live_run_of_workspace
SELECT id, name FROM ferryman_runs WHERE workspace = %(workspace)s AND state = 'running';

-- name: run_by_name
SELECT * FROM ferryman_runs WHERE name = %(name)s;

-- name: run_for_task
-- The run as its task's walk needs it, with the credential sealed at admission (if any), and
-- the kinds an earlier run of its workspace covered (``earlier_kinds``: whose records the ledger
-- may hold already, so a page of them is looked up before it is written).
SELECT r.*, c.sealed AS sealed_credential,
       ARRAY(SELECT DISTINCT k FROM ferryman_runs e CROSS JOIN LATERAL unnest(e.kinds) AS k
              WHERE e.workspace = r.workspace AND e.id <> r.id) AS earlier_kinds
  FROM ferryman_runs r LEFT JOIN ferryman_run_credentials c ON c.run_id = r.id
 WHERE r.id = %(run_id)s;

-- name: run_by_id
SELECT * FROM ferryman_runs WHERE id = %(run_id)s;

-- name: row_errors
-- A run's row errors (all kinds, or one), in the order they were recorded, and how many match.
SELECT kind, source_id, reason, at, count(*) OVER () AS total
  FROM ferryman_row_errors
 WHERE run_id = %(run_id)s AND (%(kind)s::text IS NULL OR kind = %(kind)s)
 ORDER BY id
 LIMIT %(limit)s;

-- name: lock_run
-- Serialises the finishing tasks of one run: the barrier's check then sees every other
-- finisher's commit.
SELECT * FROM ferryman_runs WHERE id = %(run_id)s FOR NO KEY UPDATE;

-- name: run_gate
SELECT state, suspended, phase FROM ferryman_runs WHERE id = %(run_id)s;

-- name: seed_tasks
-- Tasks given as parallel arrays; a task that exists already (same cursor key) is left alone.
INSERT INTO ferryman_tasks (run_id, phase, kind, cursor_key, cursor)
SELECT %(run_id)s, %(phase)s, k, ck, c
  FROM unnest(%(kinds)s::text[], %(cursor_keys)s::text[], %(cursors)s::jsonb[]) AS t(k, ck, c)
ON CONFLICT (run_id, kind, cursor_key) DO NOTHING
RETURNING id;

-- name: seed_tree_tasks
-- Discovery for a tree kind: every parent the run has seen, N per task: those written (the
-- ledger) and those malformed (the row errors), whose children are rows of their own. Source ids
-- are text (integers, strings, UUIDs); ordered by length, then text, integers come in numeric
-- order.
INSERT INTO ferryman_tasks (run_id, phase, kind, cursor_key, cursor)
SELECT %(run_id)s, %(phase)s, %(kind)s,
       %(kind)s || ':' || (array_agg(sid ORDER BY length(sid), sid))[1],
       jsonb_build_object('parents', jsonb_agg(sid ORDER BY length(sid), sid))
  FROM (SELECT sid, (row_number() OVER (ORDER BY length(sid), sid) - 1) / %(per_task)s AS bucket
          FROM (SELECT source_id COLLATE "C" AS sid FROM ferryman_ledger
                 WHERE workspace = %(workspace)s AND kind = %(parent_kind)s
                UNION
                SELECT source_id COLLATE "C" FROM ferryman_row_errors
                 WHERE run_id = %(run_id)s AND kind = %(parent_kind)s
                   AND source_id <> '') seen) parents
 GROUP BY bucket
ON CONFLICT (run_id, kind, cursor_key) DO NOTHING
RETURNING id;

-- name: top_up
-- Queue the oldest pending tasks of the run's open phase, up to its in-flight limit.
WITH run AS (
    SELECT id, phase FROM ferryman_runs
     WHERE id = %(run_id)s AND state = 'running' AND NOT suspended
), in_flight AS (
    SELECT count(*) AS n FROM ferryman_tasks
     WHERE run_id = %(run_id)s AND status IN ('queued', 'running')
), picked AS (
    SELECT t.id FROM ferryman_tasks t JOIN run ON t.run_id = run.id AND t.phase = run.phase
     WHERE t.status = 'pending'
     ORDER BY t.id
     LIMIT greatest(0, %(max_in_flight)s - (SELECT n FROM in_flight))
       FOR UPDATE OF t SKIP LOCKED
)
UPDATE ferryman_tasks t SET status = 'queued' FROM picked WHERE t.id = picked.id
RETURNING t.id;

-- name: claim_task
-- Claim or exit: only a pending/queued task of the run's open phase, or the task this same job
-- held when its worker died (the queue's lock proves no one else runs the job).
UPDATE ferryman_tasks t
   SET status = 'running', job_id = %(job_id)s, claimed_at = now(), heartbeat_at = now(),
       attempts = attempts + 1
  FROM ferryman_runs r
 WHERE t.id = %(task_id)s AND r.id = t.run_id
   AND r.state = 'running' AND NOT r.suspended AND r.phase = t.phase
   AND (t.status IN ('pending', 'queued') OR (t.status = 'running' AND t.job_id = %(job_id)s))
RETURNING t.*;

-- name: write_window
-- A window in one statement: the provider's writer function ({writer}) writes the rows and
-- claims their ledger slots, then ferryman_close_window records the row errors and the
-- checkpoint, or raises FM001 (the gate) and nothing of the window stays; ``commit`` says how the
-- window's transaction commits ('off': asynchronously; NULL: as the session says). Returns the
-- row errors recorded now and the rows written (such a writer matches none to the application's
-- rows).
SELECT ferryman_close_window(%(task_id)s, %(job_id)s, %(run_id)s, %(kind)s, %(offset)s,
                             w.written, %(skipped)s::integer, %(errors)s,
                             p_commit => %(commit)s::text) AS failed,
       w.written, 0 AS matched
  FROM (SELECT {writer}(%(rows)s, %(workspace)s, %(kind)s, %(run_id)s) AS written) w;

-- name: write_rows
-- The provider's writer alone (a careful window writes its rows one by one with it).
SELECT {writer}(%(rows)s, %(workspace)s, %(kind)s, %(run_id)s) AS written;

-- name: close_window
-- A careful window's end: row errors, checkpoint and gate (see write_window).
SELECT ferryman_close_window(%(task_id)s, %(job_id)s, %(run_id)s, %(kind)s, %(offset)s,
                             %(written)s, %(skipped)s, %(errors)s, %(matched)s,
                             p_commit => %(commit)s::text) AS failed;

-- name: finish_task
-- With what the task's page listed (NULL for a tree task), for its kind's reconciliation.
UPDATE ferryman_tasks SET status = 'done', finished_at = now(), heartbeat_at = now(),
       listed = %(listed)s, stated_total = %(stated_total)s, ended_by = %(ended_by)s
 WHERE id = %(task_id)s AND status = 'running' AND job_id = %(job_id)s
RETURNING id;

-- name: task_held
-- Whether a task is still this job's: a window the gate refused while the run was suspended is
-- written again if the run was resumed before the job looked, and a lost claim stops the job.
SELECT 1 FROM ferryman_tasks WHERE id = %(task_id)s AND status = 'running' AND job_id = %(job_id)s;

-- name: stop_task
-- Cancel or suspend reached the task at a window boundary: it gives its claim back.
UPDATE ferryman_tasks SET status = %(status)s, job_id = NULL
 WHERE id = %(task_id)s AND status = 'running' AND job_id = %(job_id)s;

-- name: fail_task
UPDATE ferryman_tasks SET status = 'failed', finished_at = now(), error = %(error)s
 WHERE id = %(task_id)s AND status = 'running' AND job_id = %(job_id)s
RETURNING run_id;

-- name: open_tasks_in_phase
SELECT count(*) AS n FROM ferryman_tasks
 WHERE run_id = %(run_id)s AND phase = %(phase)s AND status IN ('pending', 'queued', 'running');

-- name: advance_phase
-- The barrier: only while the phase is still the open one; exactly one finisher gets a row.
UPDATE ferryman_runs SET phase = phase + 1, heartbeat_at = now()
 WHERE id = %(run_id)s AND phase = %(phase)s AND state = 'running'
RETURNING phase;

-- name: kind_listings
-- A closing phase's page walks, per kind and part of its split: the records their pages listed,
-- the least and greatest total the source stated (NULL: none did), and the rules that ended the
-- part's chains.
SELECT kind, coalesce((cursor->>'part')::int, 0) AS part, count(*) AS pages,
       count(listed) AS counted, sum(listed) AS listed, min(stated_total) AS low, max(stated_total) AS high,
       array_agg(DISTINCT ended_by) FILTER (WHERE ended_by IS NOT NULL) AS ended_by,
       sum(rows_skipped) AS skipped
  FROM ferryman_tasks
 WHERE run_id = %(run_id)s AND phase = %(phase)s AND status = 'done' AND NOT cursor ? 'parents'
 GROUP BY kind, part ORDER BY kind, part;

-- name: kind_refusals
-- A closing phase's kinds: records written, skipped and refused (malformed or refused by the
-- database), and the most frequent reasons of the refused (at most three, with their counts).
SELECT t.kind, sum(t.rows_written) AS written, sum(t.rows_skipped) AS skipped,
       sum(t.rows_matched) AS matched, sum(t.rows_failed) AS failed,
       (SELECT coalesce(jsonb_agg(jsonb_build_object('reason', r.reason, 'n', r.n)), '[]')
          FROM (SELECT left(e.reason, 200) AS reason, count(*) AS n FROM ferryman_row_errors e
                 WHERE e.run_id = %(run_id)s AND e.kind = t.kind
                 GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT 3) r) AS reasons
  FROM ferryman_tasks t
 WHERE t.run_id = %(run_id)s AND t.phase = %(phase)s
 GROUP BY t.kind ORDER BY t.kind;

-- name: save_verdict
INSERT INTO ferryman_run_kinds (run_id, kind, verdict, listed, total, note)
VALUES (%(run_id)s, %(kind)s, %(verdict)s, %(listed)s, %(total)s, %(note)s)
ON CONFLICT (run_id, kind) DO UPDATE
   SET verdict = EXCLUDED.verdict, listed = EXCLUDED.listed, total = EXCLUDED.total,
       note = EXCLUDED.note, at = now();

-- name: finish_run
UPDATE ferryman_runs SET state = %(state)s, finished_at = now(), error = %(error)s
 WHERE id = %(run_id)s AND state = 'running'
RETURNING id;

-- name: beat_run
UPDATE ferryman_runs SET heartbeat_at = now() WHERE id = %(run_id)s;

-- name: set_suspended
UPDATE ferryman_runs SET suspended = %(suspended)s WHERE id = %(run_id)s AND state = 'running'
RETURNING id;

-- name: reopen_run
-- Retry a failed run: live again (the partial unique index refuses it if its workspace has
-- another live run meanwhile), its open phase back to the earliest one with an unfinished task,
-- so no reopened task waits behind a barrier that has already moved on (top-up only queues the
-- open phase's tasks: such a task would be stranded, and the run would finish without it).
UPDATE ferryman_runs r
   SET state = 'running', suspended = false, error = NULL, finished_at = NULL,
       heartbeat_at = now(),
       phase = least(r.phase, coalesce((SELECT min(t.phase) FROM ferryman_tasks t
                                         WHERE t.run_id = r.id AND t.status <> 'done'), r.phase))
 WHERE r.id = %(run_id)s AND r.state = 'failed'
RETURNING r.id;

-- name: reopen_tasks
-- ... and every unfinished task back to pending, from its checkpoint, with its claims forgotten:
-- a job still walking one loses it at its next window (the task is no longer its).
UPDATE ferryman_tasks
   SET status = 'pending', job_id = NULL, error = NULL, finished_at = NULL, attempts = 0
 WHERE run_id = %(run_id)s AND status IN ('failed', 'cancelled', 'queued', 'running');

-- name: release_queued_tasks
-- Suspend or cancel: tasks queued but not started go back to pending (their jobs will exit).
UPDATE ferryman_tasks SET status = %(status)s
 WHERE run_id = %(run_id)s AND status = 'queued';

-- name: ledger_written
-- Which of these source ids of a kind are written already: one probe of the ledger's key per id.
-- (``source_id = ANY(...)`` lets the planner scan the kind's whole range and filter it, which it
-- prefers while the ledger's statistics are older than its rows: a window's cost would grow with
-- the kind. The LATERAL probe has one plan whatever the statistics say.)
SELECT s.source_id FROM unnest(%(source_ids)s::text[]) AS s(source_id)
 CROSS JOIN LATERAL (SELECT FROM ferryman_ledger l
                      WHERE l.workspace = %(workspace)s AND l.kind = %(kind)s
                        AND l.source_id = s.source_id LIMIT 1) AS held;

-- name: run_progress
-- One aggregate per run (every run, the run ``run_id``, or the runs named in ``names``): tasks by
-- state and rows, summed from the task rows (no hot counter), with what its ETA needs
-- (provider and its snapshot, options), its kinds' verdicts so far (``verdicts``: kind,
-- verdict, listed, total, note, in phase order) and its verification, if one was asked for
-- (``verification``: request, state, error, times and each kind's comparison). The operator reads every live run with one of
-- these per refresh.
SELECT r.id, r.name, r.workspace, r.state, r.suspended, r.phase, r.phases, r.kinds,
       r.created_at, r.started_at, r.finished_at, r.heartbeat_at, r.error, r.provider,
       r.provider_definition,
       r.options, t.*,
       (SELECT coalesce(jsonb_agg(jsonb_build_object('kind', v.kind, 'verdict', v.verdict,
                                                     'listed', v.listed, 'total', v.total,
                                                     'note', v.note)
                                  ORDER BY array_position(r.kinds, v.kind)), '[]')
          FROM ferryman_run_kinds v WHERE v.run_id = r.id) AS verdicts,
       (SELECT jsonb_build_object(
                   'request', f.request, 'state', f.state, 'error', f.error,
                   'requested_at', f.requested_at, 'finished_at', f.finished_at,
                   'kinds', (SELECT coalesce(jsonb_agg(jsonb_build_object(
                                        'kind', k.kind, 'listed', k.listed,
                                        'missing', k.missing, 'gone', k.gone,
                                        'missing_ids', to_jsonb(k.missing_ids),
                                        'gone_ids', to_jsonb(k.gone_ids), 'note', k.note)
                                      ORDER BY array_position(r.kinds, k.kind)), '[]')
                               FROM ferryman_verified_kinds k WHERE k.run_id = r.id))
          FROM ferryman_verifications f WHERE f.run_id = r.id) AS verification
  FROM ferryman_runs r
 CROSS JOIN LATERAL (
       SELECT count(t.id) AS tasks_total,
              count(t.id) FILTER (WHERE t.status = 'done') AS tasks_done,
              count(t.id) FILTER (WHERE t.status = 'running') AS tasks_running,
              count(t.id) FILTER (WHERE t.status IN ('pending', 'queued')) AS tasks_waiting,
              count(t.id) FILTER (WHERE t.status = 'failed') AS tasks_failed,
              coalesce(sum(t.rows_written), 0) AS rows_written,
              coalesce(sum(t.rows_skipped), 0) AS rows_skipped,
              coalesce(sum(t.rows_matched), 0) AS rows_matched,
              coalesce(sum(t.rows_failed), 0) AS rows_failed
         FROM ferryman_tasks t WHERE t.run_id = r.id) t
 WHERE (%(run_id)s::bigint IS NULL OR r.id = %(run_id)s)
   AND (%(names)s::text[] IS NULL OR r.name = ANY(%(names)s))
 ORDER BY r.id;

-- name: run_retrying
-- Each running (not suspended) run of ``run_ids`` whose tasks' jobs failed an attempt and wait to
-- try again (the task stays running, held by its job): one row per such run, with how many, and
-- the latest failure with its attempts and next try.
SELECT DISTINCT ON (r.id) r.id AS run_id, count(*) OVER (PARTITION BY r.id) AS tasks,
       t.id AS task_id, t.kind, j.last_error, j.attempts, j.max_attempts, j.run_at
  FROM ferryman_runs r
  JOIN ferryman_tasks t ON t.run_id = r.id
  JOIN ferryman_jobs j ON j.id = t.job_id
 WHERE r.id = ANY(%(run_ids)s::bigint[]) AND r.state = 'running' AND NOT r.suspended
   AND t.status = 'running' AND j.status = 'ready' AND j.attempts > 0
   AND j.last_error IS NOT NULL
 ORDER BY r.id, j.run_at DESC;

-- name: kind_progress
-- Per run of ``run_ids`` and kind: tasks, rows, whether it is a tree kind (its tasks list
-- parents), and active_seconds, the time some task of the kind was working (the union of its tasks' spans from claim to end, or
-- to the last checkpoint of a task stopped by a suspension): a suspended run's pause does not
-- count against its rate.
WITH spans AS (
    SELECT run_id, kind, claimed_at AS s,
           CASE WHEN status = 'running' THEN greatest(now(), claimed_at)
                ELSE coalesce(finished_at, heartbeat_at, claimed_at) END AS e
      FROM ferryman_tasks
     WHERE run_id = ANY(%(run_ids)s::bigint[]) AND claimed_at IS NOT NULL
), marked AS (
    SELECT run_id, kind, s, e,
           CASE WHEN s <= max(e) OVER (PARTITION BY run_id, kind ORDER BY s, e
                                       ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
                THEN 0 ELSE 1 END AS starts_island
      FROM spans
), islands AS (
    SELECT run_id, kind, s, e,
           sum(starts_island) OVER (PARTITION BY run_id, kind ORDER BY s, e) AS island
      FROM marked
), active AS (
    SELECT run_id, kind, sum(extract(epoch FROM island_end - island_start))::float8 AS seconds
      FROM (SELECT run_id, kind, min(s) AS island_start, max(e) AS island_end
              FROM islands GROUP BY run_id, kind, island) i
     GROUP BY run_id, kind
)
SELECT t.run_id, t.kind, t.phase, count(*) AS tasks,
       count(*) FILTER (WHERE t.status = 'done') AS done,
       sum(t.rows_written) AS written, sum(t.rows_skipped) AS skipped,
       sum(t.rows_matched) AS matched, sum(t.rows_failed) AS failed, min(t.claimed_at) AS first_claim,
       max(t.finished_at) AS last_finish, coalesce(max(a.seconds), 0) AS active_seconds,
       bool_or(t.cursor ? 'parents') AS tree,
       max(t.stated_total) AS stated_total, coalesce(sum(t.listed), 0) AS listed
  FROM ferryman_tasks t LEFT JOIN active a ON a.run_id = t.run_id AND a.kind = t.kind
 WHERE t.run_id = ANY(%(run_ids)s::bigint[])
 GROUP BY t.run_id, t.kind, t.phase ORDER BY t.run_id, t.phase, t.kind;

-- name: ensure_budget
INSERT INTO ferryman_rate_budgets (credential, tokens, capacity, refill_per_s)
VALUES (%(credential)s, %(capacity)s, %(capacity)s, %(refill_per_s)s)
ON CONFLICT (credential) DO UPDATE
   SET capacity = EXCLUDED.capacity, refill_per_s = EXCLUDED.refill_per_s
 WHERE ferryman_rate_budgets.capacity <> EXCLUDED.capacity
    OR ferryman_rate_budgets.refill_per_s <> EXCLUDED.refill_per_s;

-- name: lease_tokens
-- Refill by the time elapsed, then grant up to %(want)s tokens unless the budget is paused.
WITH current AS (
    SELECT credential, paused_until,
           least(capacity, tokens + refill_per_s
                 * extract(epoch FROM clock_timestamp() - refilled_at)) AS available
      FROM ferryman_rate_budgets WHERE credential = %(credential)s FOR UPDATE
), granted AS (
    SELECT credential, paused_until, available,
           CASE WHEN paused_until > clock_timestamp() THEN 0
                ELSE least(available, %(want)s) END AS tokens
      FROM current
)
UPDATE ferryman_rate_budgets b
   SET tokens = g.available - g.tokens, refilled_at = clock_timestamp()
  FROM granted g WHERE b.credential = g.credential
RETURNING g.tokens AS granted, b.refill_per_s,
          greatest(0, extract(epoch FROM g.paused_until - clock_timestamp())) AS paused_for;

-- name: pause_budget
-- A 429 with Retry-After: drain the budget and pause it for every worker of the credential.
UPDATE ferryman_rate_budgets
   SET tokens = 0, refilled_at = clock_timestamp(),
       paused_until = greatest(paused_until, clock_timestamp() + make_interval(secs => %(seconds)s))
 WHERE credential = %(credential)s;

-- name: reconcile_budget
-- The source said what is left of the account's quota, whoever spent it: refill by the time
-- elapsed, then hold no more than that; a %(pause)s > 0 pauses every worker until its reset.
UPDATE ferryman_rate_budgets
   SET tokens = least(capacity,
                      tokens + refill_per_s * extract(epoch FROM clock_timestamp() - refilled_at),
                      %(remaining)s),
       refilled_at = clock_timestamp(),
       paused_until = CASE WHEN %(pause)s > 0
                           THEN greatest(paused_until,
                                         clock_timestamp() + make_interval(secs => %(pause)s))
                           ELSE paused_until END
 WHERE credential = %(credential)s;

-- name: fail_tasks_of_failed_jobs
-- Running tasks whose job failed for good before the task could fail itself (the queue gave up
-- on a job whose worker kept dying: ProcessDied): the task fails with its job's error, and its
-- run with it, in one statement, so no barrier sees the task's phase without it while the run
-- still runs (work stranded behind a barrier).
WITH failed AS (
    UPDATE ferryman_tasks t
       SET status = 'failed', finished_at = now(),
           error = coalesce(j.last_error, 'its job ' || j.id || ' failed')
      FROM ferryman_jobs j
     WHERE t.status = 'running' AND j.id = t.job_id AND j.status = 'failed'
    RETURNING t.id, t.run_id, t.error
)
UPDATE ferryman_runs r
   SET state = 'failed', finished_at = now(),
       error = left('task ' || f.id || ' failed: ' || f.error, 2000)
  FROM (SELECT DISTINCT ON (run_id) id, run_id, error FROM failed ORDER BY run_id, id) f
 WHERE r.id = f.run_id AND r.state = 'running'
RETURNING r.id;

-- name: release_dead_claims
-- Running tasks whose claim is dead or stale go back to pending, cursor intact:
-- dead: the claiming job is over without ending its task (deleted, succeeded, discarded);
-- stale: its job's lock is held (its process lives) but no checkpoint for %(stale_after)s
-- seconds (hung); a stale claimer that wakes up is fenced out at its next checkpoint.
-- A task whose job is still ready is left alone, lock or no lock: the job waits out its
-- backoff after a failed attempt, or its worker died and the queue runs it again at once;
-- either way the same job takes its own task back (claim_task), with its attempt count and
-- backoff. Releasing it would give it a second job and skip the backoff.
WITH held AS (
    SELECT ((l.classid::bigint << 32) | l.objid::bigint) AS job_id
      FROM pg_locks l
     WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted
       AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
)
UPDATE ferryman_tasks t SET status = 'pending', job_id = NULL
 WHERE t.status = 'running'
   AND (NOT EXISTS (SELECT 1 FROM ferryman_jobs j
                     WHERE j.id = t.job_id AND j.status IN ('ready', 'failed'))
        OR (t.heartbeat_at < now() - make_interval(secs => %(stale_after)s)
            AND EXISTS (SELECT 1 FROM held WHERE held.job_id = t.job_id)))
RETURNING t.id, t.run_id;

-- name: release_stalled_runs
-- Live runs whose heartbeat stopped (no window committed for %(stale_after)s seconds): a queued
-- task whose job is gone (no ready task job carries its id) goes back to pending, so the refill
-- queues it with a new job. Queued tasks whose jobs wait (for a worker, or for their turn) are
-- left alone: a run whose workers all died resumes when a worker starts. The heartbeat is
-- renewed, so the next sweep waits a full period again.
WITH stalled AS (
    UPDATE ferryman_runs SET heartbeat_at = now()
     WHERE state = 'running' AND NOT suspended
       AND heartbeat_at < now() - make_interval(secs => %(stale_after)s)
    RETURNING id
), released AS (
    UPDATE ferryman_tasks t SET status = 'pending'
      FROM stalled
     WHERE t.run_id = stalled.id AND t.status = 'queued'
       AND NOT EXISTS (SELECT 1 FROM ferryman_jobs j
                        WHERE j.status = 'ready' AND j.name = %(job_name)s
                          AND j.args = jsonb_build_array(t.id, t.run_id))
    RETURNING t.id
)
SELECT (SELECT count(*) FROM stalled) AS runs, (SELECT count(*) FROM released) AS tasks;

-- name: runs_below_width
-- Live runs with pending work in their open phase and fewer tasks in flight than their limit,
-- oldest first.
SELECT r.* FROM ferryman_runs r
 WHERE r.state = 'running' AND NOT r.suspended
   AND EXISTS (SELECT 1 FROM ferryman_tasks t
                WHERE t.run_id = r.id AND t.phase = r.phase AND t.status = 'pending')
   AND (SELECT count(*) FROM ferryman_tasks t
         WHERE t.run_id = r.id AND t.status IN ('queued', 'running'))
       < (r.options->>'max_in_flight')::integer
 ORDER BY r.id;

-- name: runs_with_closed_phase
-- Live runs whose open phase has no open task left: the barrier found no winner.
SELECT r.* FROM ferryman_runs r
 WHERE r.state = 'running'
   AND NOT EXISTS (SELECT 1 FROM ferryman_tasks t
                    WHERE t.run_id = r.id AND t.phase = r.phase
                      AND t.status IN ('pending', 'queued', 'running'))
 ORDER BY r.id;

-- name: fail_runs_with_failed_tasks
-- Live runs with a task that failed for good, whose finisher died before failing the run.
UPDATE ferryman_runs r SET state = 'failed', finished_at = now(),
       error = coalesce(r.error, 'a task failed: ' || (
           SELECT coalesce(t.error, 'no error recorded') FROM ferryman_tasks t
            WHERE t.run_id = r.id AND t.status = 'failed' ORDER BY t.id LIMIT 1))
 WHERE r.state = 'running'
   AND EXISTS (SELECT 1 FROM ferryman_tasks t WHERE t.run_id = r.id AND t.status = 'failed')
RETURNING r.id;

-- name: forget_run_name
-- A finished run whose MigrationRun was deleted gives its name up (it becomes name@id), so a
-- new MigrationRun of the same name is a new run; its rows, tasks and errors stay.
UPDATE ferryman_runs SET name = name || '@' || id
 WHERE name = %(name)s AND state <> 'running'
RETURNING name;

-- name: seed_oauth_token
-- The credential's token row, from the Secret's refresh token the first time, and again from it
-- when the Secret holds another one (a user authorized again). Locks the row either way (until
-- the transaction ends): a second worker waits here for the first one's refresh.
-- %(seed)s comes sealed (with the credential's own key), like every token the row holds.
INSERT INTO ferryman_oauth_tokens (credential, seed_sha256, refresh_token, sealed)
VALUES (%(credential)s, %(seed_sha256)s, %(seed)s, true)
ON CONFLICT (credential) DO UPDATE
   SET seed_sha256 = EXCLUDED.seed_sha256, refresh_token = EXCLUDED.refresh_token,
       access_token = NULL, expires_at = NULL, sealed = true
 WHERE ferryman_oauth_tokens.seed_sha256 <> EXCLUDED.seed_sha256;

-- name: lock_oauth_token
-- The locked row: its tokens (sealed unless ``sealed`` is false: a row from before tokens were
-- sealed) and the seconds its access token still lives (0: none, or expired).
SELECT refresh_token, access_token, sealed,
       coalesce(greatest(0, extract(epoch FROM expires_at - now())), 0) AS lives
  FROM ferryman_oauth_tokens WHERE credential = %(credential)s FOR UPDATE;

-- name: save_oauth_token
-- The token endpoint's answer, committed before any worker uses it.
-- Both tokens come sealed; %(rotated)s: the refresh token is a new one.
UPDATE ferryman_oauth_tokens
   SET access_token = %(access_token)s, refresh_token = %(refresh_token)s, sealed = true,
       expires_at = now() + make_interval(secs => %(expires_in)s),
       rotations = rotations + %(rotated)s::int, refreshed_at = now()
 WHERE credential = %(credential)s;
