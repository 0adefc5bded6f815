-- A plug-in provider's destination table and writer.
CREATE TABLE fake_widgets (
    id        bigserial PRIMARY KEY,
    workspace text      NOT NULL,
    source_id bigint    NOT NULL,
    name      text      NOT NULL
);

CREATE FUNCTION fake_write_widgets(p_rows jsonb, p_workspace text, p_kind text, p_run_id bigint)
RETURNS integer LANGUAGE sql AS $$ SELECT 0 $$;
