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
