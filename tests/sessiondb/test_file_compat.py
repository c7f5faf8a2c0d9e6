"""One state.db, two programs, the other being upstream Hermes at schema 11.

(a) a v11 file written with plain sqlite3 the way upstream Hermes writes reads correctly
    through SessionDB (which brings it to schema 17);
(b) a file written by SessionDB reads correctly with plain sqlite3 the way upstream reads,
    and holds exactly the schema objects of upstream at schema 17 (with its opt-in Telegram
    topic tables) plus ``alembic_version``;
(c) the real upstream v11 ``SessionDB`` (``/tmp/upstream_state.py``, else extracted from the
    Hermes mirror by ``benchmarks.upstream``, when either is present) and ours read each
    other's files, also while both are open on the same file. Where upstream's later
    versions changed what a call returns (conversation dicts gained ``timestamp``, rows
    gained the schema-17 columns), the comparison is of what v11 returns.

Upstream at schema 17 is ``test_file_compat_head.py``.
"""

from __future__ import annotations

import importlib.util
import json
import re
import sqlite3
import sys
import types
from contextlib import closing
from pathlib import Path

import legacy_db
import pytest

from hermes_store.schema.legacy import HEAD_VERSION
from hermes_store.schema.revisions import history

SENTINEL = "\x00json:"
UPSTREAM_SOURCE = Path("/tmp/upstream_state.py")
HEAD = history().head
LATER_CONVERSATION_KEYS = ("timestamp", "message_id", "observed")
"""Keys upstream's conversation dicts gained after schema 11."""


def as_v11_conversation(conversation: list[dict]) -> list[dict]:
    """A conversation as upstream v11 returns it: without the keys added since."""
    return [
        {k: v for k, v in message.items() if k not in LATER_CONVERSATION_KEYS} for message in conversation
    ]


def head_reference(path: Path, *, topics: bool = False) -> Path:
    """A file with upstream's schema-17 objects, and with ``topics`` its opt-in Telegram
    topic tables."""
    legacy_db.build_upstream_db(path, 17, topic_tables=2 if topics else None)
    return path


def plain_connect(path: Path) -> sqlite3.Connection:
    """A connection configured the way upstream configures its own."""
    conn = sqlite3.connect(str(path), timeout=1.0, isolation_level=None)
    conn.row_factory = sqlite3.Row
    conn.execute("PRAGMA foreign_keys=ON")
    return conn


def squash(sql: str | None) -> str:
    return re.sub(r"\s+", "", sql or "")


# =====================================================================================
# (a) a database written the way upstream writes, read through SessionDB
# =====================================================================================

