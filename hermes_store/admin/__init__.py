"""Operator tools on top of the store: backup, doctor, maintenance, copying between backends,
transcript files."""
