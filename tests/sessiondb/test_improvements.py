"""The twelve deliberate improvements over upstream, one section per item."""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import sys
import warnings
from pathlib import Path

import pytest

from hermes_store import SessionDB
from hermes_store.db.engine import create_engine

# --- multi-token CJK queries with a short token ---------------------------------------------


def test_4_1_short_cjk_tokens_find_messages_containing_every_token(db):
    db.create_session("s", "cli")
    both = db.append_message("s", "user", "你好，这个世界很大")
    db.append_message("s", "user", "你好朋友")
    db.append_message("s", "user", "世界和平")
    assert [hit["id"] for hit in db.search_messages("你好 世界")] == [both]


def test_4_1_two_character_pairs(db):
    db.create_session("s", "cli")
    hit = db.append_message("s", "assistant", "关于记忆的断裂问题")
    db.append_message("s", "assistant", "只有记忆")
    assert [h["id"] for h in db.search_messages("记忆 断裂")] == [hit]


def test_4_1_long_and_short_token_mixed(db):
    db.create_session("s", "cli")
    hit = db.append_message("s", "user", "记忆断裂之后你好吗")
    db.append_message("s", "user", "记忆断裂了")
    assert [h["id"] for h in db.search_messages("记忆断裂 你好")] == [hit]


def test_4_1_tokens_are_literal_substrings_with_wildcards_escaped(db):
    db.create_session("s", "cli")
    literal = db.append_message("s", "user", "你好 世界 打折50%")
    db.append_message("s", "user", "你好 世界 打折500")
    db.append_message("s", "user", "你好 世界 aXb")
    underscore = db.append_message("s", "user", "你好 世界 a_b")
    assert [h["id"] for h in db.search_messages("你好 世界 50%")] == [literal]
    assert [h["id"] for h in db.search_messages("你好 世界 a_b")] == [underscore]


def test_4_1_short_tokens_match_inside_tool_fields(db):
    db.create_session("s", "cli")
    call = {
        "id": "c",
        "function": {"name": "note", "arguments": json.dumps({"t": "你好 世界"}, ensure_ascii=False)},
    }
    hit = db.append_message("s", "assistant", None, tool_calls=[call])
    assert [h["id"] for h in db.search_messages("你好 世界")] == [hit]


# --- no query string raises or silently fails on syntax -------------------------------------


@pytest.mark.parametrize(
    ("query", "content"),
    [
        ("foo:bar", "set foo:bar now"),
        ("-foo", "the -foo option"),
        ("hello - world", "hello - world"),
        ("a AND OR b", "option a and option b"),
    ],
)
def test_4_2_neutralised_queries_find_the_words(db, query, content):
    db.create_session("s", "cli")
    db.append_message("s", "user", "nothing relevant")
    hit = db.append_message("s", "user", content)
    assert [h["id"] for h in db.search_messages(query)] == [hit]


@pytest.mark.parametrize(
    "query",
    [
        'unbalanced "quote',
        "col:umn:s",
        "NEAR(a b)",
        "a NOT",
        "OR OR OR",
        "* prefix",
        "^start",
        "a + b",
        "(((",
        "\x00nul",
        "emoji 🚀 here",
        "tab\tsep",
        "'single'",
        "a AND NOT OR b",
        "- - -",
        ":",
        "记忆:断裂",
        "你好 -世界",
    ],
)
def test_4_2_awkward_queries_do_not_raise(db, query):
    db.create_session("s", "cli")
    db.append_message("s", "user", "some text 记忆断裂 你好 世界")
    result = db.search_messages(query)
    assert isinstance(result, list)


def test_4_2_sanitiser_is_still_available(db):
    assert SessionDB._sanitize_fts5_query("chat-send") == '"chat-send"'
    assert db._sanitize_fts5_query("hello AND") == "hello"


# --- JSON columns are UTF-8 -----------------------------------------------------------------


