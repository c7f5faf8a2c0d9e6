"""Splitting a window of ids by bucket (search/id_buckets.py), checked against brute force."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from hermes_store.search.id_buckets import (
    ID_BUCKET_BITS,
    MAX_BUCKET_ARMS,
    arm_bounds,
    arm_params,
    bucket_arms,
    oldest_bucket_floor,
    split_by_bucket,
)

WIDTH = 1 << ID_BUCKET_BITS


@given(st.integers(0, 40 * WIDTH), st.integers(0, 12 * WIDTH))
def test_the_arms_cover_the_window_once_each_inside_its_bucket(floor: int, size: int) -> None:
    ceiling = floor + size
    arms = bucket_arms(floor, ceiling)
    crossed = {i >> ID_BUCKET_BITS for i in (floor + 1, ceiling)} if size else set()
    spanned = (ceiling >> ID_BUCKET_BITS) - ((floor + 1) >> ID_BUCKET_BITS) + 1 if size else 0
    if spanned > MAX_BUCKET_ARMS or (floor == 0 and size):
        assert arms is None
        return
    assert arms is not None
    assert len(arms) == spanned
    assert crossed <= {bucket for _, _, bucket in arms}
    # Newest first, adjacent, and together exactly (floor, ceiling].
    expected_top = ceiling
    for low, high, bucket in arms:
        assert high == expected_top and low < high
        assert (low + 1) >> ID_BUCKET_BITS == bucket == high >> ID_BUCKET_BITS
        expected_top = low
    assert expected_top == floor or not arms


def test_a_window_at_a_bucket_edge_takes_whole_buckets() -> None:
    last_of_bucket_3 = 4 * WIDTH - 1
    assert bucket_arms(last_of_bucket_3 - WIDTH, last_of_bucket_3) == [
        (last_of_bucket_3 - WIDTH, last_of_bucket_3, 3)
    ]
    assert bucket_arms(5, 5) == []
    assert bucket_arms(0, WIDTH) is None  # reaches the oldest id: one statement
    assert oldest_bucket_floor(last_of_bucket_3, 1) == 3 * WIDTH - 1
    assert oldest_bucket_floor(last_of_bucket_3 + 7, 2) == 3 * WIDTH - 1
    assert oldest_bucket_floor(100, 4) == 0
    # Eight whole buckets are still split; nine are not.
    last_of_bucket_11 = 12 * WIDTH - 1
    assert len(bucket_arms(oldest_bucket_floor(last_of_bucket_11, 8), last_of_bucket_11) or []) == 8
    assert bucket_arms(oldest_bucket_floor(last_of_bucket_11, 9), last_of_bucket_11) is None


def test_the_union_names_every_arm_with_its_own_values() -> None:
    arms = [(WIDTH, 2 * WIDTH + 5, 2), (WIDTH - 1, WIDTH, 1)]
    sql, params = split_by_bucket(
        arms, lambda bounds: f"SELECT m.id FROM messages m WHERE {bounds}", "id", "LIMIT 3"
    )
    assert sql.startswith("SELECT id FROM (") and sql.endswith(") AS arms LIMIT 3")
    assert params == arm_params(arms)
    assert sql.count("UNION ALL") == 1
    assert arm_bounds(1) in sql and arm_bounds(0) in sql
    assert f"(m.id >> {ID_BUCKET_BITS}) = CAST(:bucket_0 AS integer)" in sql
    assert arm_params(arms) == {
        "floor_0": WIDTH,
        "ceiling_0": 2 * WIDTH + 5,
        "bucket_0": 2,
        "floor_1": WIDTH - 1,
        "ceiling_1": WIDTH,
        "bucket_1": 1,
    }
