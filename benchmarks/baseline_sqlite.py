"""Plain-``sqlite3`` baseline: the work upstream's ``SessionDB`` does at schema version 11.

This is the yardstick the ``hermes_store`` numbers are compared against, so it keeps upstream's
costs and query shapes rather than optimising them:

* the exact v11 schema: ``sessions``, ``messages``, ``state_meta``, ``schema_version``, four
  indexes, the partial unique title index, and two *inline* FTS5 tables (``unicode61`` and
  ``trigram``) fed by six triggers with ``content || ' ' || tool_name || ' ' || tool_calls``;
* one connection opened with ``timeout=1.0`` and ``isolation_level=None``, ``journal_mode=WAL``,
  ``foreign_keys=ON``, default ``synchronous`` (FULL), and a non-reentrant lock around every use;
* writes as ``BEGIN IMMEDIATE`` ... ``COMMIT``, retried up to 15 times on "locked"/"busy" with a
  20-150 ms random sleep, and a PASSIVE WAL checkpoint after every 50th successful write;
* upstream's encodings: default ``json.dumps`` for JSON columns, falsy values stored as NULL,
  non-string content stored behind the ``"\\x00json:"`` sentinel;
* search routed to the word index, the trigram index (three or more CJK characters) or a LIKE scan
  (fewer than three), with a snippet per hit and one context query per hit.

Deliberate simplifications, none of which changes the cost of what is measured: no migration of
older schema versions (an existing file must already be at v11), no ancestor walk in
``get_messages_as_conversation``, and a minimal FTS5 query sanitiser (each whitespace-separated
token is double-quoted; balanced ``"..."`` phrases and a trailing ``*`` are kept).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import random
import re
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

__all__ = ["SCHEMA_VERSION", "BaselineStore", "contains_cjk", "count_cjk", "quote_fts_query"]

log = logging.getLogger(__name__)

T = TypeVar("T")

SCHEMA_VERSION = 11

# --------------------------------------------------------------------------------------------
# DDL (schema version 11)
# --------------------------------------------------------------------------------------------

_MAIN_SCHEMA = """
CREATE TABLE IF NOT EXISTS schema_version (
    version INTEGER NOT NULL
);

CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY,
    source TEXT NOT NULL,
    user_id TEXT,
    model TEXT,
    model_config TEXT,
    system_prompt TEXT,
    parent_session_id TEXT,
    started_at REAL NOT NULL,
    ended_at REAL,
    end_reason TEXT,
    message_count INTEGER DEFAULT 0,
    tool_call_count INTEGER DEFAULT 0,
    input_tokens INTEGER DEFAULT 0,
    output_tokens INTEGER DEFAULT 0,
    cache_read_tokens INTEGER DEFAULT 0,
    cache_write_tokens INTEGER DEFAULT 0,
    reasoning_tokens INTEGER DEFAULT 0,
    billing_provider TEXT,
    billing_base_url TEXT,
    billing_mode TEXT,
    estimated_cost_usd REAL,
    actual_cost_usd REAL,
    cost_status TEXT,
    cost_source TEXT,
    pricing_version TEXT,
    title TEXT,
    api_call_count INTEGER DEFAULT 0,
    FOREIGN KEY (parent_session_id) REFERENCES sessions(id)
);

CREATE TABLE IF NOT EXISTS messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL REFERENCES sessions(id),
    role TEXT NOT NULL,
    content TEXT,
    tool_call_id TEXT,
    tool_calls TEXT,
    tool_name TEXT,
    timestamp REAL NOT NULL,
    token_count INTEGER,
    finish_reason TEXT,
    reasoning TEXT,
    reasoning_content TEXT,
    reasoning_details TEXT,
    codex_reasoning_items TEXT,
    codex_message_items TEXT
);

CREATE TABLE IF NOT EXISTS state_meta (
    key TEXT PRIMARY KEY,
    value TEXT
);

