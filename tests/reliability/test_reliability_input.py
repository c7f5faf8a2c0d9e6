"""Bad input: whatever a model or a user typed either works and comes back as it went in,
or is refused with a clear ``ValueError``/``TypeError`` before anything is written.

"Nothing written" is checked with ``PRAGMA data_version`` on a separate connection: it
changes whenever another connection commits, so an unchanged value proves the refused
call committed nothing at all.

Covered: search queries (any Unicode incl. NUL and lone surrogates, FTS5 operator soup,
1 MB strings — each bounded in time, run in a child process so a runaway query fails the
test instead of hanging CI), session ids and titles with LIKE wildcards, quotes and
backslashes, message content of every JSON type, bytes, deep nesting, 10 MB messages,
and wrongly typed arguments to the public methods. The typical-case properties (stored
words are found, appended messages come back equal) live in
``tests/sessiondb/test_properties.py``; these are the extremes.
"""

from __future__ import annotations

import itertools
import json
import math
import queue
import sqlite3
import subprocess
import threading
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from _harness import reaped, spawn
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hermes_store.api.session_db import SessionDB
from hermes_store.domain.titles import sanitize_title

INPUT_SETTINGS = settings(
    max_examples=80,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
SEARCH_SECONDS = 10.0
"""The longest one search may take, whatever the query (on this 2-core CI box)."""

_numbers = itertools.count()


@pytest.fixture(scope="module")
def store_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("bad-input") / "state.db"


@pytest.fixture(scope="module")
def store(store_path: Path) -> Iterator[SessionDB]:
    db = SessionDB(store_path)
    db.create_session("corpus", "cli")
    for n in range(50):
        db.append_message("corpus", "user", f"ab cd {n} payload 记忆断裂问题 foo:bar chat-send 50% a_b")
    yield db
    db.close()


def fresh_session(store: SessionDB) -> str:
    session_id = f"input-{next(_numbers)}"
    store.create_session(session_id, "cli")
    return session_id


class CommitWatch:
    """Tells whether anything was committed to the file since the last look."""

    def __init__(self, path: Path) -> None:
        self.conn = sqlite3.connect(path)
        self.version = self._read()

    def _read(self) -> int:
        return int(self.conn.execute("PRAGMA data_version").fetchone()[0])

    def committed(self) -> bool:
        now = self._read()
        changed, self.version = now != self.version, now
        return changed

    def close(self) -> None:
        self.conn.close()


@pytest.fixture(scope="module")
def watch(store: SessionDB, store_path: Path) -> Iterator[CommitWatch]:
    watcher = CommitWatch(store_path)
    yield watcher
    watcher.close()


def refused_cleanly(call: Callable[[], object], watch: CommitWatch) -> BaseException | None:
    """Run ``call``; if it raises, it must be a ValueError/TypeError and nothing committed.

    Returns the exception, or ``None`` when the call succeeded (the caller then checks
    the round trip).
    """
    watch.committed()
    try:
        call()
    except (ValueError, TypeError) as exc:
        assert not watch.committed(), f"{type(exc).__name__} raised after a commit: {exc}"
        return exc
    return None


# --- search ----------------------------------------------------------------------------------

ANY_CHARACTER = st.characters(blacklist_categories=())  # includes NUL, controls, lone surrogates
FTS5_SYNTAX = st.sampled_from(
    ["AND", "OR", "NOT", "NEAR", "NEAR(", "(", ")", '"', "'", "*", "^", ":", "-", "+", "{", "}", "col:",
     "\x00", "\ud800", "%", "_", "\\", "记忆", "ab", " ", "\n"]
)  # fmt: skip


@INPUT_SETTINGS
@given(query=st.text(alphabet=ANY_CHARACTER, max_size=200))
def test_search_accepts_any_unicode(store: SessionDB, query: str) -> None:
    assert isinstance(store.search_messages(query), list)


@INPUT_SETTINGS
@given(parts=st.lists(FTS5_SYNTAX, min_size=1, max_size=20), glue=st.sampled_from(["", " "]))
def test_search_accepts_operator_soup(store: SessionDB, parts: list[str], glue: str) -> None:
    assert isinstance(store.search_messages(glue.join(parts)), list)


@pytest.mark.parametrize(
    "query",
    ["foo:bar", "-foo", "a AND OR b", '"payload', "50%", "a_b", "chat-send", "payload\x00"],
)
def test_search_syntax_in_a_query_finds_the_literal_words(store: SessionDB, query: str) -> None:
    hits = store.search_messages(query, limit=100)
    assert hits, f"{query!r} found nothing"


def _mixed_megabyte() -> str:
    import random

    rng = random.Random(0)
    alphabet = "abc 记忆 AND OR NOT ( ) \" ' * ^ : - \x00 % _ \\ 😀 \n"
    return "".join(rng.choice(alphabet) for _ in range(1_000_000))


MEGABYTE_QUERIES: dict[str, Callable[[], str]] = {
    "one-long-word": lambda: "a" * 1_000_000,
    "repeated-matching-word": lambda: "ab " * 333_333,
    "distinct-words": lambda: " ".join(f"w{n}" for n in range(150_000))[:1_000_000],
    "quotes": lambda: '"' * 1_000_000,
    "operators": lambda: "AND OR NOT " * 90_909,
    "parentheses": lambda: "(" * 1_000_000,
    "nul-bytes": lambda: "\x00" * 1_000_000,
    "cjk-run": lambda: "记忆" * 500_000,
    "cjk-words": lambda: "记忆 " * 333_333,
    "mixed": _mixed_megabyte,
}


def _pump(stream: Any, lines: queue.Queue[str | None]) -> None:
    for line in stream:
        lines.put(line)
    lines.put(None)  # the child's output ended


def timed_searches(
    db: Path, queries: dict[str, str], workdir: Path, timeout: float = 3 * SEARCH_SECONDS
) -> dict[str, dict[str, Any]]:
    """Run the searches one after another in a child process, each bounded by ``timeout``:
    a search that never ends (or ends the child) is reported, not waited for, and the rest
    run in a new child. One child for all: a Python start-up costs more than most searches."""
    outcomes: dict[str, dict[str, Any]] = {}
    pending = list(queries)
    while pending:
        files = []
        for name in pending:
            query_file = workdir / f"query-{len(outcomes)}-{len(files)}.txt"
            query_file.write_text(queries[name], encoding="utf-8", errors="surrogatepass")
            files.append(str(query_file))
        process = spawn("search", {"db": str(db), "query_files": files}, stdout=subprocess.PIPE)
        lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=_pump, args=(process.stdout, lines), daemon=True).start()
        with reaped([process]):
            for name in list(pending):
                pending.remove(name)
                try:
                    line = lines.get(timeout=timeout)
                except queue.Empty:
                    outcomes[name] = {"seconds": math.inf, "error": f"still running after {timeout:.0f}s"}
                    break
                if line is None:
                    outcomes[name] = {"seconds": math.inf, "error": f"worker exited {process.wait()}"}
                    break
                outcomes[name] = dict(json.loads(line))
            else:
                process.wait(timeout=timeout)  # closes the store before the next test uses it
    return outcomes


