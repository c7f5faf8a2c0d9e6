"""Session archiving: the ``SessionDB`` method.

An archived conversation is left out of :meth:`list_sessions_rich` and
:meth:`session_count` unless they are asked for it; nothing is deleted.
"""

from __future__ import annotations

from typing import ClassVar

from hermes_store.api.features.base import FacadeBase
from hermes_store.domain.validation import require_str
from hermes_store.repository import archive


class ArchiveMethods(FacadeBase):
    """Hiding and restoring whole conversations."""

    _ASYNC_READS: ClassVar[tuple[str, ...]] = ()
    _ASYNC_WRITES: ClassVar[tuple[str, ...]] = ("set_session_archived",)

    def set_session_archived(self, session_id: str, archived: bool) -> bool:
        """Archive (``archived`` true) or restore a session with its whole compression
        lineage: the sessions it continues and every session continuing it, so that no
        part of the conversation stays listed. ``False`` when there is no such session;
        setting the value it already has returns ``True``."""
        require_str("session_id", session_id)
        return self._write(
            lambda db: archive.set_archived(db, session_id, bool(archived)), "archiving a session"
        )