CREATE INDEX IF NOT EXISTS idx_sessions_source ON sessions(source);
CREATE INDEX IF NOT EXISTS idx_sessions_parent ON sessions(parent_session_id);
CREATE INDEX IF NOT EXISTS idx_sessions_started ON sessions(started_at DESC);
CREATE INDEX IF NOT EXISTS idx_messages_session ON messages(session_id, timestamp);
"""

_TITLE_INDEX = (
    "CREATE UNIQUE INDEX IF NOT EXISTS idx_sessions_title_unique ON sessions(title) WHERE title IS NOT NULL"
)

# The indexed text of a message row: content, tool name and tool-call JSON, NULLs as ''.
_INDEXED_TEXT = (
    "COALESCE(new.content, '') || ' ' || COALESCE(new.tool_name, '') || ' ' || COALESCE(new.tool_calls, '')"
)


def _fts_script(table: str, options: str) -> str:
    """DDL for one inline FTS5 table plus its insert/delete/update triggers."""
    return f"""
CREATE VIRTUAL TABLE IF NOT EXISTS {table} USING fts5(
    content{options}
);

CREATE TRIGGER IF NOT EXISTS {table}_insert AFTER INSERT ON messages BEGIN
    INSERT INTO {table}(rowid, content) VALUES (new.id, {_INDEXED_TEXT});
END;

CREATE TRIGGER IF NOT EXISTS {table}_delete AFTER DELETE ON messages BEGIN
    DELETE FROM {table} WHERE rowid = old.id;
END;

CREATE TRIGGER IF NOT EXISTS {table}_update AFTER UPDATE ON messages BEGIN
    DELETE FROM {table} WHERE rowid = old.id;
    INSERT INTO {table}(rowid, content) VALUES (new.id, {_INDEXED_TEXT});
