"""A search index SQLite cannot run is reported as SearchUnavailable, not as an obscure error.

Simulated with a trigram table declared with a tokenizer this SQLite does not have, as a
database carried over from a SQLite build with extra tokenizers would be.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from hermes_store import SearchUnavailable, SessionDB


def _break_trigram_tokenizer(path: Path) -> None:
    raw = sqlite3.connect(path)
    raw.execute("PRAGMA writable_schema=ON")
    raw.execute(
        "UPDATE sqlite_master SET sql = replace(sql, 'tokenize=''trigram''', 'tokenize=''nosuchtok''') "
        "WHERE name = 'messages_fts_trigram'"
    )
    raw.commit()
    raw.close()


def test_missing_tokenizer_gives_search_unavailable_and_keeps_data(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    db = SessionDB(path)
    db.create_session("s", "cli")
    db.append_message("s", "user", "kept 记忆断裂")
    db.close()
    _break_trigram_tokenizer(path)
    db = SessionDB(path)
    with pytest.raises(SearchUnavailable, match="trigram"):
        db.search_messages("记忆断裂")
    with pytest.raises(SearchUnavailable, match="SQLite"):
        db.append_message("s", "user", "new")
    assert [m["content"] for m in db.get_messages("s")] == ["kept 记忆断裂"]
    assert [h["id"] for h in db.search_messages("kept")] == [1]
    db.close()
