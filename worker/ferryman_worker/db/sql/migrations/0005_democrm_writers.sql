-- Writers of the democrm destination tables, one function per kind, called by the engine as
-- <writer>(rows, workspace, kind, run_id) inside a window's statement. Each takes the window's
-- validated records as a jsonb array, writes them and claims their ledger slots in one
-- statement, and returns how many it wrote. A record the ledger already holds makes it fail on
-- the ledger's key: the engine then writes the window again row by row, and that row is skipped
-- (written once, before). Foreign keys resolve through the ledger, one index probe per row
-- (LATERAL ... LIMIT 1: a hash join would read a kind's whole ledger per window).
-- PL/pgSQL, not SQL functions: PL/pgSQL keeps each statement's plan for the session.

CREATE FUNCTION democrm_write_organizations(
    p_rows jsonb, p_workspace text, p_kind text, p_run_id bigint
) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    n integer;
BEGIN
    WITH input AS (
        SELECT * FROM jsonb_to_recordset(p_rows)
            AS r(id bigint, name text, domain text, created_at timestamptz)
    ), written AS (
        INSERT INTO crm_organizations (workspace, source_id, name, domain, created_at)
        SELECT p_workspace, f.id, f.name, f.domain, f.created_at FROM input f
        RETURNING id, source_id
    ), claimed AS (
        INSERT INTO ferryman_ledger (workspace, kind, source_id, row_id, run_id)
        SELECT p_workspace, p_kind, w.source_id::text, w.id, p_run_id FROM written w
    )
    SELECT count(*) INTO n FROM written;
    RETURN n;
END
$$;

CREATE FUNCTION democrm_write_people(
    p_rows jsonb, p_workspace text, p_kind text, p_run_id bigint
) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    n integer;
BEGIN
    WITH input AS (
        SELECT * FROM jsonb_to_recordset(p_rows)
            AS r(id bigint, org_id bigint, name text, email text, phone text)
    ), written AS (
        INSERT INTO crm_people (workspace, source_id, organization_id, name, email, phone)
        SELECT p_workspace, f.id, org.row_id, f.name, f.email, f.phone
          FROM input f
          LEFT JOIN LATERAL (SELECT l.row_id FROM ferryman_ledger l
                              WHERE l.workspace = p_workspace AND l.kind = 'organizations'
                                AND l.source_id = f.org_id::text LIMIT 1) org ON true
        RETURNING id, source_id
    ), claimed AS (
        INSERT INTO ferryman_ledger (workspace, kind, source_id, row_id, run_id)
        SELECT p_workspace, p_kind, w.source_id::text, w.id, p_run_id FROM written w
    )
    SELECT count(*) INTO n FROM written;
    RETURN n;
END
$$;

CREATE FUNCTION democrm_write_deals(
    p_rows jsonb, p_workspace text, p_kind text, p_run_id bigint
) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    n integer;
BEGIN
    WITH input AS (
        SELECT * FROM jsonb_to_recordset(p_rows)
            AS r(id bigint, org_id bigint, person_ids jsonb, title text, value numeric,
                 currency text, stage text, status text)
    ), written AS (
        INSERT INTO crm_deals (workspace, source_id, organization_id, title, value, currency,
                               stage, status)
        SELECT p_workspace, f.id, org.row_id, f.title, f.value, f.currency, f.stage, f.status
          FROM input f
          LEFT JOIN LATERAL (SELECT l.row_id FROM ferryman_ledger l
                              WHERE l.workspace = p_workspace AND l.kind = 'organizations'
                                AND l.source_id = f.org_id::text LIMIT 1) org ON true
        RETURNING id, source_id
    ), claimed AS (
        INSERT INTO ferryman_ledger (workspace, kind, source_id, row_id, run_id)
        SELECT p_workspace, p_kind, w.source_id::text, w.id, p_run_id FROM written w
    ), members AS (
        INSERT INTO crm_deal_people (deal_id, person_id)
        SELECT DISTINCT w.id, person.row_id
          FROM written w
          JOIN input i ON i.id = w.source_id
         CROSS JOIN LATERAL jsonb_array_elements_text(i.person_ids) AS p(source_id)
          JOIN LATERAL (SELECT l.row_id FROM ferryman_ledger l
                         WHERE l.workspace = p_workspace AND l.kind = 'people'
                           AND l.source_id = p.source_id LIMIT 1) person ON true
    )
    SELECT count(*) INTO n FROM written;
    RETURN n;
END
$$;

CREATE FUNCTION democrm_write_messages(
    p_rows jsonb, p_workspace text, p_kind text, p_run_id bigint
) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    n integer;
BEGIN
    WITH input AS (
        SELECT * FROM jsonb_to_recordset(p_rows)
            AS r(id bigint, deal_id bigint, subject text, sender text, sent_at timestamptz,
                 body text)
    ), written AS (
        INSERT INTO crm_messages (workspace, source_id, deal_id, subject, sender, sent_at, body)
        SELECT p_workspace, f.id, deal.row_id, f.subject, f.sender, f.sent_at, f.body
          FROM input f
          LEFT JOIN LATERAL (SELECT l.row_id FROM ferryman_ledger l
                              WHERE l.workspace = p_workspace AND l.kind = 'deals'
                                AND l.source_id = f.deal_id::text LIMIT 1) deal ON true
        RETURNING id, source_id
    ), claimed AS (
        INSERT INTO ferryman_ledger (workspace, kind, source_id, row_id, run_id)
        SELECT p_workspace, p_kind, w.source_id::text, w.id, p_run_id FROM written w
    )
    SELECT count(*) INTO n FROM written;
    RETURN n;
END
$$;
