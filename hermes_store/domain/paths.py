"""Where the store lives on disk.

The location is resolved each time it is asked for, never at import time, so that a
process that sets ``HERMES_HOME`` after importing hermes_store (as Hermes' profile
switching does) still gets the database of the profile it switched to.
"""

from __future__ import annotations

import os
from pathlib import Path

DB_FILENAME = "state.db"


def hermes_home() -> Path:
    """Return the Hermes home directory: ``$HERMES_HOME`` if set and non-blank, else ``~/.hermes``."""
    configured = os.environ.get("HERMES_HOME", "").strip()
    if configured:
        return Path(configured).expanduser()
    return Path.home() / ".hermes"


def hermes_profile() -> str | None:
    """The Hermes profile the home is the folder of (``…/profiles/<name>``), or ``None`` for
    any other home (``~/.hermes``, the default profile)."""
    home = hermes_home()
    return home.name if home.parent.name == "profiles" and home.name else None


def default_db_path() -> Path:
    """Return the default database path, ``<hermes home>/state.db``, resolved now."""
    return hermes_home() / DB_FILENAME
