"""Upstream Hermes' schema 17: routing, workspace, handoff, compaction and undo columns.

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-06

Why: upstream Hermes moved from schema 11 to 17 (and added several columns without a
version bump). Its current code reads and writes every one of them, so a file it shares
with this store must carry them, with upstream's names, types and defaults:

* ``sessions``: gateway routing (``session_key``, ``chat_id``, ``chat_type``,
  ``thread_id``), the working directory and git metadata (``cwd``, ``git_branch``,
  ``git_repo_root``), the cross-platform handoff state machine (``handoff_state``,
  ``handoff_platform``, ``handoff_error``), a compression failure's back-off
  (``compression_failure_cooldown_until``, ``compression_failure_error``), and the
  ``rewind_count``/``archived`` flags (NOT NULL, default 0);
* ``messages``: ``platform_message_id``, ``observed`` (default 0), and the ``active``
  (default 1) / ``compacted`` (default 0) pair that in-place compaction and undo flip;
* the ``compression_locks`` table and the two Telegram topic tables, with
  ``state_meta['telegram_dm_topic_schema_version'] = '2'``, the shape upstream checks
  before it uses them. Upstream creates the topic tables when a chat first opts in: on
  SQLite they are created here only for a file that already has them (the store makes
  them on first use, as upstream does); PostgreSQL always gets them;
* upstream's indexes on them.

Every step only adds what is missing, because files upstream opened already hold some or
all of these (and may hold columns upstream later dropped, which are left untouched).
Existing rows take the defaults: every message stays live, except those a downgrade of
this revision set aside (``hermes_hidden_messages``), which come back hidden as they were.

Two data fixes, both idempotent:

* upstream's version-16 tagging of delegate sub-agent sessions: a child session that is
  neither a ``/branch`` (``_branched_from`` marker, or a parent that ended ``branched``
  before the child started) nor a compression continuation (parent ended
  ``compression``) gets ``model_config._delegate_from = parent_session_id``, so lists
  hide it and deletes take it with its parent. Only for a database that was below 16
  (a file upstream already brought to 16 or 17 was fixed by upstream); a
  ``model_config`` that is not a JSON object is left alone. Upstream's second heuristic
  of that version (untitled roots with a tool message become ``__orphaned__``) is not
  applied: it hides ordinary conversations (``docs/upgrading.md``);
* a Telegram bindings table of upstream's first shape (its ``session_id`` foreign key
  without ``ON DELETE CASCADE``) is rebuilt with the cascade, keeping every binding whose
  session exists (SQLite cannot alter a foreign key).

Online on PostgreSQL (``docs/postgresql.md``): columns are added under the short retried
lock timeout (a constant default is a catalog change, never a rewrite), the new tables
are created empty, indexes are built ``CONCURRENTLY``, and the tagging runs in ranges of
session ids, each its own transaction; a killed run is completed by the next.
"""

from __future__ import annotations

import logging

import sqlalchemy as sa
from alembic import op

from hermes_store.schema.migration_ops import (
    column_names,
    create_index_concurrently,
    dialect_name,
    drop_index_concurrently,
    execute_all,
    execute_with_lock_retry,
    in_store_schema,
    is_offline,
    outside_transaction,
    squawk_ignore,
    table_names,
    update_by_key_ranges,
    with_lock_retry,
)
from hermes_store.schema.telegram_topic_ddl import (
    BINDINGS_WITHOUT_SESSION,
    DROPPED_BINDINGS_WARNING,
    REBUILT_BINDINGS,
    cascade_rebuild,
)

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None
schema_version = 17

log = logging.getLogger("hermes_store.migrations")

DELEGATE_TAGGING_FIXED_IN = 16
"""The upstream schema version whose own upgrade tagged delegate children: a database
that already reached it needs no tagging."""

FLOAT8 = {"sqlite": "REAL", "postgresql": "double precision"}
"""Upstream's REAL (8 bytes on SQLite); PostgreSQL's REAL has 4, so double precision."""

