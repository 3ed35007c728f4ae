"""groove-postgres: groove's index on PostgreSQL (pgvector + pg_trgm), for teams.

See the distribution's README.md; the store is :class:`groove_postgres.store.PostgresStore`.
"""
