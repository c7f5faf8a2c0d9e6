"""Which terms of a PostgreSQL substring search an index may serve (``STRONG_TRIGRAM_TERM``).

Pure SQL text: a term written against the plain indexed text can be looked up in
``pg_trgm``; one written against ``(text || '')`` is only checked on the candidates the
other conditions found. The plans themselves are checked on a real server in
``tests/postgres/test_pg_search_plans.py``.
"""

from __future__ import annotations

import pytest

from hermes_store.schema.indexed_text import INDEXED_TEXT
from hermes_store.search.plan import plan_search
from hermes_store.search.postgres.capabilities import STORED_CJK_GRAMS
from hermes_store.search.postgres.grams import MAX_LIFTED_TRIGRAMS, ascii_trigrams
from hermes_store.search.postgres.substring_condition import substring_condition
from hermes_store.search.postgres.substrings import _next_window_fills
from hermes_store.search.postgres.words import _next_word_window

UNINDEXED = f"({INDEXED_TEXT} || '')"


def _lookups(query: str) -> tuple[str, dict[str, object]]:
    params: dict[str, object] = {}
    condition, _terms = substring_condition(plan_search(query), params)
    return condition, params


def _indexed(condition: str, params: dict[str, object], term: str) -> bool:
    """Whether ``term`` is looked up in pg_trgm (its LIKE/ILIKE on the indexed text), not
    only checked (its regular expression, or a LIKE on the unindexed form)."""
    name = next(key for key, value in params.items() if value == f"%{term}%")
    if f"{INDEXED_TEXT} ILIKE :{name} " in condition or f"{INDEXED_TEXT} LIKE :{name} " in condition:
        return True
    assert f"~ :{name}r" in condition or f"{UNINDEXED} LIKE :{name} " in condition, condition
    return False


@pytest.mark.parametrize(
    ("query", "term", "indexed"),
    [
        # Beside a CJK gram condition a Latin term's ILIKE is only checked, whatever its
        # length; its regular expression is left to pg_trgm. (Measured at 1M messages,
        # with `chung`'s ILIKE indexed, pg_trgm estimated 1 row for 38,421
        # candidates and the planner read them all, 1.3 s; with the regex alone the
        # estimate is sane and the planner intersects pg_trgm with the gram index.)
        ("word 这个", "word", False),
        ("the 这个", "the", False),
        ("dockerfile 这个", "dockerfile", False),
        ("dockerfile the 这个", "dockerfile", False),
        # Shorter than five letters beside a longer term: only checked.
        ("word dockerfile ★", "word", False),
        # Five letters or more are looked up beside anything but a gram condition.
        ("word dockerfile ★", "dockerfile", True),
        # Without a better term every term is looked up.
        ("the ★", "the", True),
        ("word roth ★", "roth", True),
    ],
)
def test_terms_an_index_serves(query: str, term: str, indexed: bool) -> None:
    condition, params = _lookups(query)
    assert _indexed(condition, params, term) is indexed, condition


def test_bounded_windows_check_latin_terms_on_the_candidates_only() -> None:
    params: dict[str, object] = {}
    plan = plan_search("word 这个")
    rest, _ = substring_condition(plan, params)
    checked, _ = substring_condition(plan, dict(params), checked_beside_grams=True)
    unindexed = f"({INDEXED_TEXT} || '')"
    # The whole store: pg_trgm may serve the regular expression. A window: nothing but the grams.
    assert f"{INDEXED_TEXT} ~ :p0r" in rest
    assert f"{unindexed} ~ :p0r" in checked
    assert f"{INDEXED_TEXT} ~" not in checked
    assert "cjk_grams @>" in checked


@pytest.mark.parametrize(
    ("found", "wanted", "fills"),
    [
        (0, 20, False),
        (2, 20, False),
        (3, 20, True),
        (5, 20, True),
        (20, 20, False),
        (1, 9, True),
        (1, 10, False),
    ],
)
def test_the_second_window_runs_when_the_first_windows_rate_fills_the_page(
    found: int, wanted: int, fills: bool
) -> None:
    assert _next_window_fills(found, wanted) is fills


@pytest.mark.parametrize(
    ("covered", "found", "wanted", "slice_"),
    [
        (2048, 0, 20, 7 * 2048),  # nothing yet: eightfold
        (131_072, 7, 20, 561_737 - 131_072),  # "any does" at a million: to where 30 are due
        (2048, 10, 20, 4096),  # half way there: to where 30 are due
        (2048, 19, 20, 2048),  # at least twofold
        (2048, 1, 20, 7 * 2048),  # at most eightfold
    ],
)
def test_the_next_word_slice_is_sized_by_the_rate_so_far(
    covered: int, found: int, wanted: int, slice_: int
) -> None:
    assert _next_word_window(covered, found, wanted) == slice_


@pytest.mark.parametrize(
    ("term", "trigrams"),
    [
        ("them", ["the", "hem"]),
        ("THEM", ["the", "hem"]),  # ASCII letters fold, as the stored grams do
        ("my.app_config.ts", ["app", "con", "onf", "nfi", "fig"]),  # runs of letters and digits
        ("达成100完成率", ["100"]),
        ("café", ["caf"]),  # only ASCII: é is neither folded nor part of a run
        ("Ünïcode", ["cod", "ode"]),
        ("to", []),
        ("记忆", []),
        ("KELVIN", ["kel", "elv", "lvi", "vin"]),
    ],
)
def test_ascii_trigrams(term: str, trigrams: list[str]) -> None:
    assert ascii_trigrams(term) == trigrams


def test_a_long_terms_trigrams_are_thinned_but_keep_both_ends() -> None:
    found = ascii_trigrams("abcdefghijklmnopqrstuvwxyz")
    assert len(found) == MAX_LIFTED_TRIGRAMS
    assert found[0] == "abc" and found[-1] == "xyz"


def _with_trigrams(query: str, checked: bool = False) -> tuple[str, dict[str, object]]:
    params: dict[str, object] = {}
    condition, _terms = substring_condition(
        plan_search(query),
        params,
        grams_source=STORED_CJK_GRAMS,
        checked_beside_grams=checked,
        ascii_trigrams_in_grams=True,
    )
    return condition, params


@pytest.mark.parametrize("checked", [False, True])
def test_beside_a_gram_condition_latin_terms_join_it_and_are_only_checked(checked: bool) -> None:
    condition, params = _with_trigrams("Them 那个 ok", checked)
    assert condition.count(f"{STORED_CJK_GRAMS} @>") == 1
    grams = [value for key, value in params.items() if key.startswith("g")]
    assert grams == ["那个", "the", "hem"]  # `ok` has no trigram: it is only checked
    for term in ("Them", "ok"):
        assert not _indexed(condition, params, term)
        name = next(key for key, value in params.items() if value == f"%{term}%")
        assert f"{UNINDEXED} ~ :{name}r" in condition  # not even the regex goes to pg_trgm


def test_without_a_gram_condition_nothing_is_lifted() -> None:
    condition, params = _with_trigrams("dockerfile 数据库")
    assert "@>" not in condition
    assert _indexed(condition, params, "dockerfile")