SESSION_COLUMNS: tuple[tuple[str, str], ...] = (
    ("session_key", "TEXT"),
    ("chat_id", "TEXT"),
    ("chat_type", "TEXT"),
    ("thread_id", "TEXT"),
    ("cwd", "TEXT"),
    ("git_branch", "TEXT"),
    ("git_repo_root", "TEXT"),
    ("handoff_state", "TEXT"),
    ("handoff_platform", "TEXT"),
    ("handoff_error", "TEXT"),
    ("compression_failure_cooldown_until", "{float8}"),
    ("compression_failure_error", "TEXT"),
    ("rewind_count", "INTEGER NOT NULL DEFAULT 0"),
    ("archived", "INTEGER NOT NULL DEFAULT 0"),
)
MESSAGE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("platform_message_id", "TEXT"),
    ("observed", "INTEGER DEFAULT 0"),
    ("active", "INTEGER NOT NULL DEFAULT 1"),
    ("compacted", "INTEGER NOT NULL DEFAULT 0"),
)
"""Columns as upstream declares them (``{float8}``: see :data:`FLOAT8`)."""

COMPRESSION_LOCKS = """CREATE TABLE IF NOT EXISTS compression_locks (
    session_id TEXT {pk},
    holder TEXT NOT NULL,
    acquired_at {float8} NOT NULL,
    expires_at {float8} NOT NULL{pk_constraint}
)"""
TOPIC_MODE = """CREATE TABLE IF NOT EXISTS telegram_dm_topic_mode (
    chat_id TEXT {pk},
    user_id TEXT NOT NULL,
    enabled INTEGER NOT NULL DEFAULT 1,
    activated_at {float8} NOT NULL,
    updated_at {float8} NOT NULL,
    has_topics_enabled INTEGER,
    allows_users_to_create_topics INTEGER,
    capability_checked_at {float8},
    intro_message_id TEXT,
    pinned_message_id TEXT{pk_constraint}
)"""
TOPIC_BINDINGS = """CREATE TABLE {if_not_exists}{name} (
    chat_id TEXT NOT NULL,
    thread_id TEXT NOT NULL,
    user_id TEXT NOT NULL,
    session_key TEXT NOT NULL,
    session_id TEXT NOT NULL,
    managed_mode TEXT NOT NULL DEFAULT 'auto',
    linked_at {float8} NOT NULL,
    updated_at {float8} NOT NULL,
    {pk}PRIMARY KEY (chat_id, thread_id),
    {fk}FOREIGN KEY (session_id) REFERENCES sessions(id) ON DELETE CASCADE
)"""
"""Upstream's bindings table; the foreign key is written as a table constraint (the same
key as upstream's column clause) because SQLAlchemy reads ``ON DELETE`` only from that form."""
BINDING_COLUMNS = "chat_id, thread_id, user_id, session_key, session_id, managed_mode, linked_at, updated_at"
NEW_TABLE_INDEXES: dict[str, str] = {
    "idx_compression_locks_expires": "INDEX IF NOT EXISTS idx_compression_locks_expires "
    "ON compression_locks (expires_at)",
    "idx_telegram_dm_topic_bindings_session": "UNIQUE INDEX IF NOT EXISTS "
    "idx_telegram_dm_topic_bindings_session ON telegram_dm_topic_bindings (session_id)",
    "idx_telegram_dm_topic_bindings_user": "INDEX IF NOT EXISTS idx_telegram_dm_topic_bindings_user "
    "ON telegram_dm_topic_bindings (user_id, chat_id)",
}
"""Indexes of the new tables (``CREATE `` + the text)."""
NEW_TABLES = ("telegram_dm_topic_bindings", "telegram_dm_topic_mode", "compression_locks")
TOPIC_TABLES = ("telegram_dm_topic_mode", "telegram_dm_topic_bindings")
"""Upstream's opt-in tables: on SQLite created here only for a file that already has
one (the store creates them when topic mode is first used); on PostgreSQL always."""

