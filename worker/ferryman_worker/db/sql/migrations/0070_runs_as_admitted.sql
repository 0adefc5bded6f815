-- A run's definition is written once, at admission: the workspace, the source, the credential
-- reference, the kinds, phases and options, and the provider and mapping snapshots. No statement
-- of ferryman changes them afterwards; whatever else reaches the row (a write path into ferryman's
-- tables, a role that may update them) is refused, so what a worker reads back is what admission
-- checked.
CREATE FUNCTION ferryman_runs_as_admitted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF (NEW.workspace, NEW.provider, NEW.base_url, NEW.credential, NEW.kinds, NEW.phases,
        NEW.options, NEW.provider_definition, NEW.mapping)
       IS DISTINCT FROM
       (OLD.workspace, OLD.provider, OLD.base_url, OLD.credential, OLD.kinds, OLD.phases,
        OLD.options, OLD.provider_definition, OLD.mapping) THEN
        RAISE EXCEPTION 'run % is as it was admitted: its definition cannot change', OLD.name
            USING ERRCODE = 'integrity_constraint_violation',
                  HINT = 'admit a new run (a new MigrationRun) instead';
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER ferryman_runs_as_admitted BEFORE UPDATE ON ferryman_runs
    FOR EACH ROW EXECUTE FUNCTION ferryman_runs_as_admitted();
