-- Writers of the democrm destination tables. Each takes a window of validated records as a
-- jsonb array (%(rows)s), writes them and claims their ledger slots in the same statement.
-- A record the ledger already holds makes the statement fail on the ledger's key: the engine
-- then writes the window again row by row, and that row is skipped (written once, before).
-- Foreign keys resolve through the ledger.
-- Parameters: %(rows)s, %(workspace)s, %(kind)s, %(run_id)s. Returns the number written.
-- Ledger look-ups are LATERAL ... LIMIT 1: one index probe per row of the window, whatever the
-- planner believes about the ledger's size (a hash join would read a kind's whole ledger).

-- name: insert_organizations
WITH input AS (
    SELECT * FROM jsonb_to_recordset(%(rows)s)
        AS r(id bigint, name text, domain text, created_at timestamptz)
), written AS (
    INSERT INTO crm_organizations (workspace, source_id, name, domain, created_at)
    SELECT %(workspace)s, id, name, domain, created_at FROM input
    RETURNING id, source_id
), claimed AS (
    INSERT INTO ferryman_ledger (workspace, kind, source_id, row_id, run_id)
    SELECT %(workspace)s, %(kind)s, source_id::text, id, %(run_id)s FROM written
)
SELECT count(*) AS written FROM written;

-- name: insert_people
WITH input AS (
    SELECT * FROM jsonb_to_recordset(%(rows)s)
        AS r(id bigint, org_id bigint, name text, email text, phone text)
), written AS (
    INSERT INTO crm_people (workspace, source_id, organization_id, name, email, phone)
    SELECT %(workspace)s, f.id, org.row_id, f.name, f.email, f.phone
      FROM input f
      LEFT JOIN LATERAL (SELECT row_id FROM ferryman_ledger l
                          WHERE l.workspace = %(workspace)s AND l.kind = 'organizations'
                            AND l.source_id = f.org_id::text LIMIT 1) org ON true
    RETURNING id, source_id
), claimed AS (
    INSERT INTO ferryman_ledger (workspace, kind, source_id, row_id, run_id)
    SELECT %(workspace)s, %(kind)s, source_id::text, id, %(run_id)s FROM written
)
SELECT count(*) AS written FROM written;

-- name: insert_deals
WITH input AS (
    SELECT * FROM jsonb_to_recordset(%(rows)s)
        AS r(id bigint, org_id bigint, person_ids jsonb, title text, value numeric,
             currency text, stage text, status text)
), written AS (
    INSERT INTO crm_deals (workspace, source_id, organization_id, title, value, currency, stage,
                           status)
    SELECT %(workspace)s, f.id, org.row_id, f.title, f.value, f.currency, f.stage, f.status
      FROM input f
      LEFT JOIN LATERAL (SELECT row_id FROM ferryman_ledger l
                          WHERE l.workspace = %(workspace)s AND l.kind = 'organizations'
                            AND l.source_id = f.org_id::text LIMIT 1) org ON true
    RETURNING id, source_id
), claimed AS (
    INSERT INTO ferryman_ledger (workspace, kind, source_id, row_id, run_id)
    SELECT %(workspace)s, %(kind)s, source_id::text, id, %(run_id)s FROM written
), members AS (
    INSERT INTO crm_deal_people (deal_id, person_id)
    SELECT DISTINCT w.id, person.row_id
      FROM written w
      JOIN input i ON i.id = w.source_id
     CROSS JOIN LATERAL jsonb_array_elements_text(i.person_ids) AS p(source_id)
      JOIN LATERAL (SELECT row_id FROM ferryman_ledger l
                     WHERE l.workspace = %(workspace)s AND l.kind = 'people'
                       AND l.source_id = p.source_id LIMIT 1) person ON true
)
SELECT count(*) AS written FROM written;

-- name: insert_messages
WITH input AS (
    SELECT * FROM jsonb_to_recordset(%(rows)s)
        AS r(id bigint, deal_id bigint, subject text, sender text, sent_at timestamptz, body text)
), written AS (
    INSERT INTO crm_messages (workspace, source_id, deal_id, subject, sender, sent_at, body)
    SELECT %(workspace)s, f.id, deal.row_id, f.subject, f.sender, f.sent_at, f.body
      FROM input f
      LEFT JOIN LATERAL (SELECT row_id FROM ferryman_ledger l
                          WHERE l.workspace = %(workspace)s AND l.kind = 'deals'
                            AND l.source_id = f.deal_id::text LIMIT 1) deal ON true
    RETURNING id, source_id
), claimed AS (
    INSERT INTO ferryman_ledger (workspace, kind, source_id, row_id, run_id)
    SELECT %(workspace)s, %(kind)s, source_id::text, id, %(run_id)s FROM written
)
SELECT count(*) AS written FROM written;