@pytest.fixture(scope="module")
def megabyte_outcomes(store: SessionDB, store_path: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """What each megabyte query gave, all run in one child (each bounded in time)."""
    queries = {shape: make() for shape, make in MEGABYTE_QUERIES.items()}
    return timed_searches(store_path, queries, tmp_path_factory.mktemp("megabyte-queries"))


@pytest.mark.slow
@pytest.mark.parametrize("shape", list(MEGABYTE_QUERIES))
def test_megabyte_query_is_answered_promptly(
    megabyte_outcomes: dict[str, dict[str, Any]], shape: str, reliability_figures: dict[str, Any]
) -> None:
    outcome = megabyte_outcomes[shape]
    reliability_figures.setdefault("megabyte_queries", {})[shape] = outcome
    if "error" in outcome:
        assert outcome["error"] in ("ValueError", "TypeError"), outcome
    assert outcome["seconds"] < SEARCH_SECONDS, outcome


def test_search_query_must_be_text(store: SessionDB) -> None:
    for query in (b"payload", 5, ["payload"]):
        with pytest.raises(TypeError):
            store.search_messages(query)  # type: ignore[arg-type]


# --- session ids -----------------------------------------------------------------------------

ID_TEXT = st.text(
    alphabet=st.one_of(
        st.sampled_from(["%", "_", "'", '"', "\\", "*", "?", "[", "]", "-", " ", ";", "\x00", "记", "😀"]),
        st.characters(codec="utf-8"),
    ),
    min_size=1,
    max_size=24,
)


@INPUT_SETTINGS
@given(raw=ID_TEXT)
def test_any_session_id_round_trips(store: SessionDB, store_path: Path, raw: str) -> None:
    session_id = f"{raw}#{next(_numbers)}"  # unique, keeps the odd characters up front
    store.create_session(session_id, "cli")
    message_id = store.append_message(session_id, "user", "hello")
    assert store.get_session(session_id)["id"] == session_id
    assert [m["id"] for m in store.get_messages(session_id)] == [message_id]
    assert store.resolve_session_id(session_id) == session_id
    for cut in {1, len(raw) // 2, len(raw)}:
        prefix = session_id[:cut]
        resolved = store.resolve_session_id(prefix)
        assert resolved is None or resolved.startswith(prefix), (prefix, resolved)
    export = store.export_session(session_id)
    assert export is not None and export["id"] == session_id and len(export["messages"]) == 1
    assert store.delete_session(session_id) is True
    assert store.get_session(session_id) is None
    assert store.message_count(session_id) == 0


def test_like_wildcards_in_ids_are_literal(store: SessionDB) -> None:
    for session_id in ("wild%card", "wildXcard", "under_score", "underXscore", "back\\slash", "backXslash"):
        store.create_session(session_id, "cli")
    assert store.resolve_session_id("wild%") == "wild%card"
    assert store.resolve_session_id("under_") == "under_score"
    assert store.resolve_session_id("back\\") == "back\\slash"
    assert store.resolve_session_id("%") is None
    assert store.resolve_session_id("_") is None
    assert store.export_session("%") is None
    assert store.delete_session("wild_card") is False
    assert store.get_session("wildXcard") is not None


# --- titles ----------------------------------------------------------------------------------

TITLE_TEXT = st.text(
    alphabet=st.one_of(
        st.sampled_from(["%", "_", "'", '"', "\\", "#", "2", "\x00", "\u200b", "\u202e", "\t", "记"]),
        st.characters(codec="utf-8"),
    ),
    max_size=120,
)


@INPUT_SETTINGS
@given(title=TITLE_TEXT)
def test_any_title_round_trips_or_is_refused(store: SessionDB, watch: CommitWatch, title: str) -> None:
    session_id = fresh_session(store)
    watch.committed()
    refused = refused_cleanly(lambda: store.set_session_title(session_id, title), watch)
    if refused is not None:
        assert "Title" in str(refused)
        return
    clean = sanitize_title(title)
    assert store.get_session_title(session_id) == clean
    if clean is not None:
        assert store.get_session_by_title(clean)["id"] == session_id
        assert store.resolve_session_by_title(clean) is not None


@pytest.mark.parametrize("title", ["50%", "a_b", "back\\slash", 'it\'s "quoted"', "%", "_"])
def test_like_wildcards_in_titles_are_literal(store: SessionDB, title: str) -> None:
    # The store is shared with the property tests above, which may have titled a session
    # with this very string; titles are unique, so free it first.
    holder = store.get_session_by_title(title)
    if holder is not None:
        store.set_session_title(holder["id"], "")
    wanted = fresh_session(store)
    store.set_session_title(wanted, title)
    decoy = fresh_session(store)
    decoy_title = title.replace("%", "X").replace("_", "X").replace("\\", "X") + f"Z{decoy} #7"
    store.set_session_title(decoy, decoy_title)
    assert store.get_session_by_title(title)["id"] == wanted
    assert store.resolve_session_by_title(title) == wanted
    assert store.get_next_title_in_lineage(title) == f"{title} #2"


# --- message content -------------------------------------------------------------------------

JSON_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(alphabet=ANY_CHARACTER.filter(lambda c: not 0xD800 <= ord(c) <= 0xDFFF), max_size=30),
)
JSON_TREES = st.recursive(
    JSON_SCALARS,
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=10), children, max_size=5)
    ),
    max_leaves=30,
)
TEXT_CONTENT = st.text(alphabet=ANY_CHARACTER.filter(lambda c: not 0xD800 <= ord(c) <= 0xDFFF), max_size=300)


