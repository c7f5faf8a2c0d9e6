"""The Telegram DM topic tables as a SQLite store creates them on first use.

Upstream Hermes creates ``telegram_dm_topic_mode`` and ``telegram_dm_topic_bindings``
only when a chat first opts in to topic mode, and its readers take a missing table for
"no topic mode, no bindings". A SQLite store shared with upstream does the same, so a
file nobody opted in keeps no such tables. (A PostgreSQL store has them from its schema
on.) The statements are idempotent and give the shape a store at head has: bindings
whose session is deleted go with it (``ON DELETE CASCADE``).
"""

from __future__ import annotations

TOPIC_TABLES = ("telegram_dm_topic_mode", "telegram_dm_topic_bindings")
"""The two tables, in creation order."""

SCHEMA_VERSION_KEY = "telegram_dm_topic_schema_version"
SCHEMA_VERSION = "2"
"""The tables' layout version kept in ``state_meta`` (2: bindings cascade)."""

SQLITE_TOPIC_DDL = (
    """CREATE TABLE IF NOT EXISTS telegram_dm_topic_mode (
    chat_id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    enabled INTEGER NOT NULL DEFAULT 1,
    activated_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    has_topics_enabled INTEGER,
    allows_users_to_create_topics INTEGER,
    capability_checked_at REAL,
    intro_message_id TEXT,
    pinned_message_id TEXT
)""",
    """CREATE TABLE IF NOT EXISTS telegram_dm_topic_bindings (
    chat_id TEXT NOT NULL,
    thread_id TEXT NOT NULL,
    user_id TEXT NOT NULL,
    session_key TEXT NOT NULL,
    session_id TEXT NOT NULL,
    managed_mode TEXT NOT NULL DEFAULT 'auto',
    linked_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    PRIMARY KEY (chat_id, thread_id),
    FOREIGN KEY (session_id) REFERENCES sessions(id) ON DELETE CASCADE
)""",
    "CREATE UNIQUE INDEX IF NOT EXISTS idx_telegram_dm_topic_bindings_session "
    "ON telegram_dm_topic_bindings (session_id)",
    "CREATE INDEX IF NOT EXISTS idx_telegram_dm_topic_bindings_user "
    "ON telegram_dm_topic_bindings (user_id, chat_id)",
)
"""Both tables and their indexes, as the SQLite schema's own revision writes them for a
file that already had them (the same text, so every store holds one shape)."""

REBUILT_BINDINGS = "telegram_dm_topic_bindings_rebuilt"
"""The name a bindings table is rebuilt under before it takes the old one's."""

BINDINGS_WITHOUT_SESSION = (
    "SELECT count(*) FROM telegram_dm_topic_bindings WHERE session_id NOT IN (SELECT id FROM sessions)"
)
DROPPED_BINDINGS_WARNING = "dropping %d Telegram topic binding(s) whose session no longer exists"


def cascade_rebuild(create_rebuilt: str, columns: str) -> tuple[str, ...]:
    """The statements that move a bindings table of upstream's first layout (no ``ON
    DELETE CASCADE``) into the table ``create_rebuilt`` makes (named
    :data:`REBUILT_BINDINGS`), which then takes the old name. SQLite cannot change a
    foreign key in place. Its indexes are made again by the caller's DDL.

    Every binding whose session exists is kept. One whose session is gone (written with
    foreign keys off) is left out: the cascading key cannot hold it, and it routes a topic
    to nothing. Upstream copies every row under enforced foreign keys, so such a file
    fails its rebuild; the caller warns with :data:`DROPPED_BINDINGS_WARNING` when
    :data:`BINDINGS_WITHOUT_SESSION` counts any.
    """
    return (
        create_rebuilt,
        f"INSERT INTO {REBUILT_BINDINGS} ({columns}) SELECT {columns} FROM telegram_dm_topic_bindings "
        "WHERE session_id IN (SELECT id FROM sessions)",
        "DROP TABLE telegram_dm_topic_bindings",
        f"ALTER TABLE {REBUILT_BINDINGS} RENAME TO telegram_dm_topic_bindings",
    )
