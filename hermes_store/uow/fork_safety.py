"""After ``os.fork()``, the child never uses a connection its parent opened.

A SQLite connection must not cross a fork (SQLite's "How To Corrupt" notes: the child
would share the parent's file handles and lock state); a server connection's socket
would carry two processes' messages at once. Connections in the pool, and those the
unit of work keeps checked out (the write connection, idle read connections), are all
copied into a child. There they are *forgotten*: dropped by their holders, which open
new ones on next use, but neither used nor closed — closing in the child could still
act for the parent (a PostgreSQL driver saying goodbye on the shared socket, SQLite's
last-connection checkpoint deleting the parent's ``-wal`` file). They stay referenced
here for the child's lifetime, so garbage collection never closes them either.
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

H = TypeVar("H")

_HOLDERS: weakref.WeakKeyDictionary[Any, Callable[[Any], Iterable[object]]] = weakref.WeakKeyDictionary()
_INHERITED: list[object] = []
"""What children forgot: kept, unused and unclosed, until the child exits."""


def forget_in_child(holder: H, forget: Callable[[H], Iterable[object]]) -> None:
    """In a child forked while ``holder`` lives, call ``forget(holder)`` before anything else.

    ``forget`` drops ``holder``'s references to the parent's connections and returns
    them; they are kept here, never closed. ``holder`` is referenced weakly.
    """
    _HOLDERS[holder] = forget


def _forget_all() -> None:
    for holder, forget in list(_HOLDERS.items()):
        _INHERITED.extend(forget(holder))


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_forget_all)
