"""Search routing: upstream's choice of word or substring search, with the wider CJK ranges.

The plans are also run against real in-memory FTS5 tables, word and trigram, shaped like
the store's, to show that each MATCH expression parses and each LIKE plan finds what it
should.
"""

from __future__ import annotations

import sqlite3

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hermes_store.search.plan import SearchPlan, TermGroup, ascii_lower, like_pattern, plan_search

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
    if plan.kind == "fts":
        sql = "SELECT rowid FROM w WHERE w MATCH ? ORDER BY rowid"
        return [row[0] for row in _STORE.execute(sql, (plan.match,))]
    params: list[str] = []
    groups = []
    for group in plan.groups:
        tests = [("", t) for t in group.required] + [("NOT ", t) for t in group.excluded]
        groups.append(" AND ".join(f"{neg}m.content LIKE ? ESCAPE '\\'" for neg, _ in tests))
        params += [like_pattern(t) for _, t in tests]
    where = " OR ".join(f"({g})" for g in groups)
    if plan.kind == "trigram":
        sql = f"SELECT m.id FROM g JOIN m ON m.id = g.rowid WHERE g MATCH ? AND ({where}) ORDER BY m.id"
        return [row[0] for row in _STORE.execute(sql, [plan.match, *params])]
    return [row[0] for row in _STORE.execute(f"SELECT m.id FROM m WHERE {where} ORDER BY m.id", params)]


def _sub(kind: str, *groups: tuple[str, ...] | TermGroup, match: str | None = None) -> SearchPlan:
    term_groups = tuple(g if isinstance(g, TermGroup) else TermGroup(g) for g in groups)
    terms = tuple(dict.fromkeys(t for g in term_groups for t in g.required))
    return SearchPlan(kind, match=match, like_terms=terms, groups=term_groups)  # type: ignore[arg-type]


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
        ("foo:bar", SearchPlan("fts", match="foo bar")),
        ("TODO: fix", SearchPlan("fts", match="TODO  fix")),
        ("你好", _sub("like", ("你好",))),
        ("你好 world", _sub("trigram", ("你好", "world"), match='"world"')),
        ('"你好"', _sub("like", ("你好",))),
        ('"你好 world"', _sub("trigram", ("你好 world",), match='"你好 world"')),
        ("记忆断裂", _sub("trigram", ("记忆断裂",), match='"记忆断裂"')),
        (
            "记忆断裂 OR 通信协议",
            _sub("trigram", ("记忆断裂",), ("通信协议",), match='("记忆断裂") OR ("通信协议")'),
        ),
        (
            '"记忆断裂" OR "通信协议"',
            _sub("trigram", ("记忆断裂",), ("通信协议",), match='("记忆断裂") OR ("通信协议")'),
        ),
        (
            "记忆断裂 NOT 通信协议",
            _sub("trigram", TermGroup(("记忆断裂",), ("通信协议",)), match='"记忆断裂"'),
        ),
        (
            "记忆断裂 and 通信协议",
            _sub("trigram", ("记忆断裂", "and", "通信协议"), match='"记忆断裂" AND "and" AND "通信协议"'),
        ),
        ("AND 记忆断裂 OR", _sub("trigram", ("记忆断裂",), match='"记忆断裂"')),
        (
            "sp_new and 血管瘤",
            _sub("trigram", ("sp_new", "and", "血管瘤"), match='"sp_new" AND "and" AND "血管瘤"'),
        ),
        ("你好 世界", _sub("like", ("你好", "世界"))),
        ("记忆 断裂", _sub("like", ("记忆", "断裂"))),
        ("记忆断裂 a", _sub("trigram", ("记忆断裂", "a"), match='"记忆断裂"')),
        ("你好 OR 世界", _sub("like", ("你好",), ("世界",))),
        ("你好 OR 世界 docker", _sub("like", ("你好",), ("世界", "docker"))),
        ("你好 你好 世界", _sub("like", ("你好", "世界"))),
        ("ｶﾀｶﾅ", _sub("trigram", ("ｶﾀｶﾅ",), match='"ｶﾀｶﾅ"')),
        ("한국어 검색", _sub("trigram", ("한국어", "검색"), match='"한국어"')),
        ("🚀", _sub("like", ("🚀",))),
        ("(部署) C++ x^y", _sub("trigram", ("部署", "C++", "x", "y"), match='"C++"')),
        ("部署 - ** :", _sub("like", ("部署",))),
        ("TODO: 修复", _sub("trigram", ("TODO", "修复"), match='"TODO"')),
        ("部署:docker", _sub("trigram", ("部署", "docker"), match='"docker"')),
        ('"部署:docker" x', _sub("trigram", ("部署:docker", "x"), match='"部署:docker"')),
        ("docker* 部署", _sub("trigram", ("docker", "部署"), match='"docker"')),
        ('部署 "a""b', _sub("like", ("部署", "a", "b"))),
        ("NOT OR 部署 AND OR NOT", _sub("like", ("部署",))),
        ("ภาษาไทย", _sub("trigram", ("ภาษาไทย",), match='"ภาษาไทย"')),
    ],
)
def test_plan_search(query: str, plan: SearchPlan) -> None:
    assert plan_search(query) == plan


