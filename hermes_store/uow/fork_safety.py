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

A fork must also not happen in the middle of a write. SQLite keeps what each connection
of the process has locked in memory shared by all of them, and the child inherits that
memory but not the file locks themselves: forked while a parent thread held the write
lock, the child's own connections would find it "held by another connection of this
process" and wait for it forever. So before a fork every registered holder may *quiesce*
(the unit of work takes its writer lock, waiting for the write in progress to commit),
and lets go again in the parent afterwards. A holder whose pause fails is logged and
skipped; the others still pause.
"""

from __future__ import annotations

import logging
import os
import weakref
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

H = TypeVar("H")

log = logging.getLogger(__name__)

_HOLDERS: weakref.WeakKeyDictionary[Any, Callable[[Any], Iterable[object]]] = weakref.WeakKeyDictionary()
_INHERITED: list[object] = []
"""What children forgot: kept, unused and unclosed, until the child exits."""
_QUIESCERS: weakref.WeakKeyDictionary[Any, tuple[Callable[[Any], bool], Callable[[Any], None]]] = (
    weakref.WeakKeyDictionary()
)
_QUIESCED: list[tuple[Any, Callable[[Any], None]]] = []
"""Holders quiesced for the fork in progress, with how each resumes in the parent."""


def forget_in_child(holder: H, forget: Callable[[H], Iterable[object]]) -> None:
    """In a child forked while ``holder`` lives, call ``forget(holder)`` before anything else.

    ``forget`` drops ``holder``'s references to the parent's connections and returns
    them; they are kept here, never closed. ``holder`` is referenced weakly.
    """
    _HOLDERS[holder] = forget


def quiesce_for_fork(holder: H, pause: Callable[[H], bool], resume: Callable[[H], None]) -> None:
    """Before any fork while ``holder`` lives, call ``pause(holder)``; when it returns
    ``True``, call ``resume(holder)`` in the parent once the fork is done (the child gets
    fresh state from :func:`forget_in_child` instead). ``holder`` is referenced weakly."""
    _QUIESCERS[holder] = (pause, resume)


def _quiesce_all() -> None:
    # One holder that cannot pause must not leave the others unpaused: an error raised
    # here would end the loop, and Python only prints it ("Exception ignored") and forks.
    for holder, (pause, resume) in list(_QUIESCERS.items()):
        try:
            paused = pause(holder)
        except Exception:
            log.warning("forking without pausing %r", holder, exc_info=True)
            continue
        if paused:
            _QUIESCED.append((holder, resume))


def _resume_all() -> None:
    while _QUIESCED:
        holder, resume = _QUIESCED.pop()
        try:
            resume(holder)
        except Exception:  # as in _quiesce_all: the other holders still resume
            log.warning("could not resume %r after a fork", holder, exc_info=True)


def _forget_all() -> None:
    _QUIESCED.clear()  # what the parent paused is the parent's to resume
    for holder, forget in list(_HOLDERS.items()):
        _INHERITED.extend(forget(holder))


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(before=_quiesce_all, after_in_parent=_resume_all, after_in_child=_forget_all)
