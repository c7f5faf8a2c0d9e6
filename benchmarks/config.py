"""Sizes and round counts of a benchmark run (full and ``--quick``), and the shared timing loop."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from benchmarks.datasets import DatasetSpec
from benchmarks.timing import measure

__all__ = ["FULL", "QUICK", "RunConfig", "alternate"]


@dataclass(frozen=True, slots=True)
class RunConfig:
    """Everything that differs between a full run and a quick smoke run."""

    quick: bool
    seed: int
    cache_dir: Path
    dataset: DatasetSpec
    """The bulk-loaded database for search, listing, conversation, cold start and size."""
    rounds: int
    """Alternating rounds for every read figure (baseline, store, store, baseline, ...)."""
    read_budget_s: float
    """Target time per side and round for one read figure; sets the calls per round (1-20)."""
    append_rounds: int
    append_sessions: int
    append_messages_per_session: int
    contention_writers: tuple[int, ...]
    contention_messages: int
    """Messages each writer process appends."""
    contention_rounds: int
    cold_rounds: int
    upgrade_messages: tuple[int, ...]
    """Sizes of the version-9 legacy databases upgraded (at least two, to compare memory)."""
    listing_deep_offset: int
    small_dataset: DatasetSpec | None = None
    """A second, small store (most users' size) on which search and listing run too."""
    filter_source: str = "telegram"
    scenarios: tuple[str, ...] = field(
        default=("append", "contention", "search", "listing", "cold_start", "upgrade", "size")
    )

    def with_(self, **changes: object) -> RunConfig:
        """A copy with some fields changed."""
        return replace(self, **changes)  # type: ignore[arg-type]


def _full(seed: int, cache_dir: Path) -> RunConfig:
    return RunConfig(
        quick=False,
        seed=seed,
        cache_dir=cache_dir,
        # 19,999 sessions of 10 messages plus one of 500: 20,000 sessions, 200,490 messages.
        dataset=DatasetSpec(sessions=20_000, messages_per_session=10, long_session_messages=500, seed=seed),
        rounds=5,
        read_budget_s=0.15,
        append_rounds=9,
        append_sessions=40,
        append_messages_per_session=25,
        contention_writers=(4, 8),
        contention_messages=300,
        contention_rounds=5,
        cold_rounds=10,
        upgrade_messages=(20_000, 200_000),
        listing_deep_offset=10_000,
        # 1,950 sessions of 10 messages plus one of 500: 1,951 sessions, 20,000 messages.
        small_dataset=DatasetSpec(
            sessions=1_951, messages_per_session=10, long_session_messages=500, seed=seed
        ),
    )


def _quick(seed: int, cache_dir: Path) -> RunConfig:
    return RunConfig(
        quick=True,
        seed=seed,
        cache_dir=cache_dir,
        dataset=DatasetSpec(sessions=120, messages_per_session=10, long_session_messages=300, seed=seed),
        rounds=2,
        read_budget_s=0.01,
        append_rounds=2,
        append_sessions=5,
        append_messages_per_session=20,
        # Two writer counts, as in a full run, but fewer processes: each costs the smoke
        # test a Python start and imports (about 0.5 s of CPU).
        contention_writers=(2, 4),
        contention_messages=10,
        contention_rounds=1,
        cold_rounds=1,
        upgrade_messages=(300, 900),
        listing_deep_offset=60,
        small_dataset=DatasetSpec(sessions=40, messages_per_session=10, long_session_messages=100, seed=seed),
    )


FULL = _full
QUICK = _quick


def alternate(
    baseline: Callable[[], object],
    store: Callable[[], object],
    rounds: int,
    budget_s: float,
    *,
    max_inner: int = 20,
) -> tuple[list[float], list[float]]:
    """Time ``baseline`` and ``store`` in alternating rounds; return both latency lists (seconds).

    Each side is called once untimed first (warm caches, compiled statements). The number of
    calls per round is chosen from that call's duration so a round costs about ``budget_s`` per
    side. Even rounds run the baseline first, odd rounds the store first, so slow drift in the
    machine's load is shared between the two.
    """
    clock = time.perf_counter
    t0 = clock()
    baseline()
    t1 = clock()
    store()
    t2 = clock()
    slowest = max(t1 - t0, t2 - t1, 1e-6)
    inner = max(1, min(max_inner, int(budget_s / slowest)))
    base_lat: list[float] = []
    store_lat: list[float] = []
    for r in range(rounds):
        pair = [(baseline, base_lat), (store, store_lat)]
        if r % 2:
            pair.reverse()
        for fn, sink in pair:
            sink.extend(measure(fn, inner, warmup=0))
    return base_lat, store_lat