def test_4_3_json_columns_are_stored_as_utf8(db, raw):
    db.create_session("s", "cli", model_config={"persona": "助手"})
    message_id = db.append_message(
        "s",
        "assistant",
        None,
        tool_calls=[{"function": {"name": "查询", "arguments": "{}"}}],
        reasoning_details=[{"text": "思考"}],
        codex_reasoning_items=[{"summary": "概要"}],
        codex_message_items=[{"phase": "最终"}],
    )
    assert raw.column("sessions", "model_config", "s") == '{"persona": "助手"}'
    assert (
        raw.column("messages", "tool_calls", message_id)
        == '[{"function": {"name": "查询", "arguments": "{}"}}]'
    )
    assert raw.column("messages", "reasoning_details", message_id) == '[{"text": "思考"}]'
    assert raw.column("messages", "codex_reasoning_items", message_id) == '[{"summary": "概要"}]'
    assert raw.column("messages", "codex_message_items", message_id) == '[{"phase": "最终"}]'


def test_4_3_cjk_in_tool_call_arguments_is_searchable(db):
    db.create_session("s", "cli")
    arguments = json.dumps({"query": "记忆断裂的原因"}, ensure_ascii=False)
    hit = db.append_message(
        "s", "assistant", None, tool_calls=[{"function": {"name": "s", "arguments": arguments}}]
    )
    assert [h["id"] for h in db.search_messages("记忆断裂")] == [hit]
    assert [h["id"] for h in db.search_messages("原因")] == [hit]


def test_4_3_ascii_escaped_json_still_reads_back(db, raw):
    db.create_session("s", "cli")
    message_id = db.append_message("s", "assistant", "x", tool_calls=[{"placeholder": 1}])
    calls = [{"function": {"name": "查询", "arguments": "{}"}}]
    raw.execute("UPDATE messages SET tool_calls = ? WHERE id = ?", (json.dumps(calls), message_id))
    assert "\\u67e5" in raw.column("messages", "tool_calls", message_id)
    assert db.get_messages("s")[0]["tool_calls"] == calls
    assert db.get_messages_as_conversation("s")[0]["tool_calls"] == calls


# --- ordering by insertion ----------------------------------------------------------------------


def test_4_4_clock_jumping_backwards_does_not_reorder(db, raw):
    db.create_session("s", "cli")
    ids = [
        db.append_message("s", role, text)
        for role, text in [("user", "q1"), ("assistant", "a1"), ("user", "q2")]
    ]
    raw.execute("UPDATE messages SET timestamp = 1000.0 - id")
    assert [m["id"] for m in db.get_messages("s")] == ids
    assert [m["content"] for m in db.get_messages_as_conversation("s")] == ["q1", "a1", "q2"]


def test_4_4_ancestor_replay_uses_insertion_order(db, make_session, raw):
    make_session("p", started=1.0, ended=2.0, reason="compression")
    db.append_message("p", "user", "first")
    make_session("c", started=3.0, parent="p")
    db.append_message("c", "assistant", "second")
    raw.execute("UPDATE messages SET timestamp = 500.0 WHERE session_id = 'p'")
    raw.execute("UPDATE messages SET timestamp = 100.0 WHERE session_id = 'c'")
    assert [m["content"] for m in db.get_messages_as_conversation("c", include_ancestors=True)] == [
        "first",
        "second",
    ]


# --- update_token_counts creates missing rows and is NULL-safe ---------------------------------


def test_4_5_update_token_counts_creates_the_session(db):
    db.update_token_counts("late-row", input_tokens=12, output_tokens=3, model="m", estimated_cost_usd=0.5)
    row = db.get_session("late-row")
    assert row["source"] == "unknown"
    assert (row["input_tokens"], row["output_tokens"], row["model"], row["estimated_cost_usd"]) == (
        12,
        3,
        "m",
        0.5,
    )
    assert row["message_count"] == 0


def test_4_5_absolute_mode_creates_the_session_too(db):
    db.update_token_counts("late-abs", input_tokens=7, api_call_count=2, absolute=True)
    row = db.get_session("late-abs")
    assert (row["source"], row["input_tokens"], row["api_call_count"]) == ("unknown", 7, 2)


def test_4_5_existing_session_keeps_its_source(db):
    db.create_session("s", "telegram")
    db.update_token_counts("s", input_tokens=1)
    assert db.get_session("s")["source"] == "telegram"


def test_4_5_incremental_mode_is_null_safe(db, raw):
    db.create_session("s", "cli")
    raw.execute(
        "UPDATE sessions SET input_tokens = NULL, output_tokens = NULL, cache_read_tokens = NULL, "
        "cache_write_tokens = NULL, reasoning_tokens = NULL, api_call_count = NULL WHERE id = 's'"
    )
    db.update_token_counts(
        "s",
        input_tokens=5,
        output_tokens=4,
        cache_read_tokens=3,
        cache_write_tokens=2,
        reasoning_tokens=1,
        api_call_count=6,
    )
    row = db.get_session("s")
    assert [
        row[k]
        for k in (
            "input_tokens",
            "output_tokens",
            "cache_read_tokens",
            "cache_write_tokens",
            "reasoning_tokens",
            "api_call_count",
        )
    ] == [5, 4, 3, 2, 1, 6]