END;
"""


_WORD_FTS = _fts_script("messages_fts", "")
_TRIGRAM_FTS = _fts_script("messages_fts_trigram", ",\n    tokenize='trigram'")

# --------------------------------------------------------------------------------------------
# Encodings
# --------------------------------------------------------------------------------------------

CONTENT_JSON_PREFIX = "\x00json:"


def _json_or_null(value: Any) -> str | None:
    """Default ``json.dumps`` for truthy values; NULL for anything falsy."""
    return json.dumps(value) if value else None


def _encode_content(value: Any) -> Any:
    if value is None or isinstance(value, str | int | float | bytes):
        return value
    try:
        return CONTENT_JSON_PREFIX + json.dumps(value)
    except (TypeError, ValueError):
        return str(value)


def _decode_content(value: Any) -> Any:
    if isinstance(value, str) and value.startswith(CONTENT_JSON_PREFIX):
        try:
            return json.loads(value[len(CONTENT_JSON_PREFIX) :])
        except ValueError:
            log.warning("undecodable JSON content; returning it raw")
    return value


def _loads_or(value: str, fallback: Any) -> Any:
    try:
        return json.loads(value)
    except ValueError:
        log.warning("undecodable JSON column; using %r", fallback)
        return fallback


# Context sanitising applied to user/assistant text when replaying a conversation.
_MEMORY_BLOCK = re.compile(r"<\s*memory-context\s*>.*?<\s*/\s*memory-context\s*>", re.IGNORECASE | re.DOTALL)
_MEMORY_NOTE = re.compile(
    re.escape(
        "[System note: The following is recalled memory context, NOT new user input. "
        "Treat as informational background data.]"
    )
    + r"\s*"
)
_MEMORY_TAG = re.compile(r"<\s*/?\s*memory-context\s*>", re.IGNORECASE)


def _strip_memory_context(text: str) -> str:
    text = _MEMORY_BLOCK.sub("", text)
    text = _MEMORY_NOTE.sub("", text)
    return _MEMORY_TAG.sub("", text)


# Title clean-up: control and invisible format characters out, whitespace runs collapsed.
_TITLE_DROP = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff\ufffc\ufff9-\ufffb]"
)
_WHITESPACE_RUN = re.compile(r"\s+")
MAX_TITLE_LENGTH = 100


def _clean_title(title: str | None) -> str | None:
    if not title:
        return None
    cleaned = _WHITESPACE_RUN.sub(" ", _TITLE_DROP.sub("", title)).strip()
    if not cleaned:
        return None
    if len(cleaned) > MAX_TITLE_LENGTH:
        raise ValueError(f"Title too long ({len(cleaned)} chars, max {MAX_TITLE_LENGTH})")
    return cleaned


# --------------------------------------------------------------------------------------------
# Query helpers
# --------------------------------------------------------------------------------------------

_CJK_RANGES = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x3000, 0x303F),
    (0x3040, 0x309F),
    (0x30A0, 0x30FF),
    (0xAC00, 0xD7AF),
)


def _is_cjk(ch: str) -> bool:
    cp = ord(ch)
    return any(lo <= cp <= hi for lo, hi in _CJK_RANGES)


def count_cjk(text: str) -> int:
    """Number of characters of ``text`` in the CJK blocks the search router recognises."""
    return sum(1 for ch in text if _is_cjk(ch))


def contains_cjk(text: str) -> bool:
    """Whether ``text`` has at least one CJK character (see :func:`count_cjk`)."""
    return any(_is_cjk(ch) for ch in text)


_QUERY_TOKEN = re.compile(r'"[^"]*"\*?|\S+')


def quote_fts_query(query: str) -> str:
    """Make a user query safe for FTS5 ``MATCH`` with as little rewriting as possible.

    Balanced ``"..."`` phrases pass through; every other whitespace-separated token has its stray
    double quotes removed and is wrapped in double quotes, keeping one trailing ``*`` as a prefix
    marker. Operators lose their meaning (``OR`` becomes the literal word "or").
    """
    out: list[str] = []
    for token in _QUERY_TOKEN.findall(query):
        if token.startswith('"') and token.rstrip("*").endswith('"') and len(token.rstrip("*")) > 1:
            if token.rstrip("*").strip('"').strip():
                out.append(token)
            continue
        prefix = token.endswith("*")
        bare = token.replace('"', "").rstrip("*")
        if bare:
            out.append(f'"{bare}"' + ("*" if prefix else ""))
    return " ".join(out)


def _like_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _context_text(value: Any) -> str:
    content = _decode_content(value)
    if isinstance(content, list):
        parts = [
            str(p.get("text", ""))
            for p in content
            if isinstance(p, dict) and p.get("type") == "text" and p.get("text")
        ]
        content = " ".join(parts) if parts else "[multimodal content]"
    if not isinstance(content, str):
        return ""
    return content[:200]


# Neighbours of one message in its session by (timestamp, id), plus the message itself. The
# redundant bare timestamp bounds let SQLite use idx_messages_session as a range.
_CONTEXT_SQL = """
SELECT role, content FROM (
    SELECT 0 AS k, role, content FROM (
        SELECT m.role, m.content FROM messages AS m, messages AS t
        WHERE t.id = :id AND m.session_id = t.session_id
          AND m.timestamp <= t.timestamp AND (m.timestamp < t.timestamp OR m.id < t.id)
        ORDER BY m.timestamp DESC, m.id DESC LIMIT 1
    )
    UNION ALL
    SELECT 1 AS k, role, content FROM messages WHERE id = :id
    UNION ALL
    SELECT 2 AS k, role, content FROM (
        SELECT m.role, m.content FROM messages AS m, messages AS t
        WHERE t.id = :id AND m.session_id = t.session_id
          AND m.timestamp >= t.timestamp AND (m.timestamp > t.timestamp OR m.id > t.id)
        ORDER BY m.timestamp, m.id LIMIT 1
    )
) ORDER BY k
"""

_SEARCH_COLUMNS = (
    "m.id, m.session_id, m.role, {snippet} AS snippet, m.content, m.timestamp, m.tool_name, "
    "s.source, s.model, s.started_at AS session_started"
)

# Session row + preview (first user message, newlines flattened, 63 chars) + last activity.
_RICH_SELECT = """
SELECT s.*,
    COALESCE((
        SELECT substr(replace(replace(m.content, char(10), ' '), char(13), ' '), 1, 63)
        FROM messages AS m
        WHERE m.session_id = s.id AND m.role = 'user' AND m.content IS NOT NULL
        ORDER BY m.timestamp, m.id LIMIT 1
    ), '') AS _preview_raw,
    COALESCE((SELECT MAX(m2.timestamp) FROM messages AS m2 WHERE m2.session_id = s.id), s.started_at)
        AS last_active
