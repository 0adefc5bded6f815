-- A run keeps the definition of a declarative provider as it was at admission (a snapshot):
-- a run resumed hours later walks the same definition, whatever became of the file or the
-- resource it came from. NULL: a provider installed as a package, found by its name.

ALTER TABLE ferryman_runs ADD COLUMN provider_definition jsonb;
