"""Search routing (upstream-behaviour §8.2, contract §4.1 and §4.10).

The plans are also run against real in-memory FTS5 tables, word and trigram, shaped like
the store's, to show that each MATCH expression parses and each LIKE plan finds what it
should.
"""

from __future__ import annotations

import sqlite3

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hermes_store.search.plan import SearchPlan, like_pattern, plan_search

MESSAGES = [
    "你好，世界",  # 1
    "世界 你好",  # 2
    "你好 only",  # 3
    "记忆断裂 happened",  # 4
    "通信协议 draft",  # 5
    "记忆断裂 和 通信协议",  # 6
    "hello world",  # 7
    "100% sure_thing",  # 8
    "ｶﾀｶﾅ text",  # 9
]


def _store() -> sqlite3.Connection:
    connection = sqlite3.connect(":memory:")
    connection.execute("CREATE TABLE m (id INTEGER PRIMARY KEY, content TEXT)")
    connection.execute("CREATE VIRTUAL TABLE w USING fts5(content)")
    connection.execute("CREATE VIRTUAL TABLE g USING fts5(content, tokenize='trigram')")
    for rowid, content in enumerate(MESSAGES, start=1):
        for table in ("m", "w", "g"):
            connection.execute(f"INSERT INTO {table}(rowid, content) VALUES (?, ?)", (rowid, content))
    return connection


# Shared by the hypothesis test, which cannot take function-scoped fixtures.
_STORE = _store()


def _run(plan: SearchPlan) -> list[int]:
    """Execute a plan the way the search layer will, returning matching row ids."""
    if plan.kind == "empty":
        return []
    if plan.kind == "like":
        where = " AND ".join("content LIKE ? ESCAPE '\\'" for _ in plan.like_terms)
        sql = f"SELECT id FROM m WHERE {where} ORDER BY id"
        return [row[0] for row in _STORE.execute(sql, [like_pattern(t) for t in plan.like_terms])]
    table = "w" if plan.kind == "fts" else "g"
    sql = f"SELECT rowid FROM {table} WHERE {table} MATCH ? ORDER BY rowid"
    return [row[0] for row in _STORE.execute(sql, (plan.match,))]


@pytest.mark.parametrize(
    ("query", "plan"),
    [
        ("", SearchPlan("empty")),
        ("   \t\n", SearchPlan("empty")),
        ("***", SearchPlan("empty")),
        ("AND", SearchPlan("empty")),
        ('"', SearchPlan("empty")),
        ("hello world", SearchPlan("fts", match="hello world")),
        ("chat-send", SearchPlan("fts", match='"chat-send"')),
        ("foo:bar", SearchPlan("fts", match='"foo:bar"')),
        ("你好", SearchPlan("like", like_terms=("你好",))),
        ("你好 world", SearchPlan("like", like_terms=("你好 world",))),
        ('"你好"', SearchPlan("like", like_terms=("你好",))),
        ("记忆断裂", SearchPlan("trigram", match='"记忆断裂"')),
        ("记忆断裂 OR 通信协议", SearchPlan("trigram", match='"记忆断裂" OR "通信协议"')),
        ('"记忆断裂" OR "通信协议"', SearchPlan("trigram", match='"记忆断裂" OR "通信协议"')),
        ("记忆断裂 NOT 通信协议", SearchPlan("trigram", match='"记忆断裂" NOT "通信协议"')),
        ("记忆断裂 and 通信协议", SearchPlan("trigram", match='"记忆断裂" "and" "通信协议"')),
        ('"AND 记忆断裂 OR"', SearchPlan("trigram", match='"记忆断裂"')),
        ("sp_new and 血管瘤", SearchPlan("trigram", match='"sp_new" "and" "血管瘤"')),
        ("你好 世界", SearchPlan("like", like_terms=("你好", "世界"))),
        ("记忆 断裂", SearchPlan("like", like_terms=("记忆", "断裂"))),
        ("记忆断裂 a", SearchPlan("like", like_terms=("记忆断裂", "a"))),
        ("你好 OR 世界", SearchPlan("like", like_terms=("你好", "世界"))),
        ("你好 你好 世界", SearchPlan("like", like_terms=("你好", "世界"))),
        ("ｶﾀｶﾅ", SearchPlan("trigram", match='"ｶﾀｶﾅ"')),
        ("한국어 검색", SearchPlan("like", like_terms=("한국어", "검색"))),
    ],
)
def test_plan_search(query: str, plan: SearchPlan) -> None:
    assert plan_search(query) == plan


@pytest.mark.parametrize(
    ("query", "found"),
    [
        ("你好 世界", [1, 2]),  # contract §4.1: upstream found nothing
        ("记忆 断裂", [4, 6]),
        ("你好", [1, 2, 3]),
        ("记忆断裂", [4, 6]),
        ("记忆断裂 OR 通信协议", [4, 5, 6]),
        ('"记忆断裂" OR "通信协议"', [4, 5, 6]),  # upstream found nothing
        ("记忆断裂 通信协议", [6]),
        ("记忆断裂 NOT 通信协议", [4]),
        ("hello", [7]),
        ("foo:bar", []),
        ("ｶﾀｶﾅ", [9]),
    ],
)
def test_plans_find_the_expected_messages(query: str, found: list[int]) -> None:
    assert _run(plan_search(query)) == found


def test_plan_is_frozen() -> None:
    plan = plan_search("hello")

    with pytest.raises(AttributeError):
        plan.kind = "like"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("term", "pattern"),
    [("你好", "%你好%"), ("100%", "%100\\%%"), ("sure_thing", "%sure\\_thing%"), ("a\\b", "%a\\\\b%")],
)
def test_like_pattern(term: str, pattern: str) -> None:
    assert like_pattern(term) == pattern


def test_like_wildcards_in_terms_are_literal() -> None:
    assert _run(SearchPlan("like", like_terms=("100%", "sure_thing"))) == [8]
    assert _run(SearchPlan("like", like_terms=("1_0",))) == []


PLAN_FRAGMENTS = st.sampled_from(
    [
        *['"', "*", "-", ":", "^", "(", ")", "+", "AND", "OR", "NOT", "and", "NEAR(", " ", " ", "%", "_"],
        *["\\", "\x00", "a", "hello", "你", "好", "记忆", "断裂", "通信协议"],
        *["한", "ｶ", "\u3000", "\U0002a700"],
    ]
)


@settings(max_examples=800, deadline=None)
@given(st.text() | st.lists(PLAN_FRAGMENTS, max_size=20).map("".join))
def test_plan_search_never_raises_and_its_plans_run(query: str) -> None:
    plan = plan_search(query)

    if plan.kind == "empty":
        assert plan.match is None
        assert plan.like_terms == ()
    elif plan.kind == "like":
        assert plan.match is None
        assert plan.like_terms
        assert all(plan.like_terms)
    else:
        assert plan.match
        assert plan.like_terms == ()
    _run(plan)
