-- Catalog queries of the destinations: what a mapping is checked against at admission.

-- name: table_columns
-- The columns of a table (NULL: no such table), with what a mapping needs to know of each.
SELECT a.attname AS name,
       format_type(a.atttypid, a.atttypmod) AS type,
       a.atttypid::regtype::text AS base_type,
       a.attnotnull AS not_null,
       a.atthasdef OR a.attidentity <> '' OR a.attgenerated <> '' AS has_default,
       a.attidentity AS identity,
       a.attgenerated <> '' AS generated,
       pg_get_serial_sequence(%(table)s, a.attname) AS sequence
  FROM pg_attribute a
 WHERE a.attrelid = to_regclass(%(table)s) AND a.attnum > 0 AND NOT a.attisdropped
 ORDER BY a.attnum;

-- name: unique_keys
-- The column sets of a table's unique indexes usable as a natural key (valid, not partial, no
-- expressions).
SELECT array_agg(a.attname::text ORDER BY a.attname) AS columns
  FROM pg_index i
  JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey)
 WHERE i.indrelid = to_regclass(%(table)s) AND i.indisunique AND i.indisvalid
   AND i.indpred IS NULL AND i.indexprs IS NULL
 GROUP BY i.indexrelid;

-- name: ferryman_tables_missing
-- Whether ferryman's own tables (its migrations) are missing from this database.
SELECT to_regclass('ferryman_ledger') IS NULL AS missing;

-- name: type_named
-- The type a mapping's cast names, as PostgreSQL spells it (NULL: no such type).
SELECT format_type(t.oid, NULL) AS type FROM (SELECT to_regtype(%(type)s) AS oid) t;

-- name: landing
-- The records of a kind without a mapping, oldest first.
SELECT source_id, record FROM ferryman_landing
 WHERE workspace = %(workspace)s AND kind = %(kind)s
 ORDER BY id
 LIMIT %(limit)s;

-- name: set_aside_slots
-- A sample's first step, inside the transaction it rolls back: the sampled kinds' slots of the
-- workspace, so records already imported (or landed) are written again.
DELETE FROM ferryman_ledger WHERE workspace = %(workspace)s AND kind = ANY(%(kinds)s);

-- name: table_resolved
-- A table as PostgreSQL resolves its name (the search path for an unqualified one): its schema
-- and name, unquoted (NULL: no such table).
SELECT n.nspname AS schema, c.relname AS name
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE c.oid = to_regclass(%(table)s);