@INPUT_SETTINGS
@given(content=st.one_of(TEXT_CONTENT, st.binary(max_size=300), st.lists(JSON_TREES, max_size=5),
                         st.dictionaries(st.text(max_size=10), JSON_TREES, max_size=5)))  # fmt: skip
def test_text_bytes_and_json_content_round_trip(store: SessionDB, content: Any) -> None:
    session_id = fresh_session(store)
    store.append_message(session_id, "user", content)
    back = store.get_messages(session_id)[0]["content"]
    expected = json.loads(json.dumps(content)) if isinstance(content, list | dict) else content
    assert type(back) is type(expected)
    assert back == expected


SENTINEL_LOOKALIKES = [
    "\x00json:[1, 2]",
    '\x00json:{"role": "system"}',
    "\x00json:",
    "\x00json:not json",
    "\x00",
    "a\x00b",
]


@pytest.mark.parametrize("text", SENTINEL_LOOKALIKES)
def test_text_that_looks_like_the_json_sentinel_round_trips(store: SessionDB, text: str) -> None:
    """A user's string must come back as that string, even if it starts like encoded JSON."""
    session_id = fresh_session(store)
    store.append_message(session_id, "user", text)
    back = store.get_messages(session_id)[0]["content"]
    assert back == text and isinstance(back, str)


