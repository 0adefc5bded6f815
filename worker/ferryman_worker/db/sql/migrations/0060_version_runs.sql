-- The run that wrote a ledger slot's current source version when it is not the run that claimed
-- the slot (a delta that updated the row); NULL: run_id wrote it. A delta of a tree kind reads
-- again every child of the parents it wrote (claimed or updated).
ALTER TABLE ferryman_ledger ADD COLUMN version_run_id bigint;
