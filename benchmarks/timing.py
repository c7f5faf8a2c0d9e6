"""Timing helpers: per-call latencies, percentiles, and baseline-versus-store result tables."""

from __future__ import annotations

import gc
import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

__all__ = [
    "Result",
    "Summary",
    "format_duration",
    "format_table",
    "measure",
    "median",
    "percentile",
    "print_table",
    "summarize",
]


def measure(
    fn: Callable[[], object], rounds: int, *, warmup: int = 1, disable_gc: bool = True
) -> list[float]:
    """Call ``fn`` ``warmup + rounds`` times and return the last ``rounds`` latencies in seconds.

    The garbage collector is paused during the timed calls (unless ``disable_gc`` is false) so that
    a collection triggered by one implementation's allocations is not billed to the next call.
    """
    if rounds < 1:
        raise ValueError("rounds must be at least 1")
    for _ in range(warmup):
        fn()
    clock = time.perf_counter
    latencies: list[float] = []
    gc_was_enabled = gc.isenabled()
    if disable_gc:
        gc.disable()
    try:
        for _ in range(rounds):
            t0 = clock()
            fn()
            latencies.append(clock() - t0)
    finally:
        if gc_was_enabled:
            gc.enable()
    return latencies


def percentile(values: Sequence[float], p: float) -> float:
    """The ``p``-th percentile (0-100) of ``values``, linearly interpolated between ranks."""
    if not values:
        raise ValueError("percentile of an empty sequence")
    if not 0.0 <= p <= 100.0:
        raise ValueError("p must be between 0 and 100")
    ordered = sorted(values)
    position = (len(ordered) - 1) * p / 100.0
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    fraction = position - low
    return ordered[low] + (ordered[high] - ordered[low]) * fraction


def median(values: Sequence[float]) -> float:
    """The median of ``values`` (the 50th percentile)."""
    return percentile(values, 50.0)


@dataclass(frozen=True, slots=True)
class Summary:
    """Distribution of a list of latencies, in seconds."""

    n: int
    median: float
    p95: float
    p99: float
    mean: float
    minimum: float
    maximum: float
    total: float


def summarize(values: Sequence[float]) -> Summary:
    """Summarise latencies: count, median, p95, p99, mean, min, max and total."""
    total = math.fsum(values)
    return Summary(
        n=len(values),
        median=median(values),
        p95=percentile(values, 95.0),
        p99=percentile(values, 99.0),
        mean=total / len(values),
        minimum=min(values),
        maximum=max(values),
        total=total,
    )


@dataclass(frozen=True, slots=True)
class Result:
    """One comparison row: a metric for the baseline and for ``hermes_store``.

    ``baseline`` and ``store`` are seconds (usually a median latency) or ``None`` when that side was
    not run. ``ratio`` is ``store / baseline``: below 1.0 means ``hermes_store`` is faster.
    """

    name: str
    baseline: float | None
    store: float | None
    ratio: float | None

    @classmethod
    def of(cls, name: str, baseline: float | None, store: float | None = None) -> Result:
        """Build a row, computing ``ratio`` when both sides are present and the baseline is non-zero."""
        ratio = store / baseline if baseline and store is not None else None
        return cls(name, baseline, store, ratio)


def format_duration(seconds: float | None) -> str:
    """Human-readable duration with a unit suited to its size (ns, µs, ms or s); ``-`` for None."""
    if seconds is None:
        return "-"
    if seconds < 1e-6:
        return f"{seconds * 1e9:.0f} ns"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.1f} µs"
    if seconds < 1.0:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds:.2f} s"


def _format_ratio(ratio: float | None) -> str:
    return "-" if ratio is None else f"{ratio:.2f}x"


def format_table(
    results: Iterable[Result],
    *,
    markdown: bool = False,
    headers: tuple[str, str, str, str] = ("benchmark", "baseline", "hermes_store", "ratio"),
) -> str:
    """Render results as an aligned plain-text table, or as a GitHub Markdown table."""
    rows = [
        (r.name, format_duration(r.baseline), format_duration(r.store), _format_ratio(r.ratio))
        for r in results
    ]
    if markdown:
        lines = [
            "| " + " | ".join(headers) + " |",
            "| --- | ---: | ---: | ---: |",
            *("| " + " | ".join(row) + " |" for row in rows),
        ]
        return "\n".join(lines)
    widths = [max(len(h), *(len(row[i]) for row in rows)) if rows else len(h) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        first = cells[0].ljust(widths[0])
        rest = (cell.rjust(width) for cell, width in zip(cells[1:], widths[1:], strict=True))
        return "  ".join([first, *rest]).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(headers), rule, *(line(row) for row in rows)])


def print_table(results: Iterable[Result], *, markdown: bool = False) -> None:
    """Print :func:`format_table` output to standard output."""
    print(format_table(results, markdown=markdown))