def test_4_5_none_increment_is_treated_as_zero(db):
    db.create_session("s", "cli")
    db.update_token_counts("s", input_tokens=5)
    db.update_token_counts("s", input_tokens=None, output_tokens=None)
    row = db.get_session("s")
    assert (row["input_tokens"], row["output_tokens"]) == (5, 0)


# --- owner-only files ------------------------------------------------------------------------


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX permissions")
def test_4_6_database_and_sidecars_are_owner_only(tmp_path):
    previous = os.umask(0o002)
    try:
        store = SessionDB(tmp_path / "private" / "state.db")
        try:
            store.create_session("s", "cli")
            store.append_message("s", "user", "secret")
            files = {
                name: tmp_path / "private" / name for name in ("state.db", "state.db-wal", "state.db-shm")
            }
            assert all(path.exists() for path in files.values())
            assert {name: stat.S_IMODE(path.stat().st_mode) for name, path in files.items()} == {
                "state.db": 0o600,
                "state.db-wal": 0o600,
                "state.db-shm": 0o600,
            }
        finally:
            store.close()
    finally:
        os.umask(previous)


# --- WAL fallback ------------------------------------------------------------------------------


def test_4_7_without_shared_memory_the_store_falls_back_to_delete_journal(tmp_path):
    # SQLite's "unix-none" VFS has no shared-memory support, like many network file
    # systems, so WAL cannot be enabled on it.
    path = tmp_path / "state.db"

    def connect() -> sqlite3.Connection:
        return sqlite3.connect(f"file:{path}?vfs=unix-none", uri=True, check_same_thread=False, timeout=1.0)

    engine = create_engine(path, creator=connect)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        store = SessionDB(engine=engine)
    try:
        assert any("journal_mode=DELETE" in str(w.message) for w in caught)
        store.create_session("s", "cli")
        store.append_message("s", "user", "works without wal")
        assert store._conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
        assert [h["id"] for h in store.search_messages("without")] == [1]
    finally:
        store.close()
    assert not Path(f"{path}-wal").exists()


# --- prune_empty_ghost_sessions detaches children -----------------------------------------------


def test_4_8_ghost_with_children_is_pruned_and_children_detached(db, make_session):
    make_session("ghost", started=1.0, ended=2.0, reason="user_exit", source="tui")
    make_session("child-a", started=3.0, parent="ghost")
    make_session("child-b", started=4.0, parent="ghost")
    make_session("grandchild", started=5.0, parent="child-a")
    assert db.prune_empty_ghost_sessions() == 1
    assert db.get_session("ghost") is None
    assert db.get_session("child-a")["parent_session_id"] is None
    assert db.get_session("child-b")["parent_session_id"] is None
    assert db.get_session("grandchild")["parent_session_id"] == "child-a"


# --- resolve_session_id("") ----------------------------------------------------------------------


def test_4_9_empty_prefix_resolves_to_none(db):
    assert db.resolve_session_id("") is None
    db.create_session("solitary", "cli")
    assert db.resolve_session_id("") is None
    assert db.resolve_session_id("sol") == "solitary"


# --- wider CJK detection -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("char", "block"),
    [
        ("\u4e00", "unified"),
        ("\u3400", "extension A"),
        ("\U00020000", "extension B"),
        ("\U0002a700", "extension C"),
        ("\U0002b740", "extension D"),
        ("\U0002b820", "extension E"),
        ("\U0002ceb0", "extension F"),
        ("\U00030000", "extension G"),
        ("\uf900", "compatibility ideographs"),
        ("\U0002f800", "compatibility supplement"),
        ("\uff76", "half-width katakana"),
        ("\u1100", "hangul jamo"),
        ("\u3131", "hangul compatibility jamo"),
        ("\uac00", "hangul syllables"),
        ("\u3042", "hiragana"),
        ("\u30a2", "katakana"),
    ],
)
def test_4_10_cjk_blocks_are_detected(char, block):
    assert SessionDB._contains_cjk(f"abc{char}def"), block
    assert SessionDB._is_cjk_codepoint(ord(char)), block
    assert SessionDB._count_cjk(char * 3) == 3, block