@pytest.mark.parametrize(
    ("query", "found"),
    [
        ("你好 世界", [1, 2]),  # upstream found nothing
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
        ("你好 only", [3]),
        ("only 你好", [3]),
        ("100% 你好", []),
        ("100% sure", [8]),
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
    assert _run(plan_search("100% sure_thing ✓")) == []
    assert _run(_sub("like", ("100%", "sure_thing"))) == [8]
    assert _run(_sub("like", ("1_0",))) == []


def test_ascii_lower_leaves_other_letters() -> None:
    assert ascii_lower("DOCKER Ünïcode ПРИВЕТ") == "docker Ünïcode ПРИВЕТ"


def test_too_many_substring_terms_are_refused() -> None:
    with pytest.raises(ValueError, match="too many terms"):
        plan_search("部署 " + "x " * 64)


PLAN_FRAGMENTS = st.sampled_from(
    [
        *['"', "*", "-", ":", "^", "(", ")", "+", "AND", "OR", "NOT", "and", "NEAR(", " ", " ", "%", "_"],
        *["\\", "\x00", "a", "hello", "你", "好", "记忆", "断裂", "通信协议"],
        *["한", "ｶ", "\u3000", "\U0002a700"],
    ]
)


@settings(max_examples=300, deadline=None)
@given(st.text() | st.lists(PLAN_FRAGMENTS, max_size=20).map("".join))
def test_plan_search_never_raises_and_its_plans_run(query: str) -> None:
    plan = plan_search(query)

    if plan.kind == "empty":
        assert plan.match is None
        assert plan.like_terms == ()
    elif plan.kind == "fts":
        assert plan.match
        assert plan.like_terms == ()
    else:
        assert plan.kind == "like" or plan.match
        assert plan.groups
        assert all(plan.like_terms)
    _run(plan)


def test_an_empty_plan_has_no_sqlite_statement() -> None:
    from hermes_store.search.engine import SearchFilters
    from hermes_store.search.sqlite import statement

    assert statement(SearchPlan("empty"), SearchFilters(), 20, 0) is None


@pytest.mark.parametrize(
    ("term", "regex"),
    [
        ("docker", "[dD][oO][cC][kK][eE][rR]"),
        ("C++", "[cC]\\+\\+"),
        ("a.b$", "[aA]\\.[bB]\\$"),
        ("部署x", "部署[xX]"),
    ],
)
def test_postgresql_regex_folds_ascii_letters_only(term: str, regex: str) -> None:
    import re

    from hermes_store.search.postgres.substring_condition import _ascii_insensitive_regex

    assert _ascii_insensitive_regex(term) == regex
    assert re.search(regex, f"xx {term.upper()} yy")
    assert not re.search(regex, f"xx {term[:-1]} yy")


def test_no_ascii_character_needs_substring_search() -> None:
    """The ASCII shortcut of needs_substring_search is exact: every ASCII character
    takes the word path, character by character as well as in one string."""
    from hermes_store.search.plan import _is_substring_char, needs_substring_search

    ascii_text = "".join(map(chr, range(128)))
    assert not any(_is_substring_char(char) for char in ascii_text)
    assert not needs_substring_search(ascii_text)
    assert needs_substring_search(ascii_text + "记")
    assert needs_substring_search("deploy 🚀")
