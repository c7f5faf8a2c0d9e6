"""A search window split by id bucket, so each part reads one bucket of the GIN indexes.

Revision 0018 keys PostgreSQL's word, stored-grams and word-pair indexes by each
message's id bucket (``id >> ID_BUCKET_BITS``) beside its words or grams. A statement
that names one bucket with an equality (``(m.id >> 18) = 37``) lets GIN step through the
bucket's posting list and the words' together, skipping to the bucket's entries in each:
the lookup reads that bucket's candidates, not every candidate in the store. A window of
ids that crosses buckets is therefore written as one arm per bucket, joined by
``UNION ALL`` (an equality per arm: GIN cannot skip with ``= ANY``, and the planner does
not spread a list of buckets over a GIN scan by itself).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

ID_BUCKET_BITS = 18
"""The width of a bucket, as revision 0018 indexes it: ``id >> 18``, 262,144 ids."""
MAX_BUCKET_ARMS = 8
"""A window crossing more buckets than this is looked up whole (no bucket named): it
covers most of a large store, and one arm per bucket would cost more to plan than the
buckets save."""
MIN_STORE_BUCKETS = 4
"""A store whose ids reach fewer buckets is not split: a bucket then holds a third of it or
more, the planner rightly weighs its key like a scan of that share (and may walk a short
window by the primary key instead), and the arms would save little."""
WINDOW_BOUNDS = "m.id > :floor AND m.id <= :ceiling"
"""A window's bounds in its one-statement form (not split by bucket)."""


def splits_by_bucket(newest: int) -> bool:
    """Whether a store whose newest message id is ``newest`` reaches enough buckets
    (:data:`MIN_STORE_BUCKETS`) for its windows to be split by bucket."""
    return newest >> ID_BUCKET_BITS >= MIN_STORE_BUCKETS - 1


def bucket_arms(floor: int, ceiling: int) -> list[tuple[int, int, int]] | None:
    """The parts of the ids in ``(floor, ceiling]``, one per bucket, newest first: each
    ``(floor, ceiling, bucket)``; ``None`` when they cross more than :data:`MAX_BUCKET_ARMS`
    buckets, or reach the oldest id (``floor`` 0 or below): such a window reads every
    older bucket's candidates anyway, and one statement plans faster than its arms."""
    if ceiling <= floor:
        return []
    if floor <= 0 or (ceiling >> ID_BUCKET_BITS) - ((floor + 1) >> ID_BUCKET_BITS) >= MAX_BUCKET_ARMS:
        return None
    arms: list[tuple[int, int, int]] = []
    top = ceiling
    while top > floor:
        bucket = top >> ID_BUCKET_BITS
        bottom = max(floor, (bucket << ID_BUCKET_BITS) - 1)
        arms.append((bottom, top, bucket))
        top = bottom
    return arms


def oldest_bucket_floor(ceiling: int, buckets: int) -> int:
    """The floor of a window that takes ``buckets`` whole buckets down from ``ceiling``'s
    (``ceiling``'s own counted, partly filled or not); at least 0."""
    lowest = (ceiling >> ID_BUCKET_BITS) - buckets + 1
    return max((lowest << ID_BUCKET_BITS) - 1, 0)


def arm_bounds(index: int) -> str:
    """Arm ``index``'s bounds and bucket, for a ``WHERE`` clause (the parameters of
    :func:`arm_params`)."""
    return (
        f"(m.id >> {ID_BUCKET_BITS}) = CAST(:bucket_{index} AS integer)"
        f" AND m.id > :floor_{index} AND m.id <= :ceiling_{index}"
    )


def arm_params(arms: list[tuple[int, int, int]]) -> dict[str, Any]:
    """The bound values of :func:`arm_bounds` for each arm."""
    params: dict[str, Any] = {}
    for index, (floor, ceiling, bucket) in enumerate(arms):
        params |= {f"floor_{index}": floor, f"ceiling_{index}": ceiling, f"bucket_{index}": bucket}
    return params


def split_by_bucket(
    arms: list[tuple[int, int, int]], arm_sql: Callable[[str], str], columns: str, order_and_limit: str
) -> tuple[str, dict[str, Any]]:
    """One statement reading ``arms``: ``arm_sql(bounds)`` for each arm (its bounds and
    bucket written in), joined by ``UNION ALL``, then ``SELECT columns … order_and_limit``
    over the union; and the values its arms bind."""
    union = " UNION ALL ".join(f"({arm_sql(arm_bounds(index))})" for index in range(len(arms)))
    return f"SELECT {columns} FROM ({union}) AS arms {order_and_limit}", arm_params(arms)