FROM sessions AS s
"""

_VISIBLE_ONLY = """(
    s.parent_session_id IS NULL
    OR EXISTS (
        SELECT 1 FROM sessions AS p
        WHERE p.id = s.parent_session_id AND p.end_reason = 'branched' AND s.started_at >= p.ended_at
    )
)"""

_TIP_OVERRIDES = (
    "id",
    "ended_at",
    "end_reason",
    "message_count",
    "tool_call_count",
    "title",
    "last_active",
    "preview",
    "model",
    "system_prompt",
)


def _finish_rich_row(row: sqlite3.Row) -> dict[str, Any]:
    data = dict(row)
    raw = (data.pop("_preview_raw") or "").strip()
    data["preview"] = raw[:60] + "..." if len(raw) > 60 else raw
    return data


# --------------------------------------------------------------------------------------------
# The store
# --------------------------------------------------------------------------------------------


class BaselineStore:
    """Upstream-equivalent conversation store on one ``sqlite3`` connection.

    ``path`` is a filesystem path (``str`` or ``os.PathLike``); its parent directory is created.
    """

    WRITE_MAX_RETRIES = 15
    WRITE_RETRY_MIN_S = 0.020
    WRITE_RETRY_MAX_S = 0.150
    CHECKPOINT_EVERY_N_WRITES = 50

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._write_count = 0
        conn = sqlite3.connect(str(self.path), check_same_thread=False, timeout=1.0, isolation_level=None)
        conn.row_factory = sqlite3.Row
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA foreign_keys=ON")
        self._conn: sqlite3.Connection | None = conn
        self._init_schema(conn)

    # -- set-up ------------------------------------------------------------------------------

    @staticmethod
    def _declared_columns() -> dict[str, dict[str, str]]:
        """Column definitions of the main schema, rebuilt from a scratch in-memory database."""
        scratch = sqlite3.connect(":memory:")
        try:
            scratch.executescript(_MAIN_SCHEMA)
            tables = [r[0] for r in scratch.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
            declared: dict[str, dict[str, str]] = {}
            for table in tables:
                cols: dict[str, str] = {}
                info = scratch.execute(f'PRAGMA table_info("{table}")').fetchall()
                for _cid, name, ctype, notnull, default, pk in info:
                    expr = ctype or ""
                    if notnull and not pk:
                        expr += " NOT NULL"
                    if default is not None:
                        expr += f" DEFAULT {default}"
                    cols[name] = expr
                declared[table] = cols
            return declared
        finally:
            scratch.close()

    def _init_schema(self, conn: sqlite3.Connection) -> None:
        conn.executescript(_MAIN_SCHEMA)
        # Add any declared column the live tables lack (a no-op on a fresh file).
        for table, columns in self._declared_columns().items():
            live = {r[1] for r in conn.execute(f'PRAGMA table_info("{table}")')}
            for name, expr in columns.items():
                if name not in live:
                    try:
                        conn.execute(f'ALTER TABLE "{table}" ADD COLUMN "{name}" {expr}')
                    except sqlite3.OperationalError as exc:
                        log.debug("column %s.%s not added: %s", table, name, exc)
        row = conn.execute("SELECT version FROM schema_version LIMIT 1").fetchone()
        if row is None:
            conn.execute("INSERT INTO schema_version (version) VALUES (?)", (SCHEMA_VERSION,))
        elif row[0] < SCHEMA_VERSION:
            raise RuntimeError(f"baseline store does not migrate (file is at version {row[0]})")
        with contextlib.suppress(sqlite3.OperationalError):
            conn.execute(_TITLE_INDEX)
        for table, script in (("messages_fts", _WORD_FTS), ("messages_fts_trigram", _TRIGRAM_FTS)):
            try:
                conn.execute(f"SELECT * FROM {table} LIMIT 0")
            except sqlite3.OperationalError:
                conn.executescript(script)

    @property
    def conn(self) -> sqlite3.Connection:
        """The open connection (``AttributeError``-free check for use after :meth:`close`)."""
        if self._conn is None:
            raise sqlite3.ProgrammingError("store is closed")
        return self._conn

    # -- write primitive ---------------------------------------------------------------------

    def _execute_write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn`` in a ``BEGIN IMMEDIATE`` transaction, retrying on lock contention."""
        for attempt in range(1, self.WRITE_MAX_RETRIES + 1):
            try:
                with self._lock:
                    conn = self.conn
                    conn.execute("BEGIN IMMEDIATE")
                    try:
                        result = fn(conn)
                        conn.commit()
                    except BaseException:
                        with contextlib.suppress(Exception):
                            conn.rollback()
                        raise
            except sqlite3.OperationalError as exc:
                message = str(exc).lower()
                if attempt < self.WRITE_MAX_RETRIES and ("locked" in message or "busy" in message):
                    time.sleep(random.uniform(self.WRITE_RETRY_MIN_S, self.WRITE_RETRY_MAX_S))
                    continue
                raise
            self._write_count += 1
            if self._write_count % self.CHECKPOINT_EVERY_N_WRITES == 0:
                self._try_checkpoint()
            return result
        raise AssertionError("unreachable")  # pragma: no cover

    def _try_checkpoint(self) -> None:
        with self._lock:
            try:
                self.conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
            except sqlite3.Error as exc:
                log.debug("checkpoint failed: %s", exc)

    # -- sessions ----------------------------------------------------------------------------

    def create_session(
        self,
        session_id: str,
        source: str,
        model: str | None = None,
        parent_session_id: str | None = None,
        *,
        model_config: dict[str, Any] | None = None,
        system_prompt: str | None = None,
        user_id: str | None = None,
    ) -> str:
        """Insert the session row unless it exists (first write wins); return ``session_id``."""
        config = _json_or_null(model_config)
        now = time.time()

        def write(conn: sqlite3.Connection) -> None:
            conn.execute(
                "INSERT OR IGNORE INTO sessions (id, source, user_id, model, model_config, system_prompt,"
                " parent_session_id, started_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (session_id, source, user_id, model, config, system_prompt, parent_session_id, now),
            )

        self._execute_write(write)
        return session_id

    def end_session(self, session_id: str, end_reason: str) -> None:
        """Mark a live session ended; a second call changes nothing."""
        now = time.time()
        self._execute_write(
            lambda conn: conn.execute(
                "UPDATE sessions SET ended_at = ?, end_reason = ? WHERE id = ? AND ended_at IS NULL",
                (now, end_reason, session_id),
            )
        )

    def set_session_title(self, session_id: str, title: str | None) -> bool:
        """Set (or clear, with an empty title) a session's unique title; ``False`` if no such session."""
        cleaned = _clean_title(title)

        def write(conn: sqlite3.Connection) -> int:
            if cleaned is not None:
                other = conn.execute(
                    "SELECT id FROM sessions WHERE title = ? AND id != ?", (cleaned, session_id)
                ).fetchone()
                if other is not None:
                    raise ValueError(f"Title '{cleaned}' is already in use by session {other[0]}")
            return conn.execute("UPDATE sessions SET title = ? WHERE id = ?", (cleaned, session_id)).rowcount

        return self._execute_write(write) > 0

    # -- messages ----------------------------------------------------------------------------

    def append_message(
        self,
        session_id: str,
        role: str,
        content: Any = None,
        tool_name: str | None = None,
        tool_calls: Any = None,
        tool_call_id: str | None = None,
        token_count: int | None = None,
        finish_reason: str | None = None,
        *,
        reasoning: str | None = None,
        reasoning_content: str | None = None,
        reasoning_details: Any = None,
        codex_reasoning_items: Any = None,
        codex_message_items: Any = None,
    ) -> int:
        """Insert one message and bump the session's counters in the same transaction.

        ``message_count`` grows by one for every role; ``tool_call_count`` by ``len(tool_calls)``
        for a list and by one for any other non-``None`` value. Returns the new message id.
        """
        return self._execute_write(
            self._message_write(
                session_id,
                role,
                content,
                tool_name,
                tool_calls,
                tool_call_id,
                token_count,
                finish_reason,
                reasoning=reasoning,
                reasoning_content=reasoning_content,
                reasoning_details=reasoning_details,
                codex_reasoning_items=codex_reasoning_items,
                codex_message_items=codex_message_items,
            )
        )

    def append_in_one_transaction(self, calls: Sequence[tuple[str, dict[str, Any]]]) -> list[int]:
        """``append_message(session_id, **kwargs)`` for each ``(session_id, kwargs)`` of
        ``calls``, all in one transaction: one commit, one fsync. Not upstream's API: the
        ceiling a perfect group commit could reach (benchmarks.bench_targets)."""
        writes = [self._message_write(session_id, **kwargs) for session_id, kwargs in calls]
        return self._execute_write(lambda conn: [write(conn) for write in writes])

    def _message_write(
        self,
        session_id: str,
        role: str,
        content: Any = None,
        tool_name: str | None = None,
        tool_calls: Any = None,
        tool_call_id: str | None = None,
        token_count: int | None = None,
        finish_reason: str | None = None,
        *,
        reasoning: str | None = None,
        reasoning_content: str | None = None,
        reasoning_details: Any = None,
        codex_reasoning_items: Any = None,
        codex_message_items: Any = None,
    ) -> Callable[[sqlite3.Connection], int]:
        stored_content = _encode_content(content)
        calls_json = _json_or_null(tool_calls)
        details_json = _json_or_null(reasoning_details)
        codex_reasoning_json = _json_or_null(codex_reasoning_items)
        codex_message_json = _json_or_null(codex_message_items)
        # A list counts its calls; any other non-None value (even {}) counts as one call.
        n_calls = len(tool_calls) if isinstance(tool_calls, list) else int(tool_calls is not None)
        now = time.time()

        def write(conn: sqlite3.Connection) -> int:
            cur = conn.execute(
                "INSERT INTO messages (session_id, role, content, tool_call_id, tool_calls, tool_name,"
                " timestamp, token_count, finish_reason, reasoning, reasoning_content, reasoning_details,"
                " codex_reasoning_items, codex_message_items)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    session_id,
                    role,
                    stored_content,
                    tool_call_id,
                    calls_json,
                    tool_name,
                    now,
                    token_count,
                    finish_reason,
                    reasoning,
                    reasoning_content,
                    details_json,
                    codex_reasoning_json,
                    codex_message_json,
                ),
            )
            if n_calls:
                conn.execute(
                    "UPDATE sessions SET message_count = message_count + 1,"
                    " tool_call_count = tool_call_count + ? WHERE id = ?",
                    (n_calls, session_id),
                )
            else:
                conn.execute(
                    "UPDATE sessions SET message_count = message_count + 1 WHERE id = ?", (session_id,)
                )
            assert cur.lastrowid is not None
            return cur.lastrowid

        return write

    def get_messages_as_conversation(self, session_id: str) -> list[dict[str, Any]]:
        """Replay a session as OpenAI-style message dicts, oldest first.

        User and assistant text is stripped of recalled-memory blocks and trimmed; tool-call JSON
        is decoded; assistant-only fields appear on assistant messages when set.
        """
        with self._lock:
            rows = self.conn.execute(
                "SELECT role, content, tool_call_id, tool_calls, tool_name, finish_reason, reasoning,"
                " reasoning_content, reasoning_details, codex_reasoning_items, codex_message_items"
                " FROM messages WHERE session_id = ? ORDER BY timestamp, id",
                (session_id,),
            ).fetchall()
        out: list[dict[str, Any]] = []
        for row in rows:
            role = row["role"]
            content = _decode_content(row["content"])
            if role in ("user", "assistant") and isinstance(content, str):
                content = _strip_memory_context(content).strip()
            msg: dict[str, Any] = {"role": role, "content": content}
            if row["tool_call_id"]:
                msg["tool_call_id"] = row["tool_call_id"]
            if row["tool_name"]:
                msg["tool_name"] = row["tool_name"]
            if row["tool_calls"]:
                msg["tool_calls"] = _loads_or(row["tool_calls"], [])
            if role == "assistant":
                if row["finish_reason"]:
                    msg["finish_reason"] = row["finish_reason"]
                if row["reasoning"]:
                    msg["reasoning"] = row["reasoning"]
                if row["reasoning_content"] is not None:
                    msg["reasoning_content"] = row["reasoning_content"]
                for key in ("reasoning_details", "codex_reasoning_items", "codex_message_items"):
                    if row[key]:
                        msg[key] = _loads_or(row[key], None)
            out.append(msg)
        return out

    # -- search ------------------------------------------------------------------------------

    def search_messages(
        self,
        query: str,
        source_filter: Sequence[str] | None = None,
        limit: int = 20,
        offset: int = 0,
    ) -> list[dict[str, Any]]:
        """Full-text search, routed like upstream: word index, trigram index, or LIKE scan.

        Each hit carries a snippet and a ``context`` of up to three messages (previous, the hit,
        next) fetched with one extra query per hit.
        """
        if not query or not query.strip():
            return []
        if isinstance(source_filter, str):
            source_filter = [source_filter]
        where: list[str] = []
        params: list[Any] = []
        if source_filter is not None:
            where.append(f"s.source IN ({', '.join('?' for _ in source_filter)})")
            params.extend(source_filter)

        if not contains_cjk(query):
            match = quote_fts_query(query)
            if not match:
                return []
            rows = self._fts_search("messages_fts", match, where, params, limit, offset, swallow=True)
            if rows is None:
                return []
        else:
            raw = query.strip().strip('"').strip()
            if count_cjk(raw) >= 3:
                terms = [
                    tok if tok.upper() in ("AND", "OR", "NOT") else '"' + tok.replace('"', '""') + '"'
                    for tok in raw.split()
                ]
                rows = (
                    self._fts_search(
                        "messages_fts_trigram", " ".join(terms), where, params, limit, offset, swallow=True
                    )
                    or []
                )
            else:
                rows = self._like_search(raw, where, params, limit, offset)

        results: list[dict[str, Any]] = []
        for row in rows:
            hit = dict(row)
            hit.pop("content", None)
            with self._lock:
                try:
                    ctx_rows = self.conn.execute(_CONTEXT_SQL, {"id": hit["id"]}).fetchall()
                    hit["context"] = [
                        {"role": r["role"], "content": _context_text(r["content"])} for r in ctx_rows
                    ]
                except sqlite3.Error:
                    hit["context"] = []
            results.append(hit)
        return results

    def _fts_search(
        self,
        table: str,
        match: str,
        where: list[str],
        params: list[Any],
        limit: int,
        offset: int,
        *,
        swallow: bool,
    ) -> list[sqlite3.Row] | None:
        columns = _SEARCH_COLUMNS.format(snippet=f"snippet({table}, 0, '>>>', '<<<', '...', 40)")
        conditions = " AND ".join([f"{table} MATCH ?", *where])
        sql = (
            f"SELECT {columns} FROM {table}"
            f" JOIN messages AS m ON m.id = {table}.rowid"
            " JOIN sessions AS s ON s.id = m.session_id"
            f" WHERE {conditions} ORDER BY rank LIMIT ? OFFSET ?"
        )
        with self._lock:
            try:
                return self.conn.execute(sql, [match, *params, limit, offset]).fetchall()
            except sqlite3.OperationalError:
                if not swallow:
                    raise
                return None

    def _like_search(
        self, raw: str, where: list[str], params: list[Any], limit: int, offset: int
    ) -> list[sqlite3.Row]:
        pattern = f"%{_like_escape(raw)}%"
        snippet = "substr(m.content, max(1, instr(m.content, ?) - 40), 120)"
        conditions = " AND ".join(
            [
                "(m.content LIKE ? ESCAPE '\\' OR m.tool_name LIKE ? ESCAPE '\\'"
                " OR m.tool_calls LIKE ? ESCAPE '\\')",
                *where,
            ]
        )
        sql = (
            f"SELECT {_SEARCH_COLUMNS.format(snippet=snippet)}"
            " FROM messages AS m JOIN sessions AS s ON s.id = m.session_id"
            f" WHERE {conditions} ORDER BY m.timestamp DESC LIMIT ? OFFSET ?"
        )
        with self._lock:
            return self.conn.execute(sql, [raw, pattern, pattern, pattern, *params, limit, offset]).fetchall()

    # -- listing -----------------------------------------------------------------------------

    def list_sessions_rich(
        self,
        source: str | None = None,
        limit: int = 20,
        offset: int = 0,
        *,
        include_children: bool = False,
        project_compression_tips: bool = True,
    ) -> list[dict[str, Any]]:
        """Newest-first session list with a first-message preview and last activity.

        Child sessions are hidden unless they are branches. A compression root is shown with its
        continuation tip's id, counters, title, preview and activity.
        """
        where: list[str] = []
        params: list[Any] = []
        if not include_children:
            where.append(_VISIBLE_ONLY)
        if source:
            where.append("s.source = ?")
            params.append(source)
        sql = _RICH_SELECT
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY s.started_at DESC LIMIT ? OFFSET ?"
        with self._lock:
            rows = self.conn.execute(sql, [*params, limit, offset]).fetchall()
        sessions = [_finish_rich_row(r) for r in rows]
        if project_compression_tips and not include_children:
            for data in sessions:
                if data.get("end_reason") != "compression":
                    continue
                tip_id = self.get_compression_tip(data["id"])
                if tip_id == data["id"]:
                    continue
                tip = self._rich_row(tip_id)
                if tip is None:
                    continue
                root_id = data["id"]
                for key in _TIP_OVERRIDES:
                    data[key] = tip.get(key)
                data["_lineage_root_id"] = root_id
        return sessions

    def _rich_row(self, session_id: str) -> dict[str, Any] | None:
        with self._lock:
            row = self.conn.execute(_RICH_SELECT + " WHERE s.id = ?", (session_id,)).fetchone()
        return _finish_rich_row(row) if row is not None else None

    def get_compression_tip(self, session_id: str) -> str:
        """Follow compression continuations forward (at most 100 steps) and return the last id."""
        current = session_id
        for _ in range(100):
            with self._lock:
                row = self.conn.execute(
                    "SELECT c.id FROM sessions AS c JOIN sessions AS p ON p.id = c.parent_session_id"
                    " WHERE c.parent_session_id = ? AND p.end_reason = 'compression'"
                    " AND p.ended_at IS NOT NULL AND c.started_at >= p.ended_at"
                    " ORDER BY c.started_at DESC LIMIT 1",
                    (current,),
                ).fetchone()
            if row is None:
                break
            current = row[0]
        return current

    # -- counts and lifecycle ----------------------------------------------------------------

    def session_count(self, source: str | None = None) -> int:
        """Number of sessions, optionally for one source."""
        sql, args = (
            ("SELECT COUNT(*) FROM sessions WHERE source = ?", (source,))
            if source
            else (
                "SELECT COUNT(*) FROM sessions",
                (),
            )
        )
        with self._lock:
            return int(self.conn.execute(sql, args).fetchone()[0])

    def message_count(self, session_id: str | None = None) -> int:
        """Number of messages, optionally for one session."""
        sql, args = (
            ("SELECT COUNT(*) FROM messages WHERE session_id = ?", (session_id,))
            if session_id
            else (
                "SELECT COUNT(*) FROM messages",
                (),
            )
        )
        with self._lock:
            return int(self.conn.execute(sql, args).fetchone()[0])

    def close(self) -> None:
        """Checkpoint (best effort) and close the connection; calling it twice is harmless."""
        with self._lock:
            if self._conn is None:
                return
            with contextlib.suppress(sqlite3.Error):
                self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
            self._conn.close()
            self._conn = None

    def __enter__(self) -> BaselineStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
