-- An example application's own schema (a small sales tool), created by the application, never
-- by ferryman: foreign keys, unique natural keys, identity and serial ids, checks and triggers.
-- ferryman writes into it through mapping.yaml.

CREATE SCHEMA sales;

CREATE TABLE sales.companies (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    workspace  text        NOT NULL,
    name       text        NOT NULL,
    domain     text        NOT NULL,
    industry   text,
    headcount  integer     CHECK (headcount > 0),
    created_at timestamptz,
    UNIQUE (workspace, domain)
);

CREATE TABLE sales.contacts (
    id              bigserial PRIMARY KEY,
    workspace       text      NOT NULL,
    company_id      bigint    NOT NULL REFERENCES sales.companies (id),
    first_name      text      NOT NULL,
    last_name       text      NOT NULL,
    email           text      NOT NULL,
    job_title       text,
    imported_by_run bigint,
    UNIQUE (workspace, email)
);

CREATE TABLE sales.deals (
    id         serial      PRIMARY KEY,
    workspace  text        NOT NULL,
    contact_id bigint      REFERENCES sales.contacts (id),
    title      text        NOT NULL,
    amount     numeric(12, 2) NOT NULL CHECK (amount >= 0),
    stage      text        NOT NULL DEFAULT 'lead',
    created_at timestamptz,
    updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE sales.deal_watchers (
    deal_id    integer NOT NULL REFERENCES sales.deals (id),
    contact_id bigint  NOT NULL REFERENCES sales.contacts (id),
    PRIMARY KEY (deal_id, contact_id)
);

CREATE TABLE sales.notes (
    id         bigserial   PRIMARY KEY,
    workspace  text        NOT NULL,
    deal_id    integer     NOT NULL REFERENCES sales.deals (id),
    body       text        NOT NULL,
    created_at timestamptz
);

-- The application keeps e-mail addresses in lower case.
CREATE FUNCTION sales.lower_email() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.email := lower(NEW.email);
    RETURN NEW;
END
$$;
CREATE TRIGGER contacts_lower_email BEFORE INSERT OR UPDATE ON sales.contacts
    FOR EACH ROW EXECUTE FUNCTION sales.lower_email();

-- ... and refuses an empty note.
CREATE FUNCTION sales.refuse_empty_note() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF btrim(NEW.body) = '' THEN
        RAISE EXCEPTION USING ERRCODE = 'check_violation', MESSAGE = 'a note needs a body';
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER notes_need_a_body BEFORE INSERT ON sales.notes
    FOR EACH ROW EXECUTE FUNCTION sales.refuse_empty_note();
