"""What a SQLite file's layout is, whoever wrote it: this store, or a newer upstream Hermes.

Upstream's releases after schema 17 changed how a file stores some things without this
store's revisions knowing: system prompts moved into a shared ``system_prompts`` table
(schema 25, keyed by ``sessions.system_prompt_hash``), sessions gained ``hidden`` and
``pinned`` flags, and the full-text indexes moved to FTS5 *external content* tables whose
triggers pass the old values to FTS5's ``'delete'`` command (its "FTS storage layouts"
1–3; layout 0 is the inline layout this store writes). An optional CJK index may sit
beside them, whose tokenizer only some processes can load.

:func:`layout_of` reads those facts from the file (``sqlite_master`` and a few
``state_meta`` keys) so that readers, writers and repairs follow the file instead of
assuming the store's own layout. It is cached per connection and read again only when
SQLite's schema cookie moves (another program, say upstream Hermes, migrated the file
while this store had it open). On PostgreSQL the layout is always the store's own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from hermes_store.db.backends import backend_for
from hermes_store.db.execution import Bind, connection_of, fetch_tuples

INLINE_FTS_LAYOUT = 0
"""The store's own full-text layout: each FTS5 table keeps its own copy of the text."""
NEWEST_KNOWN_FTS_LAYOUT = 3

CJK_INDEX = "messages_fts_cjk"
"""Upstream's optional CJK-bigram index, which needs the loadable ``cjk_unicode61`` tokenizer."""
CJK_TRIGGERS = ("messages_fts_cjk_insert", "messages_fts_cjk_delete", "messages_fts_cjk_update")
CJK_STALE_KEY = "fts_cjk_stale"
"""The ``state_meta`` key that tells upstream its CJK index missed writes and must be rebuilt."""

STORE_TABLES = frozenset(
    {
        "sessions",
        "messages",
        "state_meta",
        "schema_version",
        "compression_locks",
        "telegram_dm_topic_mode",
        "telegram_dm_topic_bindings",
        "alembic_version",
    }
)
"""The tables this store itself creates (beside its full-text tables)."""

_META_KEYS = ("fts_storage_version", "fts_stale", CJK_STALE_KEY)
_LAYOUT_KEY = "hermes_store.file_layout"
_SHADOW_SUFFIXES = ("_data", "_idx", "_docsize", "_config", "_content")


@dataclass(frozen=True)
class FileLayout:
    """The facts of one file's layout that change how the store reads and writes it."""

    schema_version: int | None = None
    """``schema_version``'s number (upstream's), ``None`` without that table."""
    fts_layout: int | None = INLINE_FTS_LAYOUT
    """0 (inline) to 3 (upstream's newest external-content layout); ``None``: no index."""
    cjk_index: bool = False
    fts_stale: bool = False
    """Upstream marked its indexes as having missed writes (it rebuilds them on open)."""
    tables: frozenset[str] = field(default_factory=frozenset)
    session_columns: frozenset[str] = field(default_factory=frozenset)

    @property
    def shared_prompts(self) -> bool:
        """Whether system prompts live in ``system_prompts`` (upstream schema 25 and later)."""
        return "system_prompts" in self.tables and "system_prompt_hash" in self.session_columns

    @property
    def hides_sessions(self) -> bool:
        """Whether sessions carry upstream's ``hidden`` flag."""
        return "hidden" in self.session_columns

    @property
    def pins_sessions(self) -> bool:
        """Whether sessions carry upstream's ``pinned`` flag."""
        return "pinned" in self.session_columns

    @property
    def external_fts(self) -> bool:
        """Whether the full-text indexes are upstream's external-content ones (layouts 1–3)."""
        return self.fts_layout is not None and self.fts_layout > INLINE_FTS_LAYOUT

    @property
    def other_tables(self) -> tuple[str, ...]:
        """Tables beside the store's own and the full-text ones, by name: a newer upstream's."""
        return tuple(sorted(name for name in self.tables if name not in STORE_TABLES and not _is_fts(name)))


STORE_LAYOUT = FileLayout()
"""The layout of a store this release created (and of every PostgreSQL database)."""


def layout_of(db: Bind) -> FileLayout:
    """The layout of the file ``db`` is connected to (:data:`STORE_LAYOUT` on PostgreSQL).

    Costs one ``PRAGMA schema_version`` while the file's schema stands still; the
    layout itself is read again after any change to the schema.
    """
    if backend_for(db).name != "sqlite":
        return STORE_LAYOUT
    connection = connection_of(db)
    cookie = fetch_tuples(connection, "PRAGMA schema_version")[0][0]
    cached = connection.info.get(_LAYOUT_KEY)
    if cached is not None and cached[0] == cookie:
        layout: FileLayout = cached[1]
        return layout
    layout = read_layout(db)
    connection.info[_LAYOUT_KEY] = (cookie, layout)
    return layout


