"""The formats ``hermes-store export`` writes records in: JSONL, JSON and Markdown.

Reading the records and the file they go to are the store's side of an export
(:mod:`hermes_store.admin.session_files`); this is the rendering.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import IO, Any

from hermes_store.cli.output import to_json
from hermes_store.cli.render import markdown_session

FORMATS = ("jsonl", "json", "markdown")
_SUFFIX_FORMATS = {
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "json",
    ".md": "markdown",
    ".markdown": "markdown",
}


def format_for(path: str | None, explicit: str | None) -> str:
    """The export format: ``explicit``, else guessed from the file suffix, else JSONL."""
    if explicit:
        return explicit
    if path and path != "-":
        return _SUFFIX_FORMATS.get(Path(path).suffix.lower(), "jsonl")
    return "jsonl"


def write_records(
    records: Iterable[dict[str, Any]],
    fmt: str,
    stream: IO[str],
    *,
    single: bool = False,
    on_record: Callable[[], None] | None = None,
) -> int:
    """Write ``records`` to ``stream`` as ``fmt``; returns how many were written.

    JSON is a list (or, with ``single``, the one object); JSONL is one record per line;
    Markdown is one document per session separated by rules.
    """
    written = 0
    if fmt == "json" and not single:
        stream.write("[")
    for record in records:
        if fmt == "jsonl":
            stream.write(to_json(record, indent=None) + "\n")
        elif fmt == "json":
            prefix = "" if single else ("\n" if written == 0 else ",\n")
            stream.write(prefix + to_json(record))
        elif fmt == "markdown":
            if written:
                stream.write("\n---\n\n")
            stream.write(markdown_session(record, record.get("messages", [])))
        else:
            raise ValueError(f"unknown export format {fmt!r}")
        written += 1
        if on_record is not None:
            on_record()
    if fmt == "json":
        stream.write("\n" if single else ("\n]\n" if written else "]\n"))
    return written