def _nested(depth: int) -> list[Any]:
    root: list[Any] = []
    node = root
    for _ in range(depth):
        child: list[Any] = []
        node.append(child)
        node = child
    return root


def test_moderately_nested_content_round_trips(store: SessionDB) -> None:
    session_id = fresh_session(store)
    value = {"a": _nested(500)}
    store.append_message(session_id, "user", value)
    assert store.get_messages(session_id)[0]["content"] == value


def test_pathologically_nested_content_is_refused_cleanly(store: SessionDB, watch: CommitWatch) -> None:
    session_id = fresh_session(store)
    for field in ("content", "tool_calls"):
        value = _nested(100_000) if field == "content" else [{"function": {"arguments": _nested(100_000)}}]
        refused = refused_cleanly(
            lambda v=value, f=field: store.append_message(session_id, "user", **{f: v}), watch
        )
        assert refused is not None, f"100 000 levels of nesting in {field} were accepted"
    assert store.message_count(session_id) == 0


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        # Upstream stores top-level numbers as text (the column's TEXT affinity).
        (5, "5"),
        (-(2**63), str(-(2**63))),
        (True, "1"),
        (1.5, "1.5"),
        (float("inf"), "Inf"),
        ("", ""),
        (None, None),
        (b"", b""),
        (b"\x00\xff\xfe raw", b"\x00\xff\xfe raw"),
        ((1, "two"), [1, "two"]),
        ({"k": [None, True, 1.25, "v"]}, {"k": [None, True, 1.25, "v"]}),
    ],
    ids=repr,
)
def test_scalar_content_comes_back_in_its_documented_form(
    store: SessionDB, content: Any, expected: Any
) -> None:
    session_id = fresh_session(store)
    store.append_message(session_id, "user", content)
    assert store.get_messages(session_id)[0]["content"] == expected


