"""Property-based checks (hypothesis) on one store per module.

* search_messages never raises, whatever the query (free text or FTS5 operator soup);
* sanitize_title is idempotent and its output obeys the title rules;
* every message appended comes back from get_messages equal (content byte for byte);
* words and CJK strings stored in a message are found by search.
"""

from __future__ import annotations

import itertools
import json
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hermes_store import SessionDB

HIT_KEYS = {
    "id",
    "session_id",
    "role",
    "snippet",
    "timestamp",
    "tool_name",
    "source",
    "model",
    "session_started",
    "context",
}
# SESSIONDB_PROPERTY_SCALE=10 runs ten times as many examples (for a long hunt).
SCALE = int(os.environ.get("SESSIONDB_PROPERTY_SCALE", "1"))
PROPERTY_SETTINGS = settings(
    max_examples=60 * SCALE,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    db = SessionDB(tmp_path_factory.mktemp("properties") / "state.db")
    db.create_session("corpus", "cli")
    db.create_session("corpus-tg", "telegram")
    db.append_message("corpus", "user", "deploy the kubernetes cluster with chat-send and P2.2")
    db.append_message("corpus", "assistant", "记忆断裂问题已经解决，你好世界", tool_name="web_search")
    db.append_message(
        "corpus",
        "assistant",
        None,
        tool_calls=[{"id": "c", "function": {"name": "shell", "arguments": '{"cmd": "ls -la foo:bar"}'}}],
    )
    db.append_message("corpus-tg", "user", [{"type": "text", "text": "a picture of 東京タワー"}])
    db.append_message("corpus-tg", "tool", 'user_id=5 AND OR NOT (x) "quoted" *star* ^caret')
    yield db
    db.close()


_session_numbers = itertools.count()


def new_session(store: SessionDB) -> str:
    session_id = f"prop-{next(_session_numbers)}"
    store.create_session(session_id, "cli")
    return session_id


# --- search never raises -----------------------------------------------------------------------


def check_search(store: SessionDB, query: str) -> None:
    hits = store.search_messages(query)
    assert isinstance(hits, list)
    for hit in hits:
        assert set(hit) == HIT_KEYS
        assert 1 <= len(hit["context"]) <= 3


@PROPERTY_SETTINGS
@given(query=st.text(max_size=40))
def test_search_never_raises_on_any_text(store, query):
    check_search(store, query)


FTS5_FRAGMENTS = [
    "AND", "OR", "NOT", "and", "or", "not", "NEAR", "NEAR(", "(", ")", "{", "}", '"', "'", "*", "^",
    "+", "-", ":", ".", ",", "_", "%", "=", "\\", "col:", "-foo", "foo:bar", "chat-send", "P2.2",
    "a_b", "x", "deploy*", "记忆", "断裂", "你好", "世界", "東京", "ｶﾀ", "😀", " ", "  ", "\t", "\n",
]  # fmt: skip


@PROPERTY_SETTINGS
@given(
    parts=st.lists(st.sampled_from(FTS5_FRAGMENTS), min_size=1, max_size=8), glue=st.sampled_from(["", " "])
)
def test_search_never_raises_on_operator_soup(store, parts, glue):
    check_search(store, glue.join(parts))


@PROPERTY_SETTINGS
@given(
    query=st.text(max_size=30),
    sources=st.none() | st.lists(st.sampled_from(["cli", "telegram", "x"]), max_size=2),
)
def test_search_with_filters_never_raises(store, query, sources):
    hits = store.search_messages(query, source_filter=sources, exclude_sources=sources, role_filter=["user"])
    assert isinstance(hits, list)


# --- sanitize_title ------------------------------------------------------------------------------

TITLE_TEXT = st.text(
    alphabet=st.one_of(
        st.characters(),
        st.sampled_from(
            [
                "\u200b",
                "\ufeff",
                "\u2028",
                "\u202e",
                "\u2066",
                "\ufffc",
                "\x00",
                "\x7f",
                "\t",
                "\n",
                "\u3000",
                "\xa0",
            ]
        ),
    ),
    max_size=130,
)


@PROPERTY_SETTINGS
@given(title=TITLE_TEXT)
def test_sanitize_title_is_idempotent(title):
    try:
        cleaned = SessionDB.sanitize_title(title)
    except ValueError as exc:
        assert str(exc).startswith("Title too long (")
        return
    assert SessionDB.sanitize_title(cleaned) == cleaned
    if cleaned is not None:
        assert cleaned == cleaned.strip()
        assert 0 < len(cleaned) <= 100
        assert "  " not in cleaned
        assert not any(ch in cleaned for ch in "\x00\x7f\t\n\r\u200b\ufeff")


# --- message round trip ----------------------------------------------------------------------------

NUL_FREE_TEXT = st.text(
    alphabet=st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)), max_size=200
)
CJK_TEXT = st.text(
    alphabet=st.characters(min_codepoint=0x4E00, max_codepoint=0x9FFF), min_size=1, max_size=50
)
EMOJI_TEXT = st.lists(st.sampled_from(["😀", "🚀", "👍🏽", "👨‍👩‍👧", "🇯🇵", "❤️"]), min_size=1, max_size=6).map(
    "".join
)
ANY_TEXT = st.one_of(
    NUL_FREE_TEXT, CJK_TEXT, EMOJI_TEXT, st.tuples(NUL_FREE_TEXT, CJK_TEXT, EMOJI_TEXT).map("".join)
)

