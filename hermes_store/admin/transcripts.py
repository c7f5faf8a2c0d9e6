"""Transcript files that Hermes keeps beside the database, removed with their session."""

from __future__ import annotations

import glob
import logging
import os
from collections.abc import Iterable
from pathlib import Path

log = logging.getLogger(__name__)


def remove_transcripts(sessions_dir: str | os.PathLike[str] | None, session_ids: Iterable[str]) -> None:
    """Delete ``<id>.json``, ``<id>.jsonl`` and ``request_dump_<id>_*.json`` in ``sessions_dir``.

    Missing files and file-system errors are ignored: a transcript left behind must never
    undo a database delete that has already committed. The id is glob-escaped, so an id
    containing ``*`` or ``[`` cannot remove another session's dumps.
    """
    if not sessions_dir:
        return
    directory = Path(sessions_dir)
    for session_id in session_ids:
        candidates = [directory / f"{session_id}.json", directory / f"{session_id}.jsonl"]
        try:
            candidates += list(directory.glob(f"request_dump_{glob.escape(session_id)}_*.json"))
        except (OSError, ValueError) as exc:
            log.debug("could not list transcripts of %s: %s", session_id, exc)
        for path in candidates:
            try:
                path.unlink(missing_ok=True)
            except OSError as exc:
                log.debug("could not remove %s: %s", path, exc)
