"""In-memory SQLite stores: ``SessionDB(":memory:")``, as upstream Hermes offers.

A plain ``:memory:`` database belongs to one SQLite connection, but a store uses several
(a write connection and read connections kept apart, so reads never wait behind the
writer's transaction in Python). Sharing one connection (``StaticPool``) would put a
read's ``BEGIN``/``ROLLBACK`` inside a concurrent write transaction; SQLite's shared
cache answers conflicts with ``SQLITE_LOCKED`` at once, past the busy timeout and the
retries. So the store is a database of SQLite's ``memdb`` VFS under a name of its own:
every connection opening that name sees the same database, with ordinary file locking
(``BEGIN IMMEDIATE``, the busy timeout and the unit of work's retries all work as on a
file in rollback-journal mode). It lives as long as one connection to it is open, so the
store keeps one open until it is closed.
"""

from __future__ import annotations

import os
import uuid

from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError

MEMORY = ":memory:"
_VFS = "memdb"


def names_memory(target: str | os.PathLike[str] | URL | None) -> bool:
    """Whether ``target`` asks for a private in-memory SQLite database.

    ``":memory:"`` (a ``str`` or ``Path``), ``sqlite://`` and ``sqlite:///:memory:``; an
    in-memory URL with parameters of its own (shared cache, another VFS) is left as given.
    """
    if target is None:
        return False
    if isinstance(target, str) and "://" in target:
        try:
            target = make_url(target)
        except ArgumentError:
            return False  # not a URL at all: opening it reports that
    if isinstance(target, URL):
        in_memory = target.database in (None, "", MEMORY) and not target.query
        return target.get_backend_name() == "sqlite" and in_memory
    return os.fspath(target) == MEMORY


def shared_memory_url() -> URL:
    """A new, empty in-memory database that every connection of one engine shares."""
    return URL.create(
        "sqlite", database=f"file:/hermes-store-{uuid.uuid4().hex}", query={"vfs": _VFS, "uri": "true"}
    )


def is_shared_memory(url: URL) -> bool:
    """Whether ``url`` names a ``memdb`` database (made by :func:`shared_memory_url`)."""
    return url.get_backend_name() == "sqlite" and url.query.get("vfs") == _VFS
