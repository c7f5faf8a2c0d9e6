"""The last reason a ``SessionDB`` could not be opened, kept for user-facing messages.

When opening the store fails, Hermes carries on without it and its slash commands
(``/resume``, ``/title``, ``/history``…) say the session database is unavailable. This
module remembers why, per process, so that message can name the cause. A later
successful open does not forget it: under concurrent opens, a success in one thread
must not erase the cause another thread is about to report. Only an explicit
``_set_last_init_error(None)`` clears it.
"""

from __future__ import annotations

import threading

from hermes_store.drop_in.wal_fallback import WAL_INCOMPATIBILITY_MARKERS

_last_init_error: str | None = None
_last_init_error_lock = threading.Lock()

_NETWORK_FS_HINT = " (state.db may be on NFS/SMB/FUSE — see https://www.sqlite.org/wal.html)"


def _set_last_init_error(message: str | None) -> None:
    """Record ``message`` (``"<ExceptionType>: <text>"``) as the last open failure, or
    clear it with ``None``."""
    global _last_init_error
    with _last_init_error_lock:
        _last_init_error = message


def get_last_init_error() -> str | None:
    """The last recorded open failure of this process, or ``None``."""
    return _last_init_error


def format_session_db_unavailable(prefix: str = "Session database not available") -> str:
    """A sentence for the user saying the session database is unavailable, and why.

    ``"<prefix>."`` when no failure was recorded, else ``"<prefix>: <cause>."``; a cause
    that shows the file system refused WAL also points at network file systems.
    """
    cause = get_last_init_error()
    if not cause:
        return f"{prefix}."
    hint = _NETWORK_FS_HINT if any(m in cause.lower() for m in WAL_INCOMPATIBILITY_MARKERS) else ""
    return f"{prefix}: {cause}{hint}."