JSON_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**53), max_value=2**53),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)
JSON_CONTENT = st.one_of(
    st.lists(JSON_VALUES, max_size=4), st.dictionaries(st.text(max_size=8), JSON_VALUES, max_size=4)
)
MULTIMODAL = st.lists(
    st.one_of(
        st.builds(lambda t: {"type": "text", "text": t}, ANY_TEXT),
        st.builds(lambda u: {"type": "image_url", "image_url": {"url": u}}, st.text(max_size=30)),
    ),
    min_size=1,
    max_size=4,
)
TOOL_CALL = st.builds(
    lambda call_id, name, args: {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args, ensure_ascii=False)},
    },
    st.text(min_size=1, max_size=10),
    ANY_TEXT,
    st.dictionaries(st.text(max_size=6), JSON_SCALARS, max_size=3),
)
MESSAGE = st.fixed_dictionaries(
    {
        "role": st.sampled_from(["user", "assistant", "tool", "system"]),
        "content": st.one_of(st.none(), ANY_TEXT, JSON_CONTENT, MULTIMODAL),
        "tool_calls": st.one_of(st.none(), st.lists(TOOL_CALL, min_size=1, max_size=3)),
    }
)


@settings(
    max_examples=40 * SCALE,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(batch=st.lists(MESSAGE, min_size=1, max_size=4))
def test_appended_messages_come_back_equal(store, batch):
    session_id = new_session(store)
    ids = [
        store.append_message(session_id, m["role"], m["content"], tool_calls=m["tool_calls"]) for m in batch
    ]
    got = store.get_messages(session_id)
    assert [m["id"] for m in got] == ids
    for sent, back in zip(batch, got, strict=True):
        assert back["role"] == sent["role"]
        assert type(back["content"]) is type(sent["content"])
        assert back["content"] == sent["content"]
        if isinstance(sent["content"], str):
            assert back["content"].encode("utf-8") == sent["content"].encode("utf-8")
        assert back["tool_calls"] == sent["tool_calls"]
    row = store.get_session(session_id)
    assert row["message_count"] == len(batch)
    assert row["tool_call_count"] == sum(len(m["tool_calls"] or []) for m in batch)


@settings(
    max_examples=25 * SCALE,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(batch=st.lists(MESSAGE, min_size=0, max_size=4))
def test_replaced_messages_come_back_equal(store, batch):
    session_id = new_session(store)
    store.append_message(session_id, "user", "to be replaced")
    store.replace_messages(session_id, batch)
    got = store.get_messages(session_id)
    assert [(m["role"], m["content"], m["tool_calls"]) for m in got] == [
        (m["role"], m["content"], m["tool_calls"]) for m in batch
    ]


# --- what is stored is found -------------------------------------------------------------------------

# Lower-case "and"/"not" alone are dropped as dangling operators (upstream's sanitiser rule).
WORD = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=3, max_size=12).filter(
    lambda w: w not in {"and", "not"}
)


@settings(max_examples=30 * SCALE, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    word=WORD,
    before=st.text(alphabet="abc XYZ,.!?", max_size=20),
    after=st.text(alphabet="abc XYZ,.!?", max_size=20),
)
def test_a_stored_word_is_found(store, word, before, after):
    session_id = new_session(store)
    message_id = store.append_message(session_id, "user", f"{before} {word} {after}")
    hits = store.search_messages(word, source_filter=["cli"], limit=10_000)
    assert message_id in [hit["id"] for hit in hits]


@settings(max_examples=30 * SCALE, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    needle=st.text(
        alphabet=st.characters(min_codepoint=0x4E00, max_codepoint=0x9FFF), min_size=1, max_size=8
    ),
    before=st.text(alphabet="中文字abc ", max_size=10),
    after=st.text(alphabet="中文字abc ", max_size=10),
)
def test_a_stored_cjk_string_is_found(store, needle, before, after):
    session_id = new_session(store)
    message_id = store.append_message(session_id, "assistant", f"{before}{needle}{after}")
    hits = store.search_messages(needle, limit=10_000)
    assert message_id in [hit["id"] for hit in hits]
