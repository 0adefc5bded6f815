-- Tenancy: a run's credential, sealed by the operator at admission from the Secret in the run's
-- own namespace (workers read it here and need no Kubernetes API rights); and the namespace that
-- owns each workspace (the first to run in it), so no other namespace's run writes into it.

CREATE TABLE ferryman_run_credentials (
    run_id  bigint      PRIMARY KEY REFERENCES ferryman_runs (id) ON DELETE CASCADE,
    hosts   text[]      NOT NULL,  -- the hosts the credential is bound to (not secret)
    sealed  bytea       NOT NULL,  -- Fernet, with the installation's sealing key
    at      timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE ferryman_workspaces (
    workspace  text        PRIMARY KEY,
    namespace  text        NOT NULL,
    claimed_at timestamptz NOT NULL DEFAULT now()
);

-- Existing workspaces belong to the namespace of their first run (runs are named namespace/name).
INSERT INTO ferryman_workspaces (workspace, namespace, claimed_at)
SELECT DISTINCT ON (workspace) workspace, split_part(name, '/', 1), created_at
  FROM ferryman_runs
 WHERE position('/' IN name) > 0
 ORDER BY workspace, id;