@pytest.mark.parametrize("char", ["a", "é", "Ж", "\u0e01", "🚀", "\u2603", "1"])
def test_4_10_non_cjk_is_not_detected(char):
    assert not SessionDB._contains_cjk(char)
    assert SessionDB._count_cjk(char) == 0


@pytest.mark.parametrize(
    ("query", "content"),
    [
        ("ｶﾀｶﾅ", "これはｶﾀｶﾅです"),
        ("\U0002a700\U0002a701\U0002a702", "前\U0002a700\U0002a701\U0002a702后"),
        ("\uf900\uf901\uf902", "前\uf900\uf901\uf902后"),
        ("ᄀᄁᄂ", "자모ᄀᄁᄂ끝"),
    ],
)
def test_4_10_wider_blocks_are_searched_as_cjk_substrings(db, query, content):
    db.create_session("s", "cli")
    hit = db.append_message("s", "user", content)
    db.append_message("s", "user", "unrelated")
    assert [h["id"] for h in db.search_messages(query)] == [hit]


# --- multimodal previews ------------------------------------------------------------------------


def test_4_11_multimodal_first_user_message_preview_is_its_text(db):
    db.create_session("s", "cli")
    db.append_message(
        "s",
        "user",
        [
            {"type": "text", "text": "Describe this"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
            {"type": "text", "text": "diagram please"},
        ],
    )
    db.append_message("s", "user", "second message")
    (row,) = db.list_sessions_rich()
    assert row["preview"] == "Describe this diagram please"


def test_4_11_long_multimodal_preview_is_cut(db):
    db.create_session("s", "cli")
    text = "word " * 30
    db.append_message(
        "s", "user", [{"type": "text", "text": text}, {"type": "image_url", "image_url": {"url": "u"}}]
    )
    (row,) = db.list_sessions_rich()
    assert row["preview"] == text.strip()[:60] + "..."


def test_4_11_multimodal_preview_flattens_newlines(db):
    db.create_session("s", "cli")
    db.append_message("s", "user", [{"type": "text", "text": "line one\nline two"}])
    (row,) = db.list_sessions_rich()
    assert row["preview"] == "line one line two"


def test_4_11_image_only_message_gives_empty_preview(db):
    db.create_session("s", "cli")
    db.append_message("s", "user", [{"type": "image_url", "image_url": {"url": "u"}}])
    (row,) = db.list_sessions_rich()
    assert row["preview"] == ""


def test_4_11_projected_tip_preview_uses_text_parts_too(db, make_session):
    make_session("root", started=1.0, ended=2.0, reason="compression")
    make_session("tip", started=3.0, parent="root")
    db.append_message("tip", "user", [{"type": "text", "text": "continued with a picture"}])
    (row,) = db.list_sessions_rich()
    assert (row["id"], row["preview"]) == ("tip", "continued with a picture")


# --- str, Path or URL ------------------------------------------------------------------------


def test_4_12_accepts_a_str_path(tmp_path):
    path = tmp_path / "nested" / "state.db"
    store = SessionDB(str(path))
    try:
        store.create_session("s", "cli")
        assert store.get_session("s")["source"] == "cli"
        assert path.exists()
    finally:
        store.close()


def test_4_12_accepts_a_path(tmp_path):
    store = SessionDB(tmp_path / "state.db")
    try:
        assert store.session_count() == 0
    finally:
        store.close()


def test_4_12_accepts_a_sqlalchemy_url(tmp_path):
    path = tmp_path / "via-url.db"
    store = SessionDB(f"sqlite:///{path}")
    try:
        store.create_session("s", "cli")
    finally:
        store.close()
    reopened = SessionDB(url=f"sqlite:///{path}")
    try:
        assert reopened.get_session("s")["source"] == "cli"
    finally:
        reopened.close()
    assert path.exists()


def test_4_12_str_and_path_open_the_same_file(tmp_path):
    path = tmp_path / "shared.db"
    first = SessionDB(path)
    try:
        first.create_session("from-path", "cli")
    finally:
        first.close()
    second = SessionDB(str(path))
    try:
        assert second.get_session("from-path") is not None
    finally:
        second.close()
