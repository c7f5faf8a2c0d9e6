"""Upstream's integer schema versions and how they map onto Alembic revisions.

Revision ``000N`` is upstream schema version N for N ≤ 11; revision ``0019`` brings
whatever upstream's versions 12–17 added. A legacy database (upstream's
``schema_version`` table, no ``alembic_version``) is adopted by stamping it at the
highest revision whose objects it really has — which can be lower than the number it
claims, because upstream databases are ragged, and is at most ``0011`` — so that the
revisions above fill in whatever is missing. Its ``schema_version`` is left as it is until
the upgrade ends at 17 (an upgrade never records a lower number: upstream would redo its
data fixes), and revision 0019 reads it to know which of them are still due.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Collection

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from hermes_store.db.backends import backend_for
from hermes_store.db.profiles import table_names as profile_table_names

log = logging.getLogger(__name__)

HEAD_VERSION = 17
"""The upstream schema version a store at head holds in ``schema_version`` (revision 0019
declares it); a file claiming more was written by a newer upstream."""
LAST_NUMBERED_VERSION = 11
"""The last upstream version with a revision of its own (``0001``–``0011``). Upstream's
versions 12–17 only add columns, tables and indexes (several arrived with no version bump
at all), so one revision, ``0019``, adds whichever of them a file lacks."""
LEGACY_REVISIONS: tuple[str, ...] = tuple(f"{n:04d}" for n in range(1, LAST_NUMBERED_VERSION + 1))
"""Revisions ``0001``–``0011``, one per upstream schema version. Not the head: that is
whatever the scripts say (:func:`hermes_store.schema.revisions.history`)."""


class NewerSchemaWarning(UserWarning):
    """The database was written by a newer release; it is used as it is, never stamped down."""


def version_of_legacy_revision(revision: str | None) -> int | None:
    """Upstream schema version of revisions 0001–0011 (``"0007"`` → 7), else ``None``."""
    if revision in LEGACY_REVISIONS:
        return int(revision)
    return None


def revision_of_version(version: int) -> str:
    """Our revision id for upstream schema version ``version`` (1–11)."""
    if not 1 <= version <= LAST_NUMBERED_VERSION:
        raise ValueError(f"no revision for schema version {version}")
    return LEGACY_REVISIONS[version - 1]


# What each upstream version added, as objects we can look for. Frozen: these describe
# history, not the current models.
_COLUMNS_ADDED: dict[int, tuple[tuple[str, str], ...]] = {
    2: (("messages", "finish_reason"),),
    3: (("sessions", "title"),),
    5: tuple(
        ("sessions", name)
        for name in (
            "cache_read_tokens",
            "cache_write_tokens",
            "reasoning_tokens",
            "billing_provider",
            "billing_base_url",
            "billing_mode",
            "estimated_cost_usd",
            "actual_cost_usd",
            "cost_status",
            "cost_source",
            "pricing_version",
        )
    ),
    6: (("messages", "reasoning"), ("messages", "reasoning_details"), ("messages", "codex_reasoning_items")),
    7: (("messages", "reasoning_content"),),
    8: (("sessions", "api_call_count"),),
    9: (("messages", "codex_message_items"),),
}
_V1_COLUMNS: tuple[tuple[str, str], ...] = tuple(
    ("sessions", name)
    for name in (
        "id",
        "source",
        "user_id",
        "model",
        "model_config",
        "system_prompt",
        "parent_session_id",
        "started_at",
        "ended_at",
        "end_reason",
        "message_count",
        "tool_call_count",
        "input_tokens",
        "output_tokens",
    )
) + tuple(
    ("messages", name)
    for name in (
        "id",
        "session_id",
        "role",
        "content",
        "tool_call_id",
        "tool_calls",
        "tool_name",
        "timestamp",
        "token_count",
    )
)
FTS_TRIGGERS = (
    "messages_fts_insert",
    "messages_fts_delete",
    "messages_fts_update",
    "messages_fts_trigram_insert",
    "messages_fts_trigram_delete",
    "messages_fts_trigram_update",
)


class _SqliteSnapshot:
    """The catalogue of a SQLite database, read once."""

    def __init__(self, connection: Connection) -> None:
        rows = connection.exec_driver_sql(
            "SELECT type, name, tbl_name, COALESCE(sql, '') FROM sqlite_master"
        ).fetchall()
        self.sql = {(row[0], row[1]): str(row[3]) for row in rows}
        self.columns: dict[str, set[str]] = {}
        for table in ("sessions", "messages"):
            if ("table", table) in self.sql:
                info = connection.exec_driver_sql(f'PRAGMA table_info("{table}")').fetchall()
                self.columns[table] = {str(row[1]) for row in info}

    def has(self, kind: str, name: str) -> bool:
        return (kind, name) in self.sql

    def has_column(self, table: str, column: str) -> bool:
        return column in self.columns.get(table, set())

    def satisfies(self, version: int) -> bool:
        if version == 1:
            tables = all(self.has("table", t) for t in ("sessions", "messages", "schema_version"))
            columns = all(self.has_column(t, c) for t, c in _V1_COLUMNS)
            return tables and columns and self.has("table", "messages_fts")
        if version in _COLUMNS_ADDED:
            return all(self.has_column(t, c) for t, c in _COLUMNS_ADDED[version])
        if version == 4:
            return self.has("index", "idx_sessions_title_unique")
        if version == 10:
            return self.has("table", "messages_fts_trigram")
        # version 11: both FTS tables inline, triggers feeding tool fields.
        inline = all(
            "content=" not in self.sql.get(("table", t), "content=").replace(" ", "").lower()
            for t in ("messages_fts", "messages_fts_trigram")
        )
        triggers = all(self.has("trigger", t) for t in FTS_TRIGGERS)
        feeds_tools = "tool_calls" in self.sql.get(("trigger", "messages_fts_insert"), "")
        return inline and triggers and feeds_tools


def effective_version(connection: Connection, claimed: int | None) -> int:
    """The highest version ≤ ``claimed`` (capped at 11) whose objects are all present.

    0 means not even version 1 is complete; the database is then upgraded from the
    start, which is safe because every revision only adds what is missing.
    """
    snapshot = _SqliteSnapshot(connection)
    ceiling = LAST_NUMBERED_VERSION if claimed is None else min(claimed, LAST_NUMBERED_VERSION)
    reached = 0
    for version in range(1, ceiling + 1):
        if not snapshot.satisfies(version):
            break
        reached = version
    return reached


def read_legacy_version(connection: Connection) -> int | None:
    """Upstream's recorded version (largest row of ``schema_version``), or ``None``."""
    row = connection.exec_driver_sql("SELECT MAX(version) FROM schema_version").fetchone()
    return None if row is None or row[0] is None else int(row[0])


