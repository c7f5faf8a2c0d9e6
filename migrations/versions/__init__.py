"""Revisions 0001–0011, one per upstream schema version."""
