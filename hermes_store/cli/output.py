"""Output plumbing shared by the commands: consoles, JSON, number and time formats.

Human output goes through rich, which colours only when writing to a terminal (and
never with ``--no-color`` or ``$NO_COLOR``). Machine output (``--json``, ``--csv``,
exports) is written with ``click.echo`` and never styled. Progress bars go to stderr and
appear only when stderr is a terminal, so pipes and files get clean data.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, cast

import click
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from hermes_store.cli.target import StoreTarget
from hermes_store.domain.progress import ProgressFn

__all__ = [
    "console",
    "echo_json",
    "fmt_cost",
    "fmt_count",
    "fmt_int",
    "fmt_size",
    "fmt_time",
    "json_default",
    "progress_bar",
    "step_progress",
    "to_json",
]


PIPE_WIDTH = 160
"""Output width when stdout is not a terminal and ``$COLUMNS`` is not set."""


def _no_color() -> bool:
    context = click.get_current_context(silent=True)
    target = context.find_object(StoreTarget) if context is not None else None
    return bool(target and target.no_color)


def console(*, stderr: bool = False, wrap: bool = False) -> Console:
    """A rich console on stdout (or stderr) honouring ``--no-color``.

    Markup and emoji codes are off: user text (titles, messages) is printed as it is.
    Plain lines are left for the terminal to wrap (so they stay whole in pipes) unless
    ``wrap`` asks rich to wrap and indent long text itself.
    """
    plain = _no_color()
    out = Console(
        file=cast(IO[str], _TrimmedLines(sys.stderr if stderr else sys.stdout)),
        stderr=stderr,
        color_system=None if plain else "auto",
        no_color=plain or None,
        highlight=False,
        emoji=False,
        markup=False,
        soft_wrap=not wrap,
    )
    if not out.is_terminal and not os.environ.get("COLUMNS"):
        # Piped or redirected: no terminal to fit, so keep table columns whole.
        out.width = PIPE_WIDTH
    return out


# Spaces (and tabs) at the end of a line, before any closing colour codes.
_TRAILING_BLANKS = re.compile(r"[ \t]+((?:\x1b\[[0-9;]*m)*)(?=\n)")


class _TrimmedLines:
    """A text stream that drops trailing blanks from each line before writing it.

    rich pads table cells and wrapped text to the column width; those spaces are noise in
    pipes, diffs and copy-paste. Everything else is the wrapped stream's own.
    """

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(_TRAILING_BLANKS.sub(r"\1", text))
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def json_default(value: Any) -> Any:
    """``json.dumps`` fallback: bytes as UTF-8 text, dataclasses as dicts, paths as text."""
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).decode("utf-8", errors="replace")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    return str(value)


def to_json(value: Any, *, indent: int | None = 2) -> str:
    """``value`` as JSON text: UTF-8 (no ``\\u`` escapes), stable for scripts."""
    separators = (",", ": ") if indent is not None else (",", ":")
    return json.dumps(value, ensure_ascii=False, indent=indent, separators=separators, default=json_default)


def echo_json(value: Any) -> None:
    """Print ``value`` as indented JSON on stdout."""
    click.echo(to_json(value))


def fmt_time(epoch: float | None, *, seconds: bool = False) -> str:
    """Local time of an epoch-seconds value (``2026-05-01 14:03``), ``-`` when unknown."""
    if epoch is None:
        return "-"
    try:
        return time.strftime("%Y-%m-%d %H:%M:%S" if seconds else "%Y-%m-%d %H:%M", time.localtime(epoch))
    except (OverflowError, OSError, ValueError):
        return str(epoch)


def fmt_int(value: int | float | None) -> str:
    """A count with thousands separators; ``-`` when unknown."""
    if value is None:
        return "-"
    return f"{int(value):,}"


def fmt_count(value: int | float | None, noun: str, plural: str | None = None) -> str:
    """``1 tool call``, ``3 tool calls``, ``- tool calls`` when unknown."""
    if value is not None and int(value) == 1:
        return f"1 {noun}"
    return f"{fmt_int(value)} {plural or noun + 's'}"


def fmt_cost(value: float | None) -> str:
    """A US-dollar amount (``$0.0123``); ``-`` when unknown."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if value == 0:
        return "$0.00"
    if abs(value) < 0.01:
        return f"${value:.4f}"
    return f"${value:,.2f}"


def fmt_size(size: int | None) -> str:
    """A byte count in binary units (``1.5 MiB``); ``-`` when unknown."""
    if size is None:
        return "-"
    amount = float(size)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(amount) < 1024 or unit == "TiB":
            return f"{int(amount)} {unit}" if unit == "B" else f"{amount:.1f} {unit}"
        amount /= 1024
    return f"{size} B"  # pragma: no cover - loop always returns


@contextmanager
def progress_bar(description: str, total: float | None, *, unit_text: str = "") -> Iterator[Progress]:
    """A progress bar on stderr (hidden unless stderr is a terminal) with one task.

    Yields the ``Progress``; advance its first task (id 0) with ``progress.advance(0, n)``.
    """
    err = console(stderr=True)
    columns = [
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn() if not unit_text else TaskProgressColumn(),
        TextColumn(unit_text) if unit_text else TextColumn(""),
        TimeElapsedColumn(),
    ]
    with Progress(*columns, console=err, transient=True, disable=not err.is_terminal) as progress:
        progress.add_task(description, total=total)
        yield progress


@contextmanager
def step_progress() -> Iterator[ProgressFn]:
    """A progress display on stderr for a job of named steps (hidden unless stderr is a terminal).

    Yields a :data:`~hermes_store.domain.progress.ProgressFn`: each step gets a line with its
    name, rows done of total, rate and time left.
    """
    err = console(stderr=True)
    columns = [
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[rate]}"),
        TimeRemainingColumn(),
    ]
    tasks: dict[str, TaskID] = {}
    with Progress(*columns, console=err, disable=not err.is_terminal) as progress:

        def report(step: str, done: int, total: int | None) -> None:
            if step not in tasks:
                tasks[step] = progress.add_task(step, total=total, rate="")
            task = tasks[step]
            elapsed = progress.tasks[task].elapsed or 0.0
            rate = f"{done / elapsed:,.0f} rows/s" if elapsed > 0 else ""
            progress.update(task, completed=done, total=total, rate=rate)

        yield report
