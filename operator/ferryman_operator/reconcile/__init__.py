"""The operator's decisions, as plain functions of plain values: no kopf, no Kubernetes client,
no database. Each module takes what was observed and returns what to do or to write, and is
unit-tested without a cluster (tests/unit/ferryman_operator/)."""
