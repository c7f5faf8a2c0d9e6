"""How PostgreSQL word search sizes and reads its older slices (``search/postgres/words.py``)."""

from __future__ import annotations

from hermes_store.search.postgres.words import FEW_PAIRED_CANDIDATES, WALKED_ROW_COST, _older_slice

NEWEST = 10_000_000


def test_a_slice_the_index_would_cost_more_for_is_walked() -> None:
    # 14 matches in the newest 2,048 ids: about 68,000 in the store, against a next slice
    # of 2,340 ids weighed at 17 entries a row (39,780).
    window, walk = _older_slice(NEWEST, NEWEST - 2048, 14, 20, WALKED_ROW_COST, by_pairs=False)
    assert window == 2340 and walk
    # The same rate in a store a tenth the size: the index reads less, so it is used.
    smaller = NEWEST // 10
    assert _older_slice(smaller, smaller - 2048, 14, 20, WALKED_ROW_COST, by_pairs=False) == (2340, False)


def test_a_computed_vector_is_never_walked() -> None:
    assert _older_slice(NEWEST, NEWEST - 2048, 14, 20, None, by_pairs=False) == (2340, False)


def test_a_phrase_with_few_predicted_matches_takes_every_older_id() -> None:
    floor = NEWEST - 2048
    assert _older_slice(NEWEST, floor, 0, 20, WALKED_ROW_COST, by_pairs=True) == (floor, False)
    # At a million messages 4 matches in 2,048 ids predict 1,953 (at most 2,000): every
    # older id; 5 predict 2,441: the slices widen as for words.
    assert FEW_PAIRED_CANDIDATES == 2000
    million = 1_000_000
    assert _older_slice(million, million - 2048, 4, 20, WALKED_ROW_COST, by_pairs=True)[0] == million - 2048
    assert _older_slice(million, million - 2048, 5, 20, WALKED_ROW_COST, by_pairs=True)[0] == 10240


def test_a_slice_looked_up_by_bucket_weighs_only_its_buckets_entries() -> None:
    # The rate that walks a slice of a ten-million store looks it up once the lookup names
    # its buckets: it reads one bucket's entries, not the store's.
    assert _older_slice(NEWEST, NEWEST - 2048, 14, 20, WALKED_ROW_COST, by_pairs=False, by_bucket=True) == (
        2340,
        False,
    )
    # A dense phrase (candidates from two or more pairs, 0.5 entries a row) is still walked:
    # most of its slice's rows hold the pairs.
    assert _older_slice(NEWEST, NEWEST - 2048, 1500, 2000, 0.5, by_pairs=True, by_bucket=True)[1]