RUN_SQL_CALL = {
    "id": "call_a1",
    "type": "function",
    "function": {
        "name": "run_sql",
        "arguments": json.dumps({"sql": "SELECT * FROM orders", "note": "数据库迁移"}),
    },
}
MODEL_CONFIG = {"temperature": 0.7, "persona": "助手"}
ER_DIAGRAM = [
    {"type": "text", "text": "Here is the ER diagram"},
    {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBOR"}},
]

UPSTREAM_SESSIONS = [
    {
        "id": "up-root",
        "source": "cli",
        "user_id": "u-100",
        "model": "anthropic/claude-opus",
        "model_config": MODEL_CONFIG,
        "system_prompt": "You are a careful DBA.",
        "started_at": 1770000000.25,
        "ended_at": 1770003600.5,
        "end_reason": "compression",
        "input_tokens": 1200,
        "output_tokens": 340,
        "title": "Database migration plan",
        "estimated_cost_usd": 0.0125,
        "api_call_count": 3,
    },
    {
        "id": "up-tip",
        "source": "cli",
        "model": "anthropic/claude-opus",
        "parent_session_id": "up-root",
        "started_at": 1770003601.0,
        "title": "Database migration plan #2",
    },
    {"id": "up-tg", "source": "telegram", "started_at": 1770100000.0},
]
UPSTREAM_MESSAGES = [
    {
        "session_id": "up-root",
        "role": "user",
        "content": "How should we migrate the orders table?",
        "timestamp": 1770000001.0,
    },
    {
        "session_id": "up-root",
        "role": "assistant",
        "content": "Checking the schema first.",
        "tool_calls": [RUN_SQL_CALL],
        "finish_reason": "tool_calls",
        "reasoning": "Look before leaping.",
        "reasoning_content": "",
        "reasoning_details": [{"type": "summary", "text": "检查"}],
        "codex_reasoning_items": [{"id": "rs_1", "encrypted_content": "gAAA"}],
        "codex_message_items": [{"id": "msg_1", "phase": "final"}],
        "token_count": 88,
        "timestamp": 1770000002.5,
    },
    {
        "session_id": "up-root",
        "role": "tool",
        "content": "orders: 3 columns",
        "tool_call_id": "call_a1",
        "tool_name": "run_sql",
        "timestamp": 1770000003.0,
    },
    {"session_id": "up-root", "role": "user", "content": "Summarise the plan", "timestamp": 1770000004.0},
    {"session_id": "up-tip", "role": "user", "content": "Summarise the plan", "timestamp": 1770003602.0},
    {
        "session_id": "up-tip",
        "role": "assistant",
        "content": "<memory-context>old notes</memory-context>\n\nPlan: add column, backfill, swap.",
        "finish_reason": "stop",
        "timestamp": 1770003603.0,
    },
    {"session_id": "up-tip", "role": "user", "content": ER_DIAGRAM, "timestamp": 1770003604.0},
    {"session_id": "up-tg", "role": "user", "content": "记忆断裂问题怎么办", "timestamp": 1770100001.0},
    {"session_id": "up-tg", "role": "assistant", "content": "你好，世界", "timestamp": 1770100002.0},
]


@pytest.fixture
def upstream_file(tmp_path):
    """A v11 file created and filled with plain sqlite3 in upstream's encodings."""
    path = tmp_path / "state.db"
    legacy_db.build_legacy_db(path, 11)
    legacy_db.populate(path, UPSTREAM_SESSIONS, UPSTREAM_MESSAGES)
    return path


@pytest.fixture
def ours_on_upstream(upstream_file, open_db):
    return open_db(upstream_file)


def test_upstream_file_really_uses_upstream_encodings(upstream_file):
    with closing(plain_connect(upstream_file)) as conn:
        tool_calls = conn.execute("SELECT tool_calls FROM messages WHERE id = 2").fetchone()[0]
        content = conn.execute("SELECT content FROM messages WHERE id = 7").fetchone()[0]
        kinds = conn.execute("SELECT DISTINCT typeof(timestamp) FROM messages").fetchall()
    assert "\\\\u6570" in tool_calls  # CJK in the arguments is ASCII-escaped (twice nested)
    assert content.startswith(SENTINEL)
    assert [tuple(k) for k in kinds] == [("real",)]


def test_ours_reads_upstream_sessions(ours_on_upstream):
    row = ours_on_upstream.get_session("up-root")
    assert row["model_config"] == json.dumps(MODEL_CONFIG)
    assert json.loads(row["model_config"]) == MODEL_CONFIG
    assert (row["started_at"], row["ended_at"], row["end_reason"]) == (
        1770000000.25,
        1770003600.5,
        "compression",
    )
    assert (row["message_count"], row["tool_call_count"], row["input_tokens"]) == (4, 1, 1200)
    assert row["title"] == "Database migration plan"
    assert ours_on_upstream.get_session_by_title("Database migration plan #2")["id"] == "up-tip"
    assert ours_on_upstream.resolve_session_by_title("Database migration plan") == "up-tip"


def test_ours_reads_upstream_messages(ours_on_upstream):
    messages = ours_on_upstream.get_messages("up-root")
    assert [m["id"] for m in messages] == [1, 2, 3, 4]
    assistant = messages[1]
    assert assistant["tool_calls"] == [RUN_SQL_CALL]
    assert json.loads(assistant["tool_calls"][0]["function"]["arguments"])["note"] == "数据库迁移"
    assert assistant["reasoning_details"] == json.dumps([{"type": "summary", "text": "检查"}])
    assert assistant["codex_message_items"] == '[{"id": "msg_1", "phase": "final"}]'
    assert (assistant["reasoning"], assistant["reasoning_content"], assistant["token_count"]) == (
        "Look before leaping.",
        "",
        88,
    )
    assert assistant["timestamp"] == 1770000002.5
    assert ours_on_upstream.get_messages("up-tip")[2]["content"] == ER_DIAGRAM


def test_ours_replays_an_upstream_conversation(ours_on_upstream):
    replay = ours_on_upstream.get_messages_as_conversation("up-tip", include_ancestors=True)
    times = [1770000001.0, 1770000002.5, 1770000003.0, 1770000004.0, 1770003603.0, 1770003604.0]
    assert [m.get("timestamp") for m in replay] == times
    assert as_v11_conversation(replay) == [
        {"role": "user", "content": "How should we migrate the orders table?"},
        {
            "role": "assistant",
            "content": "Checking the schema first.",
            "tool_calls": [RUN_SQL_CALL],
            "finish_reason": "tool_calls",
            "reasoning": "Look before leaping.",
            "reasoning_content": "",
            "reasoning_details": [{"type": "summary", "text": "检查"}],
            "codex_reasoning_items": [{"id": "rs_1", "encrypted_content": "gAAA"}],
            "codex_message_items": [{"id": "msg_1", "phase": "final"}],
        },
        {"role": "tool", "content": "orders: 3 columns", "tool_call_id": "call_a1", "tool_name": "run_sql"},
        {"role": "user", "content": "Summarise the plan"},
        {"role": "assistant", "content": "Plan: add column, backfill, swap.", "finish_reason": "stop"},
        {"role": "user", "content": ER_DIAGRAM},
    ]


def test_ours_searches_an_upstream_file(ours_on_upstream):
    assert sorted(h["id"] for h in ours_on_upstream.search_messages("orders")) == [1, 2, 3]
    # Words inside upstream's ASCII-escaped tool-call JSON are found.
    assert sorted(h["id"] for h in ours_on_upstream.search_messages("run_sql")) == [2, 3]
    assert [h["id"] for h in ours_on_upstream.search_messages("SELECT")] == [2]
    assert [h["id"] for h in ours_on_upstream.search_messages("记忆断裂")] == [8]
    assert [h["id"] for h in ours_on_upstream.search_messages("你好")] == [9]
    (hit,) = ours_on_upstream.search_messages("ER diagram")
    assert hit["context"][1] == {"role": "user", "content": "Here is the ER diagram"}


def test_ours_lists_an_upstream_file(ours_on_upstream):
    rows = ours_on_upstream.list_sessions_rich()
    assert [(r["id"], r.get("_lineage_root_id")) for r in rows] == [("up-tg", None), ("up-tip", "up-root")]
    assert rows[1]["preview"] == "Summarise the plan"
    assert rows[1]["started_at"] == 1770000000.25
    assert rows[1]["last_active"] == 1770003604.0
    assert [r["id"] for r in ours_on_upstream.search_sessions()] == ["up-tg", "up-tip", "up-root"]
    assert ours_on_upstream.get_compression_tip("up-root") == "up-tip"


def test_ours_keeps_an_upstream_file_healthy_for_upstream(ours_on_upstream, upstream_file):
    ours_on_upstream.append_message("up-tg", "assistant", "new words 新的内容", tool_calls=[{"id": "x"}])
    ours_on_upstream.set_session_title("up-tg", "Telegram chat")
    assert [h["id"] for h in ours_on_upstream.search_messages("新的内容")] == [10]
    assert legacy_db.schema_versions(upstream_file) == [HEAD_VERSION]
    assert legacy_db.alembic_versions(upstream_file) == [HEAD]
    for table in ("messages_fts", "messages_fts_trigram"):
        legacy_db.fts_integrity_check(upstream_file, table)
    assert legacy_db.fts_rowids(upstream_file, "messages_fts", "new") == [10]
    with closing(plain_connect(upstream_file)) as conn:
        row = conn.execute(
            "SELECT message_count, tool_call_count, title FROM sessions WHERE id = 'up-tg'"
        ).fetchone()
    assert tuple(row) == (3, 1, "Telegram chat")


# =====================================================================================
# (b) a database written by SessionDB, read the way upstream reads
# =====================================================================================


@pytest.fixture
def ours_file(tmp_path, open_db):
    path = tmp_path / "state.db"
    store = open_db(path)
    store.create_session(
        "o-1", "cli", model="m-1", model_config={"persona": "助手", "n": 1}, system_prompt="sp"
    )
    store.append_message("o-1", "user", "Plan the rollout for 数据库迁移")
    store.append_message(
        "o-1",
        "assistant",
        None,
        tool_calls=[
            {"id": "c1", "type": "function", "function": {"name": "plan", "arguments": '{"step": "备份"}'}}
        ],
        reasoning_details=[{"text": "思考"}],
        codex_reasoning_items=[{"id": "rs"}],
        codex_message_items=[{"id": "mi"}],
    )
    store.append_message(
        "o-1",
        "user",
        [{"type": "text", "text": "see chart"}, {"type": "image_url", "image_url": {"url": "u"}}],
    )
    store.set_session_title("o-1", "Rollout")
    store.update_token_counts("o-1", input_tokens=10, output_tokens=5, estimated_cost_usd=0.25)
    store.end_session("o-1", "user_exit")
    store.close()
    return path


def test_plain_reader_sees_schema_version_17(ours_file):
    assert legacy_db.schema_versions(ours_file) == [HEAD_VERSION] == [17]


def test_plain_reader_parses_every_json_column(ours_file):
    with closing(plain_connect(ours_file)) as conn:
        session = dict(conn.execute("SELECT * FROM sessions WHERE id = 'o-1'").fetchone())
        rows = [dict(r) for r in conn.execute("SELECT * FROM messages ORDER BY timestamp, id")]
    assert len(session) == 41
    assert json.loads(session["model_config"]) == {"persona": "助手", "n": 1}
    assert (session["title"], session["end_reason"], session["input_tokens"]) == ("Rollout", "user_exit", 10)
    assert json.loads(rows[1]["tool_calls"])[0]["function"]["arguments"] == '{"step": "备份"}'
    assert json.loads(rows[1]["reasoning_details"]) == [{"text": "思考"}]
    assert json.loads(rows[1]["codex_reasoning_items"]) == [{"id": "rs"}]
    assert json.loads(rows[1]["codex_message_items"]) == [{"id": "mi"}]
    assert rows[1]["content"] is None
    assert rows[0]["content"] == "Plan the rollout for 数据库迁移"
    assert rows[2]["content"].startswith(SENTINEL)
    assert json.loads(rows[2]["content"][len(SENTINEL) :])[0] == {"type": "text", "text": "see chart"}


def test_plain_reader_sees_real_timestamps(ours_file):
    with closing(plain_connect(ours_file)) as conn:
        kinds = {
            conn.execute("SELECT typeof(started_at) FROM sessions").fetchone()[0],
            conn.execute("SELECT typeof(ended_at) FROM sessions").fetchone()[0],
            *(r[0] for r in conn.execute("SELECT typeof(timestamp) FROM messages")),
        }
    assert kinds == {"real"}


def test_plain_reader_can_match_both_fts_tables(ours_file):
    assert legacy_db.fts_rowids(ours_file, "messages_fts", "rollout") == [1]
    assert legacy_db.fts_rowids(ours_file, "messages_fts", "plan") == [1, 2]
    assert legacy_db.fts_rowids(ours_file, "messages_fts_trigram", '"数据库迁移"') == [1]
    assert (
        legacy_db.fts_rowids(ours_file, "messages_fts_trigram", '"备份"') == []
    )  # two chars: below trigram size
    assert legacy_db.fts_rowids(ours_file, "messages_fts_trigram", '"step"') == [2]
    for table in ("messages_fts", "messages_fts_trigram"):
        legacy_db.fts_integrity_check(ours_file, table)


def schema_objects(path: Path) -> dict[tuple[str, str], str]:
    return {key: squash(sql) for key, sql in legacy_db.master(path).items()}


def table_shape(path: Path, table: str) -> dict[str, tuple]:
    with closing(sqlite3.connect(str(path))) as conn:
        return {row[1]: tuple(row[2:]) for row in conn.execute(f"PRAGMA table_info({table})")}


def foreign_keys(path: Path, table: str) -> list[tuple]:
    with closing(sqlite3.connect(str(path))) as conn:
        return sorted(tuple(row[2:]) for row in conn.execute(f"PRAGMA foreign_key_list({table})"))


ALEMBIC_OBJECTS = {("table", "alembic_version"), ("index", "sqlite_autoindex_alembic_version_1")}
LATER_TABLES = ("compression_locks", "telegram_dm_topic_mode", "telegram_dm_topic_bindings")


def assert_same_schema(ours: Path, reference: Path) -> None:
    mine, theirs = schema_objects(ours), schema_objects(reference)
    assert set(mine) - set(theirs) == ALEMBIC_OBJECTS
    assert set(theirs) - set(mine) == set()
    for key in theirs:
        kind, name = key
        if kind in ("index", "trigger") or name.startswith("messages_fts"):
            assert mine[key] == theirs[key], key
    for table in ("sessions", "messages", "state_meta", "schema_version", *LATER_TABLES):
        if ("table", table) not in theirs:  # the topic tables: upstream's opt-in
            continue
        assert table_shape(ours, table) == table_shape(reference, table), table
        assert foreign_keys(ours, table) == foreign_keys(reference, table), table


def test_schema_is_upstreams_plus_alembic_version(ours_file, tmp_path):
    assert_same_schema(ours_file, head_reference(tmp_path / "reference.db"))


def test_fts_tables_are_inline_with_one_content_column(ours_file):
    objects = legacy_db.master(ours_file)
    assert squash(objects[("table", "messages_fts")]) == squash(
        "CREATE VIRTUAL TABLE messages_fts USING fts5(content)"
    )
    assert squash(objects[("table", "messages_fts_trigram")]) == squash(
        "CREATE VIRTUAL TABLE messages_fts_trigram USING fts5(content, tokenize='trigram')"
    )
    assert squash(objects[("index", "idx_sessions_title_unique")]) == squash(
        "CREATE UNIQUE INDEX idx_sessions_title_unique ON sessions(title) WHERE title IS NOT NULL"
    )


def test_fresh_file_schema_matches_upstream_reference(tmp_path, open_db):
    path = tmp_path / "fresh.db"
    open_db(path).close()
    assert_same_schema(path, head_reference(tmp_path / "reference.db"))
    assert legacy_db.schema_versions(path) == [HEAD_VERSION]
    assert legacy_db.alembic_versions(path) == [HEAD]


def test_topic_mode_opt_in_gives_upstreams_topic_tables(tmp_path, open_db):
    path = tmp_path / "fresh.db"
    store = open_db(path)
    try:
        store.enable_telegram_topic_mode(chat_id=1, user_id=1)
    finally:
        store.close()
    assert_same_schema(path, head_reference(tmp_path / "reference.db", topics=True))


# =====================================================================================
# (c) the real upstream SessionDB against ours
# =====================================================================================

MEMORY_NOTE = (
    "[System note: The following is recalled memory context, NOT new user input. "
    "Treat as informational background data.]"
)


def _stub_sanitize_context(text: str) -> str:
    """Stand-in for upstream's agent.memory_manager.sanitize_context (three regex passes)."""
    text = re.sub(
        r"<\s*memory-context\s*>.*?<\s*/\s*memory-context\s*>", "", text, flags=re.IGNORECASE | re.DOTALL
    )
    text = re.sub(re.escape(MEMORY_NOTE) + r"\s*", "", text)
    return re.sub(r"<\s*/?\s*memory-context\s*>", "", text, flags=re.IGNORECASE)


@pytest.fixture(scope="module")
def upstream_module(tmp_path_factory):
    """upstream's hermes_state module, imported from /tmp with its two foreign imports stubbed."""
    source = UPSTREAM_SOURCE
    if not source.exists():
        # Else upstream's file at its v11 commit, from the Hermes mirror when this machine has one.
        from support import bench_upstream

        upstream = bench_upstream()
        folder = upstream.upstream_folder()
        if folder is None:
            pytest.skip(f"neither {UPSTREAM_SOURCE} nor the Hermes mirror is here; cannot run upstream")
        source = folder / f"{upstream.MODULE_NAME}.py"
    home = tmp_path_factory.mktemp("hermes_home")
    agent = types.ModuleType("agent")
    memory_manager = types.ModuleType("agent.memory_manager")
    memory_manager.sanitize_context = _stub_sanitize_context  # type: ignore[attr-defined]
    agent.memory_manager = memory_manager  # type: ignore[attr-defined]
    constants = types.ModuleType("hermes_constants")
    constants.get_hermes_home = lambda: home  # type: ignore[attr-defined]
    stubs = {"agent": agent, "agent.memory_manager": memory_manager, "hermes_constants": constants}
    added = [name for name in stubs if name not in sys.modules]
    for name in added:
        sys.modules[name] = stubs[name]
    try:
        spec = importlib.util.spec_from_file_location("upstream_hermes_state", source)
        if spec is None or spec.loader is None:
            pytest.skip(f"cannot load {source}")
        module = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(module)
        except Exception as exc:  # pragma: no cover - depends on the file present
            pytest.skip(f"upstream hermes_state could not be imported: {exc!r}")
    finally:
        for name in added:
            sys.modules.pop(name, None)
    if getattr(module, "SCHEMA_VERSION", None) != 11:
        pytest.skip("the upstream file is not the schema-version-11 SessionDB")
    return module


@pytest.fixture
def upstream_db(upstream_module):
    opened = []

    def _open(path: Path):
        store = upstream_module.SessionDB(Path(path))
        opened.append(store)
        return store

    yield _open
    for store in opened:
        store.close()


SEARCH_CALL = {
    "id": "call_q1",
    "type": "function",
    "function": {
        "name": "web_search",
        "arguments": json.dumps({"q": "kubernetes 记忆断裂"}, ensure_ascii=False),
    },
}


def write_sample(store, *, multimodal_first: bool = False) -> None:
    """The same sequence of public calls, whichever program ``store`` is."""
    store.create_session(
        "root", "cli", model="m-root", model_config={"t": 0.1}, system_prompt="be brief", user_id="u1"
    )
    if multimodal_first:
        store.append_message("root", "user", [{"type": "text", "text": "picture first"}])
    store.append_message("root", "user", "Deploy the kubernetes cluster")
    store.append_message(
        "root",
        "assistant",
        "Searching.",
        tool_calls=[SEARCH_CALL],
        finish_reason="tool_calls",
        reasoning="plan",
        reasoning_content="",
        reasoning_details=[{"text": "思考"}],
        codex_message_items=[{"id": "mi"}],
    )
    store.append_message("root", "tool", "kubernetes docs", tool_call_id="call_q1", tool_name="web_search")
    store.append_message("root", "user", "Continue please")
    store.set_session_title("root", "Cluster deploy")
    store.update_token_counts(
        "root", input_tokens=100, output_tokens=20, estimated_cost_usd=0.5, model="ignored"
    )
    store.update_token_counts("root", input_tokens=1, cost_status="estimated", billing_provider="openrouter")
    store.end_session("root", "compression")
    store.create_session("tip", "cli", model="m-root", parent_session_id="root")
    store.set_session_title("tip", store.get_next_title_in_lineage("Cluster deploy"))
    store.append_message("tip", "user", "Continue please")
    store.append_message(
        "tip",
        "assistant",
        "<memory-context>x</memory-context>\n\nDone: 记忆断裂已修复。",
        finish_reason="stop",
    )
    store.append_message(
        "tip", "user", [{"type": "text", "text": "diagram"}, {"type": "image_url", "image_url": {"url": "u"}}]
    )
    store.create_session("other", "telegram")
    store.append_message("other", "user", "你好 世界")


def stable_session(row):
    # Clock values differ between the two runs; everything else must not.
    return {k: v for k, v in row.items() if k not in ("started_at", "ended_at", "last_active", "timestamp")}


RAW_JSON_COLUMNS = ("reasoning_details", "codex_reasoning_items", "codex_message_items")


def comparable_messages(messages):
    # These columns come back as raw JSON text, which ours writes as UTF-8 and upstream
    # ASCII-escapes: compare what they decode to.
    return [
        {k: (json.loads(v) if k in RAW_JSON_COLUMNS and v else v) for k, v in m.items() if k != "timestamp"}
        for m in messages
    ]


def assert_same_view(reader, writer) -> None:
    """``reader`` and ``writer`` (one ours, one upstream) report the same data."""
    for sid in ("root", "tip", "other"):
        assert reader.get_session(sid) == writer.get_session(sid), sid
        assert reader.get_messages(sid) == writer.get_messages(sid), sid
        assert as_v11_conversation(reader.get_messages_as_conversation(sid)) == as_v11_conversation(
            writer.get_messages_as_conversation(sid)
        ), sid
    assert as_v11_conversation(
        reader.get_messages_as_conversation("tip", include_ancestors=True)
    ) == as_v11_conversation(writer.get_messages_as_conversation("tip", include_ancestors=True))
    assert reader.list_sessions_rich() == writer.list_sessions_rich()
    assert reader.list_sessions_rich(include_children=True) == writer.list_sessions_rich(
        include_children=True
    )
    assert reader.search_sessions() == writer.search_sessions()
    for query in ("kubernetes", "web_search", "Continue", "记忆断裂", "你好"):
        assert reader.search_messages(query) == writer.search_messages(query), query
    assert reader.get_compression_tip("root") == writer.get_compression_tip("root") == "tip"
    assert reader.resolve_session_by_title("Cluster deploy") == "tip"


def test_upstream_reads_a_file_written_by_ours(tmp_path, open_db, upstream_db):
    path = tmp_path / "state.db"
    ours = open_db(path)
    write_sample(ours)
    ours.close()
    upstream = upstream_db(path)
    reference = open_db(path)
    assert_same_view(upstream, reference)
    # CJK inside tool-call JSON written by ours is findable even by upstream.
    assert [h["id"] for h in upstream.search_messages("记忆断裂") if h["session_id"] == "root"] == [2]
    assert upstream.get_messages("root")[1]["tool_calls"] == [SEARCH_CALL]
    assert upstream.get_session("tip")["title"] == "Cluster deploy #2"


def test_ours_reads_a_file_written_by_upstream(tmp_path, open_db, upstream_db):
    path = tmp_path / "state.db"
    upstream = upstream_db(path)
    write_sample(upstream)
    upstream.close()
    ours = open_db(path)
    reference = upstream_db(path)
    assert_same_view(ours, reference)
    assert ours.get_messages("root")[1]["tool_calls"] == [SEARCH_CALL]
    assert legacy_db.alembic_versions(path) == [HEAD]
    assert legacy_db.schema_versions(path) == [HEAD_VERSION]


def test_both_programs_write_the_same_way(tmp_path, open_db, upstream_db):
    ours = open_db(tmp_path / "ours.db")
    upstream = upstream_db(tmp_path / "upstream.db")
    write_sample(ours)
    write_sample(upstream)
    for sid in ("root", "tip", "other"):
        theirs = stable_session(upstream.get_session(sid))
        assert {k: v for k, v in stable_session(ours.get_session(sid)).items() if k in theirs} == theirs, sid
        theirs_messages = comparable_messages(upstream.get_messages(sid))
        assert [
            {k: v for k, v in mine.items() if k in their}
            for mine, their in zip(comparable_messages(ours.get_messages(sid)), theirs_messages, strict=True)
        ] == theirs_messages, sid
        assert as_v11_conversation(ours.get_messages_as_conversation(sid, include_ancestors=True)) == (
            upstream.get_messages_as_conversation(sid, include_ancestors=True)
        )
    theirs_listed = [stable_session(r) for r in upstream.list_sessions_rich()]
    assert [
        {k: v for k, v in stable_session(mine).items() if k in their}
        for mine, their in zip(ours.list_sessions_rich(), theirs_listed, strict=True)
    ] == theirs_listed
    for query in ("kubernetes", "Continue", "web_search"):
        # Snippets of tool-call rows differ by the JSON encoding; compare the rest.
        mine = [(h["id"], h["role"], h["tool_name"], h["context"]) for h in ours.search_messages(query)]
        theirs = [(h["id"], h["role"], h["tool_name"], h["context"]) for h in upstream.search_messages(query)]
        assert mine == theirs, query


def test_both_programs_open_on_one_file_see_each_others_writes(tmp_path, open_db, upstream_db):
    path = tmp_path / "state.db"
    ours = open_db(path)
    upstream = upstream_db(path)
    ours.create_session("shared", "cli")
    upstream.append_message("shared", "user", "written by upstream")
    ours.append_message("shared", "assistant", "written by ours", tool_calls=[{"id": "a"}, {"id": "b"}])
    upstream.append_message("shared", "tool", "upstream tool output", tool_name="shell")
    upstream.set_session_title("shared", "Shared file")
    with pytest.raises(ValueError, match="already in use"):
        ours.set_session_title("another", "Shared file")
    for store in (ours, upstream):
        assert [m["content"] for m in store.get_messages("shared")] == [
            "written by upstream",
            "written by ours",
            "upstream tool output",
        ]
        row = store.get_session("shared")
        assert (row["message_count"], row["tool_call_count"], row["title"]) == (3, 2, "Shared file")
        assert sorted(h["id"] for h in store.search_messages("written")) == [1, 2]
    ours.delete_session("shared")
    assert upstream.get_session("shared") is None
    assert upstream.search_messages("written") == []
    for table in ("messages_fts", "messages_fts_trigram"):
        legacy_db.fts_integrity_check(path, table)


def test_upstream_reopening_our_file_changes_nothing(tmp_path, open_db, upstream_db):
    path = tmp_path / "state.db"
    ours = open_db(path)
    write_sample(ours)
    ours.close()
    before = schema_objects(path)
    upstream_db(path).close()
    assert schema_objects(path) == before
    assert legacy_db.schema_versions(path) == [HEAD_VERSION]
    again = open_db(path)
    assert again.get_session("tip")["title"] == "Cluster deploy #2"
    assert legacy_db.alembic_versions(path) == [HEAD]


def test_schema_holds_every_object_of_a_file_created_by_upstream(tmp_path, open_db, upstream_db):
    reference = tmp_path / "upstream.db"
    upstream_db(reference).close()
    ours = tmp_path / "ours.db"
    open_db(ours).close()
    mine, theirs = schema_objects(ours), schema_objects(reference)
    assert set(theirs) <= set(mine)
    for key in theirs:
        kind, name = key
        if kind in ("index", "trigger") or name.startswith("messages_fts"):
            assert mine[key] == theirs[key], key
    for table in ("sessions", "messages", "state_meta", "schema_version"):
        shape = table_shape(reference, table)
        assert {c: v for c, v in table_shape(ours, table).items() if c in shape} == shape, table


def test_multimodal_first_message_preview_differs_only_by_improvement(tmp_path, open_db, upstream_db):
    path = tmp_path / "state.db"
    ours = open_db(path)
    write_sample(ours, multimodal_first=True)
    upstream = upstream_db(path)
    mine = {r["id"]: r["preview"] for r in ours.list_sessions_rich(include_children=True)}
    theirs = {r["id"]: r["preview"] for r in upstream.list_sessions_rich(include_children=True)}
    assert theirs["root"] == ""
    assert mine["root"] == "picture first"
    assert {k: v for k, v in mine.items() if k != "root"} == {k: v for k, v in theirs.items() if k != "root"}