INDEXES: dict[str, str] = {
    "idx_sessions_source_id": "sessions (source, id)",
    "idx_sessions_session_key": "sessions (session_key, started_at DESC)",
    "idx_sessions_gateway_peer": "sessions (source, user_id, chat_id, chat_type, thread_id, started_at DESC)",
    "idx_sessions_handoff_state": "sessions (handoff_state, started_at)",
    "idx_messages_session_active": "messages (session_id, active, timestamp)",
    "idx_messages_platform_msg_id": (
        "messages (session_id, platform_message_id) WHERE platform_message_id IS NOT NULL"
    ),
}
"""Upstream's indexes on the existing tables, by name (the same names, so a file upstream
already indexed is not indexed twice)."""

TOPIC_SCHEMA_KEY = "telegram_dm_topic_schema_version"
MARK_TOPIC_SCHEMA = (
    f"INSERT INTO state_meta (key, value) VALUES ('{TOPIC_SCHEMA_KEY}', '2') "
    "ON CONFLICT (key) DO UPDATE SET value = '2' "
    "WHERE state_meta.value IS NULL OR state_meta.value IN ('', '0', '1')"
)
"""Record that the topic tables have their second shape (cascade), never lowering a
later number."""


# --- the delegate tagging ------------------------------------------------------------------

_SQLITE_OBJECT = (
    "CASE WHEN {a}.model_config IS NULL THEN '{{}}' "
    "WHEN json_valid({a}.model_config) THEN "
    "CASE json_type({a}.model_config) WHEN 'object' THEN {a}.model_config END END"
)
"""SQLite: the session's ``model_config`` when it is a JSON object (``'{}'`` when NULL),
else NULL. CASE keeps ``json_type`` away from text that is not JSON, where it raises."""

_SERVER_OBJECT = "pg_temp.hermes_json_object({a}.model_config)"
"""PostgreSQL: the same, as ``jsonb``, through the session-local function below."""

SERVER_OBJECT_FUNCTION = """CREATE OR REPLACE FUNCTION pg_temp.hermes_json_object(value text) RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE AS $fn$
DECLARE
    parsed jsonb;
BEGIN
    IF value IS NULL THEN
        RETURN '{}'::jsonb;
    END IF;
    parsed := value::jsonb;
    RETURN CASE WHEN jsonb_typeof(parsed) = 'object' THEN parsed END;
EXCEPTION WHEN data_exception THEN
    RETURN NULL;
END
$fn$"""
"""A ``model_config`` text as a ``jsonb`` object ('{}' for NULL), NULL when it is not one
(not JSON, or JSON of another kind). In ``pg_temp``: it lives only as long as the
migration's session and is never part of the schema."""

SERVER_TAG_FUNCTION = """CREATE OR REPLACE FUNCTION pg_temp.hermes_tagged(value text, parent text)
RETURNS text LANGUAGE plpgsql IMMUTABLE AS $fn$
DECLARE
    parsed jsonb := pg_temp.hermes_json_object(value);
    tag text := '"_delegate_from":' || to_json(parent)::text;
    object_end text;
BEGIN
    IF value IS NULL THEN
        RETURN '{' || tag || '}';
    END IF;
    IF parsed ? '_delegate_from' THEN
        RETURN jsonb_set(parsed, '{_delegate_from}', to_jsonb(parent))::text;
    END IF;
    object_end := rtrim(value, E' \\t\\n\\r');
    RETURN left(object_end, -1) || CASE WHEN parsed = '{}'::jsonb THEN '' ELSE ',' END || tag
        || '}' || substr(value, length(object_end) + 1);
END
$fn$"""
"""A JSON object's ``model_config`` text with ``_delegate_from`` added behind its last
member: the rest of the text is kept byte for byte (jsonb would turn ``1e16`` into an
integer, sort the keys and respace them; SQLite's ``json_set`` keeps numbers and order).
A key already present as JSON ``null`` is set through jsonb, so as not to write it twice."""


