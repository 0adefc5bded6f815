"""Everything that talks to PostgreSQL directly: connections, the schema and its migrations,
and the named queries. SQL lives in ``sql/``; Python modules never build SQL from strings."""
