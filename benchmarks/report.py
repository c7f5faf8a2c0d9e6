"""Figures of a benchmark run: one value per side, their ratio, a target, and tables to print.

A :class:`Figure` is one row of the final report: the plain-``sqlite3`` baseline's value, the
``hermes_store`` value, ``ratio = store / baseline`` and, when the project sets one, a
:class:`Target` that says whether the row passes. Values carry a unit so that seconds,
throughputs, byte counts and yes/no answers all print sensibly.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from benchmarks.timing import format_duration

__all__ = ["Figure", "Target", "format_figures", "format_value", "targets_summary"]

Unit = Literal["s", "msg/s", "B", "MB", "count", "bool", "x"]
TargetKind = Literal["ratio_max", "ratio_below", "ratio_min", "store_zero", "store_max"]


@dataclass(frozen=True, slots=True)
class Target:
    """What a figure must achieve.

    * ``ratio_max``: ``store / baseline <= value``;
    * ``ratio_below``: ``store / baseline < value`` (strictly faster than the baseline for 1.0);
    * ``ratio_min``: ``store / baseline >= value`` (throughputs);
    * ``store_zero``: the store's value is 0 (lost messages, errors, "Alembic imported");
    * ``store_max``: the store's value is at most ``value`` (a unitless growth factor).
    """

    kind: TargetKind
    value: float = 0.0

    def describe(self) -> str:
        """Short text for the report's "target" column."""
        if self.kind == "ratio_max":
            return f"≤ {self.value:g}x"
        if self.kind == "ratio_below":
            return f"< {self.value:g}x"
        if self.kind == "ratio_min":
            return f"≥ {self.value:g}x"
        if self.kind == "store_zero":
            return "store = 0"
        return f"store ≤ {self.value:g}"

    def check(self, baseline: float | None, store: float | None, ratio: float | None) -> bool | None:
        """True (met), False (missed) or None (not measurable: a side is missing)."""
        if self.kind == "store_zero":
            return None if store is None else store == 0
        if self.kind == "store_max":
            return None if store is None else store <= self.value
        if ratio is None:
            return None
        if self.kind == "ratio_max":
            return ratio <= self.value
        if self.kind == "ratio_below":
            return ratio < self.value
        return ratio >= self.value


@dataclass(frozen=True, slots=True)
class Figure:
    """One comparison row: a scenario's figure for the baseline and for ``hermes_store``."""

    scenario: str
    name: str
    unit: Unit
    baseline: float | None
    store: float | None
    target: Target | None = None
    note: str = ""
    detail: dict[str, float] = field(default_factory=dict)

    @property
    def ratio(self) -> float | None:
        """``store / baseline``; ``None`` when a side is missing or the baseline is zero."""
        if self.baseline is None or self.store is None or self.baseline == 0:
            return None
        if self.unit in ("count", "bool"):
            return None
        return self.store / self.baseline

    @property
    def met(self) -> bool | None:
        """Whether the target is met (``None`` without a target or without values)."""
        return None if self.target is None else self.target.check(self.baseline, self.store, self.ratio)


def format_value(value: float | None, unit: Unit) -> str:
    """Render one value in its unit; ``-`` for a missing value."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if unit == "s":
        return format_duration(value)
    if unit == "msg/s":
        return f"{value:,.0f} msg/s"
    if unit == "B":
        return f"{value:,.0f} B"
    if unit == "MB":
        return f"{value:,.1f} MB"
    if unit == "count":
        return f"{value:,.0f}"
    if unit == "bool":
        return "yes" if value else "no"
    return f"{value:.2f}x"


def _status(figure: Figure) -> str:
    met = figure.met
    if met is None:
        return "" if figure.target is None else "n/a"
    return "met" if met else "MISSED"


def _rows(figures: Sequence[Figure]) -> list[tuple[str, ...]]:
    return [
        (
            f.scenario,
            f.name,
            format_value(f.baseline, f.unit),
            format_value(f.store, f.unit),
            "-" if f.ratio is None else f"{f.ratio:.2f}x",
            f.target.describe() if f.target else "",
            _status(f),
        )
        for f in figures
    ]


_HEADERS = ("scenario", "figure", "baseline", "hermes_store", "ratio", "target", "status")


def format_figures(figures: Iterable[Figure], *, markdown: bool = False) -> str:
    """All figures as an aligned text table, or as a GitHub Markdown table."""
    figures = list(figures)
    rows = _rows(figures)
    if markdown:
        lines = [
            "| " + " | ".join(_HEADERS) + " |",
            "| --- | --- | ---: | ---: | ---: | :---: | :---: |",
            *("| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows),
        ]
        return "\n".join(lines)
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(_HEADERS)]

    def line(cells: Sequence[str]) -> str:
        left = [cells[0].ljust(widths[0]), cells[1].ljust(widths[1])]
        right = [cell.rjust(w) for cell, w in zip(cells[2:], widths[2:], strict=True)]
        return "  ".join(left + right).rstrip()

    return "\n".join([line(_HEADERS), "  ".join("-" * w for w in widths), *(line(r) for r in rows)])


def targets_summary(figures: Iterable[Figure]) -> tuple[list[Figure], list[Figure]]:
    """The figures with a target, split into (met, missed); unmeasurable ones count as missed."""
    met: list[Figure] = []
    missed: list[Figure] = []
    for f in figures:
        if f.target is None:
            continue
        (met if f.met else missed).append(f)
    return met, missed
