"""Alembic history of hermes_store (revisions 0001–0011), shipped as ``hermes_store.migrations``."""