def read_layout(db: Bind) -> FileLayout:
    """Read the layout of a SQLite file afresh (see :func:`layout_of`)."""
    objects = {str(name): str(sql or "") for name, sql in fetch_tuples(db, _MASTER_SQL)}
    tables = frozenset(objects)
    meta: dict[str, str] = {}
    if "state_meta" in tables:
        rows = fetch_tuples(
            db, "SELECT key, value FROM state_meta WHERE key IN :keys", {"keys": list(_META_KEYS)}
        )
        meta = {str(key): str(value) for key, value in rows}
    session_columns: frozenset[str] = frozenset()
    if "sessions" in tables:
        session_columns = frozenset(str(row[1]) for row in fetch_tuples(db, "PRAGMA table_info(sessions)"))
    version = None
    if "schema_version" in tables:
        found = fetch_tuples(db, "SELECT MAX(version) FROM schema_version")
        version = int(found[0][0]) if found and found[0][0] is not None else None
    return FileLayout(
        schema_version=version,
        fts_layout=fts_layout(objects.get("messages_fts"), objects.get("messages_fts_trigram"), meta),
        cjk_index=CJK_INDEX in tables,
        fts_stale=bool(meta.get("fts_stale")),
        tables=tables,
        session_columns=session_columns,
    )


_MASTER_SQL = "SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
_CONTENT_OPTION = re.compile(r"""\bcontent\s*=\s*['"]?(\w+)""", re.IGNORECASE)


def fts_layout(words_sql: str | None, trigram_sql: str | None, meta: dict[str, str]) -> int | None:
    """The FTS storage layout of the two declarations (``None`` when neither table exists).

    Read from the declarations first, as upstream itself does (its ``state_meta`` stamp
    lags behind a fresh file's first open): no ``tool_name`` column is the inline layout 0;
    ``messages_fts`` reading a projection view is layout 3; a trigram index without
    ``tool_calls`` is layout 2; else 1. A larger stamp than that (a layout this release
    has not seen) wins.
    """
    if words_sql is None and trigram_sql is None:
        return None
    words, trigram = (words_sql or "").lower(), (trigram_sql or "").lower()
    if "tool_name" not in words and _CONTENT_OPTION.search(words) is None:
        return INLINE_FTS_LAYOUT
    content = _CONTENT_OPTION.search(words)
    if content is not None and content.group(1) != "messages":
        found = 3
    elif trigram and "tool_calls" not in trigram:
        found = 2
    else:
        found = 1
    stamped = meta.get("fts_storage_version", "")
    return max(found, int(stamped)) if stamped.isdigit() else found


def _is_fts(name: str) -> bool:
    if not name.startswith("messages_fts"):
        return False
    base = name
    for suffix in _SHADOW_SUFFIXES:
        if name.endswith(suffix):
            base = name[: -len(suffix)]
    return base in ("messages_fts", "messages_fts_trigram", CJK_INDEX)


REPAIRABLE_EXTERNAL_LAYOUT = 1
"""The one external-content layout whose triggers this store writes when they go missing."""


def describe(layout: FileLayout) -> str:
    """The layout in one line (``hermes-store info``)."""
    parts = [f"schema_version {layout.schema_version if layout.schema_version is not None else '-'}"]
    if layout.fts_layout is None:
        parts.append("no full-text index")
    else:
        kind = "inline" if layout.fts_layout == INLINE_FTS_LAYOUT else "external content"
        parts.append(f"full-text layout {layout.fts_layout} ({kind})")
    parts.append("CJK index" if layout.cjk_index else "no CJK index")
    if layout.shared_prompts:
        parts.append("shared system prompts")
    return "; ".join(parts)


def handling(layout: FileLayout) -> str:
    """What this release does with a file of ``layout``, in one line (``hermes-store info``)."""
    if layout == STORE_LAYOUT or (
        not layout.external_fts
        and not layout.cjk_index
        and not layout.shared_prompts
        and not layout.other_tables
    ):
        return "its own layout: read and written as it is"
    parts = []
    if layout.shared_prompts:
        parts.append("prompts read from and written to system_prompts")
    if layout.hides_sessions:
        parts.append("hidden sessions left out of listings")
    if layout.external_fts:
        if layout.fts_layout == REPAIRABLE_EXTERNAL_LAYOUT and not layout.fts_stale:
            parts.append("missing FTS triggers repaired in layout 1")
        else:
            parts.append(f"FTS repairs left to Hermes (layout {layout.fts_layout})")
    if layout.cjk_index:
        parts.append("CJK index detached (marked stale) where its tokenizer is missing")
    untouched = [
        name for name in layout.other_tables if not (name == "system_prompts" and layout.shared_prompts)
    ]
    if untouched:
        parts.append("left as they are: " + ", ".join(untouched))
    parts.append("journal mode kept")
    return "; ".join(parts)