def _delegate_condition(obj: str, json_field: str, a: str) -> str:
    """Rows of ``sessions`` aliased ``a`` that are delegate children still untagged."""
    config = obj.format(a=a)
    return (
        f"{a}.parent_session_id IS NOT NULL "
        f"AND {config} IS NOT NULL "
        f"AND {json_field.format(obj=config, key='_delegate_from')} IS NULL "
        f"AND {json_field.format(obj=config, key='_branched_from')} IS NULL "
        f"AND NOT EXISTS (SELECT 1 FROM sessions p WHERE p.id = {a}.parent_session_id "
        f"AND p.end_reason = 'branched' AND {a}.started_at >= p.ended_at) "
        f"AND NOT EXISTS (SELECT 1 FROM sessions p WHERE p.id = {a}.parent_session_id "
        "AND p.end_reason = 'compression')"
    )


SQLITE_TAG_DELEGATES = (
    "UPDATE sessions SET model_config = json_set("
    f"{_SQLITE_OBJECT.format(a='sessions')}, '$._delegate_from', parent_session_id) WHERE "
    + _delegate_condition(_SQLITE_OBJECT, "json_extract({obj}, '$.{key}')", "sessions")
)
SERVER_TAG_DELEGATES = (
    "UPDATE sessions AS c SET model_config = "
    "pg_temp.hermes_tagged(c.model_config, c.parent_session_id) "
    "WHERE {range} AND " + _delegate_condition(_SERVER_OBJECT, "({obj} ->> '{key}')", "c")
)
"""The tagging on each backend; the server's holds ``{range}`` for
:func:`~hermes_store.schema.migration_ops.update_by_key_ranges`."""


def _version_before_upgrade() -> int | None:
    """The upstream version the database held as this revision began (``None`` offline:
    a ``--sql`` script runs on a database this history built, which was at 11)."""
    if is_offline():
        return None
    value = op.get_bind().exec_driver_sql("SELECT MAX(version) FROM schema_version").scalar()
    return None if value is None else int(value)


def _tag_delegate_children() -> None:
    version = _version_before_upgrade()
    if version is not None and version >= DELEGATE_TAGGING_FIXED_IN:
        return
    if dialect_name() == "sqlite":
        op.execute(sa.text(SQLITE_TAG_DELEGATES))
        return
    op.execute(sa.text(SERVER_OBJECT_FUNCTION))
    op.execute(sa.text(SERVER_TAG_FUNCTION))
    update_by_key_ranges("tagging delegate sessions", "sessions", "id", SERVER_TAG_DELEGATES)


# --- the rows a downgrade sets aside ---------------------------------------------------------

HIDDEN_MESSAGES = "hermes_hidden_messages"
"""Where a downgrade keeps the rewound and compacted-away messages (``active = 0``) until
the next upgrade: the previous release has no ``active`` flag, and would replay and search
them as live messages."""


def _set_hidden_messages_aside() -> list[str]:
    """The statements that move the hidden messages out of ``messages`` (none when there
    are none). Each may run again after an interruption: rows already set aside are not
    copied twice."""
    if is_offline() or "active" not in column_names("messages"):
        return []
    hidden = op.get_bind().exec_driver_sql("SELECT count(*) FROM messages WHERE active = 0").scalar()
    if not hidden:
        return []
    log.warning(
        "setting %d rewound or compacted-away message(s) aside in %s: the next upgrade puts them back",
        hidden,
        HIDDEN_MESSAGES,
    )
    return [
        f"CREATE TABLE IF NOT EXISTS {HIDDEN_MESSAGES} AS SELECT * FROM messages WHERE active = 0",
        f"INSERT INTO {HIDDEN_MESSAGES} SELECT * FROM messages m WHERE m.active = 0 "
        f"AND NOT EXISTS (SELECT 1 FROM {HIDDEN_MESSAGES} h WHERE h.id = m.id)",
        "DELETE FROM messages WHERE active = 0",
    ]