@pytest.mark.parametrize("content", [float("nan"), 2**64, -(2**70)], ids=repr)
def test_unstorable_numbers_are_refused_not_mangled(
    store: SessionDB, watch: CommitWatch, content: Any
) -> None:
    """NaN must not silently become NULL; an integer SQLite cannot hold must not raise
    OverflowError half-way through a write."""
    session_id = fresh_session(store)
    refused = refused_cleanly(lambda: store.append_message(session_id, "user", content), watch)
    if refused is None:
        back = store.get_messages(session_id)[0]["content"]
        assert back is not None and str(back) == str(content), back


# --- huge messages ---------------------------------------------------------------------------

TEN_MB = 10 * 1024 * 1024


@pytest.fixture(scope="module")
def huge_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("huge") / "state.db"


@pytest.fixture(scope="module")
def huge(huge_path: Path) -> Iterator[tuple[SessionDB, str, str]]:
    """A store of its own holding one 10 MB message (so other searches never meet it)."""
    db = SessionDB(huge_path)
    session_id = fresh_session(db)
    text = ("lorem ipsum dolor sit amet " * (TEN_MB // 27 + 1))[:TEN_MB] + " needleinhaystack"
    db.append_message(session_id, "tool", text, tool_name="terminal")
    yield db, session_id, text
    db.close()


@pytest.mark.slow
def test_ten_megabyte_message_round_trips(huge: tuple[SessionDB, str, str]) -> None:
    store, session_id, text = huge
    assert store.get_messages(session_id)[0]["content"] == text
    export = store.export_session(session_id)
    assert export is not None and export["messages"][0]["content"] == text
    conversation = store.get_messages_as_conversation(session_id)
    assert conversation[0]["content"] == text
    rows = [
        row
        for row in store.list_sessions_rich(limit=10_000, include_children=True)
        if row["id"] == session_id
    ]
    assert len(rows) == 1
    hits = store.search_messages("needleinhaystack")
    assert [hit["session_id"] for hit in hits] == [session_id]


@pytest.mark.slow
def test_ten_megabyte_multimodal_message_round_trips(huge: tuple[SessionDB, str, str]) -> None:
    store = huge[0]
    session_id = fresh_session(store)
    content = [
        {"type": "text", "text": "describe"},
        {"type": "image_url", "image_url": {"url": "x" * TEN_MB}},
    ]
    store.append_message(session_id, "user", content)
    assert store.get_messages(session_id)[0]["content"] == content
    preview = next(
        row["preview"]
        for row in store.list_sessions_rich(limit=10_000, include_children=True)
        if row["id"] == session_id
    )
    assert preview == "describe"


@pytest.mark.slow
def test_searching_a_word_that_fills_a_ten_megabyte_message_is_prompt(
    huge: tuple[SessionDB, str, str], huge_path: Path, tmp_path: Path, reliability_figures: dict[str, Any]
) -> None:
    """One token in five of the huge message is a hit; building its snippet must not take
    time quadratic in the number of hits."""
    outcome = timed_searches(huge_path, {"lorem": "lorem"}, tmp_path)["lorem"]
    reliability_figures["ten_megabyte_frequent_word_search"] = outcome
    assert "error" not in outcome, outcome
    assert outcome["seconds"] < SEARCH_SECONDS, outcome


# --- wrongly typed arguments -----------------------------------------------------------------

SessionCall = Callable[[SessionDB, str], object]


def _rows_with_null_id(db: SessionDB) -> int:
    assert db.db_path is not None
    with closing(sqlite3.connect(db.db_path)) as raw:
        return int(raw.execute("SELECT COUNT(*) FROM sessions WHERE id IS NULL").fetchone()[0])


SessionCheck = Callable[[SessionDB, str], bool]

# (call, round-trip check if the call is accepted)
WRONG_TYPES: dict[str, tuple[SessionCall, SessionCheck]] = {
    "create_session(id=None) twice": (
        lambda db, s: [db.create_session(None, "cli") for _ in range(2)],  # type: ignore[func-returns-value]
        # Accepted, None would have to be one id like any other: created once, then ignored.
        lambda db, s: _rows_with_null_id(db) == 1,
    ),
    "create_session(id=123)": (
        lambda db, s: db.create_session(123, "cli"),  # type: ignore[arg-type]
        lambda db, s: db.get_session(123)["id"] == 123,  # type: ignore[arg-type, index]
    ),
    "append_message(role=5)": (
        lambda db, s: db.append_message(s, 5, "x"),  # type: ignore[arg-type]
        lambda db, s: db.get_messages(s)[0]["role"] == 5,
    ),
    "end_session(end_reason=5)": (
        lambda db, s: db.end_session(s, 5),  # type: ignore[arg-type]
        lambda db, s: db.get_session(s)["end_reason"] == 5,  # type: ignore[index]
    ),
    "update_system_prompt(dict)": (
        lambda db, s: db.update_system_prompt(s, {"a": 1}),  # type: ignore[arg-type]
        lambda db, s: db.get_session(s)["system_prompt"] == {"a": 1},  # type: ignore[index]
    ),
    "set_meta(value=dict)": (
        lambda db, s: db.set_meta(s, {"a": 1}),  # type: ignore[arg-type]
        lambda db, s: db.get_meta(s) == {"a": 1},
    ),
    "set_session_title(5)": (
        lambda db, s: db.set_session_title(s, 5),  # type: ignore[arg-type]
        lambda db, s: db.get_session_title(s) == 5,
    ),
    "append_message(tool_calls={set})": (
        lambda db, s: db.append_message(s, "assistant", "x", tool_calls=[{1, 2}]),
        lambda db, s: False,
    ),
    "create_session(model_config={set})": (
        lambda db, s: db.create_session(s + "-mc", "cli", model_config={1, 2}),
        lambda db, s: False,
    ),
    "replace_messages([1])": (
        lambda db, s: db.replace_messages(s, [1]),  # type: ignore[list-item]
        lambda db, s: False,
    ),
    "list_sessions_rich(limit='ten')": (
        lambda db, s: db.list_sessions_rich(limit="ten"),  # type: ignore[arg-type]
        lambda db, s: True,
    ),
    "search_messages(limit=None)": (
        lambda db, s: db.search_messages("payload", limit=None),  # type: ignore[arg-type]
        lambda db, s: True,
    ),
    "prune_sessions('ninety')": (
        lambda db, s: db.prune_sessions("ninety"),  # type: ignore[arg-type]
        lambda db, s: False,
    ),
    "append_message(content=lone surrogate)": (
        lambda db, s: db.append_message(s, "user", "a\ud800b"),
        lambda db, s: db.get_messages(s)[0]["content"] == "a\ud800b",
    ),
    "create_session(id=lone surrogate)": (
        lambda db, s: db.create_session("x\udfff", "cli"),
        lambda db, s: db.get_session("x\udfff") is not None,
    ),
}


@pytest.mark.parametrize("case", list(WRONG_TYPES))
def test_wrongly_typed_arguments_are_refused_before_writing(
    store: SessionDB, watch: CommitWatch, case: str
) -> None:
    call, round_trips = WRONG_TYPES[case]
    session_id = fresh_session(store)
    with closing(sqlite3.connect(store.db_path)) as raw:
        before = raw.execute(
            "SELECT (SELECT COUNT(*) FROM sessions), (SELECT COUNT(*) FROM messages)"
        ).fetchone()
    watch.committed()
    try:
        call(store, session_id)
    except (ValueError, TypeError) as exc:
        assert not watch.committed(), f"{case}: refused only after writing ({exc})"
        with closing(sqlite3.connect(store.db_path)) as raw:
            after = raw.execute(
                "SELECT (SELECT COUNT(*) FROM sessions), (SELECT COUNT(*) FROM messages)"
            ).fetchone()
        assert after == before
        return
    except Exception as exc:  # anything else is not a clear refusal
        pytest.fail(
            f"{case}: raised {type(exc).__module__}.{type(exc).__name__} ({exc}), not ValueError/TypeError"
        )
    assert round_trips(store, session_id), f"{case}: accepted, but does not come back as given"