_ALEMBIC_VERSION = sa.Table(
    "alembic_version",
    sa.MetaData(),
    sa.Column("version_num", sa.String(32), primary_key=True),
)


def prepare_for_alembic(connection: Connection, known: Collection[str], head: str) -> bool:
    """Adopt a legacy database and decide whether Alembic may run on it.

    ``known`` holds the revisions of the scripts being run, ``head`` the newest.
    Returns ``False`` (after a warning) for a database written by a newer release,
    which must be used as it is and never stamped down; ``True`` otherwise. A legacy
    database is stamped at its effective revision inside the caller's transaction.
    """
    tables = profile_table_names(connection)
    if "alembic_version" in tables:
        current = connection.execute(sa.select(_ALEMBIC_VERSION.c.version_num)).scalars().all()
        unknown = [rev for rev in current if rev not in known]
        if unknown:
            warnings.warn(
                f"database is at revision {', '.join(unknown)}, newer than this hermes_store "
                f"({head}); leaving its schema as it is",
                NewerSchemaWarning,
                stacklevel=2,
            )
            return False
        return True
    if "schema_version" not in tables and "sessions" not in tables:
        return True  # an empty database: upgrade from the start
    claimed = read_legacy_version(connection) if "schema_version" in tables else None
    if claimed is not None and claimed > HEAD_VERSION:
        warnings.warn(
            f"database schema_version is {claimed}, newer than this hermes_store "
            f"({HEAD_VERSION}); using it as it is and not stamping it",
            NewerSchemaWarning,
            stacklevel=2,
        )
        return False
    if not backend_for(connection).adopts_legacy_files:
        return True
    reached = effective_version(connection, claimed)
    log.warning(
        "adopting legacy Hermes database (schema_version %s): stamping revision %s and upgrading",
        claimed,
        revision_of_version(reached) if reached else "base",
    )
    if reached:
        _ALEMBIC_VERSION.create(connection, checkfirst=True)
        connection.execute(_ALEMBIC_VERSION.insert().values(version_num=revision_of_version(reached)))
    return True