def _hidden_messages_put_back() -> list[str]:
    """The statements that return the messages a downgrade set aside, still hidden (those
    whose session the previous release deleted meanwhile are dropped with the table)."""
    if is_offline() or HIDDEN_MESSAGES not in table_names():
        return []
    present = column_names("messages")
    columns = ", ".join(sorted(name for name in column_names(HIDDEN_MESSAGES) if name in present))
    return [
        f"INSERT INTO messages ({columns}) SELECT {columns} FROM {HIDDEN_MESSAGES} h "
        "WHERE EXISTS (SELECT 1 FROM sessions s WHERE s.id = h.session_id) "
        "AND NOT EXISTS (SELECT 1 FROM messages m WHERE m.id = h.id)",
        f"DROP TABLE {HIDDEN_MESSAGES}",
    ]


# --- SQLite --------------------------------------------------------------------------------


def _sqlite_bindings(name: str = "telegram_dm_topic_bindings", *, if_not_exists: bool = True) -> str:
    """Upstream's bindings table (second shape) as SQLite takes it, under ``name``."""
    return TOPIC_BINDINGS.format(
        if_not_exists="IF NOT EXISTS " if if_not_exists else "",
        name=name,
        fk="",
        pk="",
        float8=FLOAT8["sqlite"],
    )


def _sqlite_tables(*, with_topics: bool) -> list[str]:
    """Upstream's DDL of the new tables, as SQLite takes it (the Telegram topic tables
    only ``with_topics``)."""
    shape = {"pk": "PRIMARY KEY", "pk_constraint": "", "float8": FLOAT8["sqlite"]}
    tables = [COMPRESSION_LOCKS.format(**shape)]
    if with_topics:
        tables += [TOPIC_MODE.format(**shape), _sqlite_bindings()]
    return tables


def _bindings_lack_cascade() -> bool:
    rows = op.get_bind().exec_driver_sql("PRAGMA foreign_key_list('telegram_dm_topic_bindings')").fetchall()
    return any(row[2] == "sessions" and str(row[6] or "").upper() != "CASCADE" for row in rows)


def _rebuild_bindings_with_cascade() -> None:
    """Upstream's first bindings table, rebuilt with ``ON DELETE CASCADE`` as the store
    rebuilds it when topic mode is first used (the same statements and rows kept, see
    :func:`~hermes_store.schema.telegram_topic_ddl.cascade_rebuild`)."""
    dangling = op.get_bind().exec_driver_sql(BINDINGS_WITHOUT_SESSION).scalar()
    if dangling:
        log.warning(DROPPED_BINDINGS_WARNING, dangling)
    execute_all(cascade_rebuild(_sqlite_bindings(REBUILT_BINDINGS, if_not_exists=False), BINDING_COLUMNS))


def _sqlite_upgrade() -> None:
    for table, columns in (("sessions", SESSION_COLUMNS), ("messages", MESSAGE_COLUMNS)):
        present = column_names(table)
        for name, ddl in columns:
            if is_offline() or name not in present:
                op.execute(
                    sa.text(f"ALTER TABLE {table} ADD COLUMN {name} {ddl.format(float8=FLOAT8['sqlite'])}")
                )
    execute_all(_hidden_messages_put_back())
    # The topic tables are upstream's opt-in: a file that never opted in stays without
    # them (the store creates them on first use); one that did gets the second shape.
    present = table_names()
    topics_in_use = not is_offline() and any(table in present for table in TOPIC_TABLES)
    if "telegram_dm_topic_bindings" in present and _bindings_lack_cascade():
        _rebuild_bindings_with_cascade()
    execute_all(_sqlite_tables(with_topics=topics_in_use))
    execute_all(
        f"CREATE {index}"
        for name, index in NEW_TABLE_INDEXES.items()
        if topics_in_use or not name.startswith("idx_telegram_dm_topic")
    )
    execute_all(f"CREATE INDEX IF NOT EXISTS {name} ON {target}" for name, target in INDEXES.items())
    _tag_delegate_children()
    if topics_in_use:
        op.execute(sa.text(MARK_TOPIC_SCHEMA))


