"""pytest-alembic's built-in checks of the migration history.

* ``test_single_head_revision`` — the history has one head (0011), no forks;
* ``test_upgrade`` — an empty database upgrades from base to head;
* ``test_model_definitions_match_ddl`` — after ``upgrade head`` autogenerate finds
  nothing to do: ``hermes_store.models`` and revisions 0001–0011 agree;
* ``test_up_down_consistency`` — every revision downgrades and upgrades again, in turn.

They run against the ``alembic_config`` / ``alembic_engine`` fixtures of
``tests/conftest.py``: the shipped migrations on a file-backed hermes_store engine.
"""

from pytest_alembic.tests import (
    test_model_definitions_match_ddl,
    test_single_head_revision,
    test_up_down_consistency,
    test_upgrade,
)

__all__ = [
    "test_model_definitions_match_ddl",
    "test_single_head_revision",
    "test_up_down_consistency",
    "test_upgrade",
]
