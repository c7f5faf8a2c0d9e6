"""The SQLite full-text tables and their triggers, as a store at head has them.

Both are upstream Hermes' objects (the same names and meaning, so that a file shared with
upstream keeps one index): recreated by ``hermes-store doctor --fix`` and on opening a
store whose tables or triggers went missing.
"""

from __future__ import annotations

from hermes_store.schema.indexed_text import indexed_text

FTS_TABLES = {
    "messages_fts": "CREATE VIRTUAL TABLE IF NOT EXISTS messages_fts USING fts5(\n    content\n)",
    "messages_fts_trigram": (
        "CREATE VIRTUAL TABLE IF NOT EXISTS messages_fts_trigram USING fts5(\n"
        "    content,\n    tokenize='trigram'\n)"
    ),
}
"""The two FTS5 tables by name: words (unicode61) and trigrams (CJK, substrings)."""


def fts_triggers(table: str) -> dict[str, str]:
    """The three triggers that keep FTS table ``table`` equal to ``messages``, by name
    (they fire on every insert, delete and update of a message, as upstream's do)."""
    new = indexed_text("new.")
    return {
        f"{table}_insert": (
            f"CREATE TRIGGER IF NOT EXISTS {table}_insert AFTER INSERT ON messages BEGIN\n"
            f"    INSERT INTO {table}(rowid, content) VALUES (\n        new.id,\n        {new}\n    );\nEND"
        ),
        f"{table}_delete": (
            f"CREATE TRIGGER IF NOT EXISTS {table}_delete AFTER DELETE ON messages BEGIN\n"
            f"    DELETE FROM {table} WHERE rowid = old.id;\nEND"
        ),
        f"{table}_update": (
            f"CREATE TRIGGER IF NOT EXISTS {table}_update AFTER UPDATE ON messages BEGIN\n"
            f"    DELETE FROM {table} WHERE rowid = old.id;\n"
            f"    INSERT INTO {table}(rowid, content) VALUES (\n        new.id,\n        {new}\n    );\nEND"
        ),
    }


# Upstream's external-content layout 1 (its schema 23 onwards), for repairs of a file in
# that layout: an external-content index holds no text of its own, so a row leaves it
# only through FTS5's 'delete' command given the row's old values, and a trigger of the
# inline shape above would corrupt it. Upstream backfills these indexes in chunks after
# a rebuild; while it does, a row is in the index only when its id is at most the
# backfill's progress or above the high-water mark it started from, and every trigger
# must touch only such rows (both keys absent: every row).
_INDEXED = (
    "({row}.id > COALESCE((SELECT CAST(value AS INTEGER) FROM state_meta "
    "WHERE key = 'fts_rebuild_high_water'), -1) "
    "OR {row}.id <= COALESCE((SELECT CAST(value AS INTEGER) FROM state_meta "
    "WHERE key = 'fts_rebuild_progress'), -1))"
)
_LAYOUT_1_COLUMNS = "content, tool_name, tool_calls"


def _values(row: str) -> str:
    return ", ".join(f"{row}.{name.strip()}" for name in _LAYOUT_1_COLUMNS.split(","))


def external_fts_triggers(table: str) -> dict[str, str]:
    """The three triggers of ``table`` in upstream's external-content layout 1, by name.

    ``messages_fts`` indexes every message; ``messages_fts_trigram`` reads a view that
    leaves tool rows out, so its triggers skip them (and an update that changes a row's
    role moves it in or out). Updates fire only when an indexed column is written.
    """
    trigram = table == "messages_fts_trigram"
    skip_old = " AND old.role <> 'tool'" if trigram else ""
    skip_new = " AND new.role <> 'tool'" if trigram else ""
    watched = _LAYOUT_1_COLUMNS + (", role" if trigram else "")
    changed = " OR ".join(f"old.{name.strip()} IS NOT new.{name.strip()}" for name in watched.split(","))
    delete_old = (
        f"    INSERT INTO {table}({table}, rowid, {_LAYOUT_1_COLUMNS})\n"
        f"    SELECT 'delete', old.id, {_values('old')} WHERE 1 = 1{skip_old};\n"
    )
    insert_new = (
        f"    INSERT INTO {table}(rowid, {_LAYOUT_1_COLUMNS})\n"
        f"    SELECT new.id, {_values('new')} WHERE 1 = 1{skip_new};\n"
    )
    return {
        f"{table}_insert": (
            f"CREATE TRIGGER IF NOT EXISTS {table}_insert AFTER INSERT ON messages\n"
            f"WHEN {_INDEXED.format(row='new')}{skip_new}\nBEGIN\n{insert_new}END"
        ),
        f"{table}_delete": (
            f"CREATE TRIGGER IF NOT EXISTS {table}_delete AFTER DELETE ON messages\n"
            f"WHEN {_INDEXED.format(row='old')}{skip_old}\nBEGIN\n{delete_old}END"
        ),
        f"{table}_update": (
            f"CREATE TRIGGER IF NOT EXISTS {table}_update AFTER UPDATE OF {watched} ON messages\n"
            f"WHEN ({changed}) AND {_INDEXED.format(row='old')}\nBEGIN\n{delete_old}{insert_new}END"
        ),
    }