# --- PostgreSQL ----------------------------------------------------------------------------


def _server_tables() -> list[str]:
    float8 = FLOAT8["postgresql"]
    bindings = TOPIC_BINDINGS.format(
        if_not_exists="IF NOT EXISTS ",
        name="telegram_dm_topic_bindings",
        fk="CONSTRAINT fk_telegram_dm_topic_bindings_session_id_sessions ",
        pk="CONSTRAINT pk_telegram_dm_topic_bindings ",
        float8=float8,
    )
    return [
        COMPRESSION_LOCKS.format(
            pk="NOT NULL",
            pk_constraint=",\n    CONSTRAINT pk_compression_locks PRIMARY KEY (session_id)",
            float8=float8,
        ),
        TOPIC_MODE.format(
            pk="NOT NULL",
            pk_constraint=",\n    CONSTRAINT pk_telegram_dm_topic_mode PRIMARY KEY (chat_id)",
            float8=float8,
        ),
        bindings,
    ]


def _server_upgrade() -> None:
    # Upstream declares these INTEGER (flags and counters that stay small).
    squawk_ignore("prefer-bigint-over-int", "upstream's INTEGER flag and counter columns, kept")
    float8 = FLOAT8["postgresql"]
    with outside_transaction():
        for table, columns in (("sessions", SESSION_COLUMNS), ("messages", MESSAGE_COLUMNS)):
            for name, ddl in columns:
                execute_with_lock_retry(
                    f"ALTER TABLE {table} ADD COLUMN IF NOT EXISTS {name} {ddl.format(float8=float8)}"
                )
        for statement in _hidden_messages_put_back():
            execute_with_lock_retry(statement)
        with_lock_retry(
            lambda: execute_all(_server_tables()), "creating the compression-lock and Telegram topic tables"
        )
        for name, index in NEW_TABLE_INDEXES.items():
            create_index_concurrently(name, f"CREATE {index.replace('INDEX IF', 'INDEX CONCURRENTLY IF')}")
        for name, target in INDEXES.items():
            create_index_concurrently(name, f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} ON {target}")
        _tag_delegate_children()
        execute_with_lock_retry(MARK_TOPIC_SCHEMA)


def upgrade() -> None:
    if dialect_name() == "postgresql":
        _server_upgrade()
    else:
        _sqlite_upgrade()


def downgrade() -> None:
    """Remove what this revision adds; every session row and every live message stays.

    The rewound and compacted-away messages are set aside in :data:`HIDDEN_MESSAGES`
    (the previous release would replay them), and the next upgrade puts them back. The
    new tables go with their rows (compression leases, Telegram topic modes and bindings),
    and so do the new columns' values: archived sessions show in lists again. The
    delegate tags stay in ``model_config``: they are data, and revision 0018's code
    ignores them.
    """
    server = dialect_name() == "postgresql"
    if server:
        with outside_transaction():
            for name in [*INDEXES, *NEW_TABLE_INDEXES]:
                drop_index_concurrently(name)
    else:
        execute_all(f"DROP INDEX IF EXISTS {name}" for name in INDEXES)
    drops = _set_hidden_messages_aside()
    drops += [f"DROP TABLE IF EXISTS {in_store_schema(table)}" for table in NEW_TABLES]
    drops.append(f"DELETE FROM state_meta WHERE key = '{TOPIC_SCHEMA_KEY}'")
    for table, columns in (("messages", MESSAGE_COLUMNS), ("sessions", SESSION_COLUMNS)):
        present = column_names(table)
        drops.extend(
            f'ALTER TABLE "{table}" DROP COLUMN "{name}"'
            for name, _ in columns
            if is_offline() or name in present
        )
    if server:
        for statement in drops:
            execute_with_lock_retry(statement)
    else:
        execute_all(drops)
