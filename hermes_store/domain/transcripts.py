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
    containing ``*`` or ``[`` cannot remove another session's dumps, and only files lying
    directly in ``sessions_dir`` are ever removed: an id such as ``../x``, ``a/b`` or an
    absolute path names nothing here.
    """
    if not sessions_dir:
        return
    directory = Path(sessions_dir)
    try:
        home = directory.resolve()
    except OSError as exc:
        log.debug("could not resolve %s: %s", directory, exc)
        return
    for session_id in session_ids:
        candidates = [directory / f"{session_id}.json", directory / f"{session_id}.jsonl"]
        try:
            candidates += list(directory.glob(f"request_dump_{glob.escape(session_id)}_*.json"))
        except (OSError, ValueError) as exc:
            log.debug("could not list transcripts of %s: %s", session_id, exc)
        for path in candidates:
            if not _directly_inside(path, home):
                log.debug("not removing %s: it is not a file of %s", path, home)
                continue
            try:
                path.unlink(missing_ok=True)
            except OSError as exc:
                log.debug("could not remove %s: %s", path, exc)


def _directly_inside(path: Path, home: Path) -> bool:
    """Whether ``path`` names an entry of the directory ``home`` itself (after ``..`` and links).

    The folder holding the entry is resolved, not the entry: a symbolic link lying in
    ``home`` is removed as the link it is, never followed to its target.
    """
    try:
        return path.name not in ("", ".", "..") and path.parent.resolve() == home
    except OSError:
        return False
