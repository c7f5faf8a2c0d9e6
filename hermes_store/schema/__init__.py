"""The schema: ORM models, column types and migration support (adoption of upstream files,
the revision history read from disk, idempotent operations, guards)."""
