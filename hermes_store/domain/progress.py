"""How a long step reports its progress, without knowing who displays it.

The copy and the migrations call a :data:`ProgressFn` as they go; the CLI passes one
that draws a progress display (:func:`hermes_store.cli.output.step_progress`), a library
caller may pass its own or none at all.
"""

from __future__ import annotations

from collections.abc import Callable

ProgressFn = Callable[[str, int, "int | None"], None]
"""Called with (step name, rows done so far in that step, rows the step has in all or
``None`` when unknown). A new step name starts a new line of the display."""


def ignore_progress(step: str, done: int, total: int | None) -> None:
    """A :data:`ProgressFn` that reports nothing (the default for library callers)."""
