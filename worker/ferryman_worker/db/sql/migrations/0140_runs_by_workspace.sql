-- A workspace's runs, found without reading every run: a task's walk asks which kinds an earlier
-- run of its workspace covered (a re-run then looks each page up in the ledger before writing
-- it), and a delta run asks for the workspace's last successful runs.
CREATE INDEX ferryman_runs_by_workspace ON ferryman_runs (workspace);
