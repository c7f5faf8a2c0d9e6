"""Rolling back below revision 0019 on SQLite keeps what a replay shows.

Revision 0018's release knows no ``active`` flag: a rewound or compacted-away message
left in ``messages`` would be replayed and searched again. The downgrade sets those rows
aside (``hermes_hidden_messages``), out of the previous release's sight, and the next
upgrade puts them back, hidden as they were.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

from legacy_db import fts_rowids

from hermes_store import SessionDB
from hermes_store.schema import migrate


def query(path: Path, sql: str) -> list[tuple[object, ...]]:
    with closing(sqlite3.connect(path)) as connection:
        return connection.execute(sql).fetchall()


def test_hidden_messages_stay_hidden_through_a_downgrade_and_come_back_with_the_upgrade(
    tmp_path: Path,
) -> None:
    path = tmp_path / "state.db"
    with SessionDB(path) as db:
        db.create_session("s", "cli")
        db.create_session("gone", "cli")
        live = [db.append_message("s", "user", f"live walnut {n}") for n in range(2)]
        rewound = db.append_message("s", "user", "rewound lantern")
        compacted = db.append_message("s", "assistant", "compacted meadow")
        dropped_with_session = db.append_message("gone", "user", "orchard")
    with closing(sqlite3.connect(path)) as connection, connection:
        connection.execute(f"UPDATE messages SET active = 0 WHERE id IN ({rewound}, {dropped_with_session})")
        connection.execute(f"UPDATE messages SET active = 0, compacted = 1 WHERE id = {compacted}")

    migrate.downgrade(path, "0018")
    assert [row[0] for row in query(path, "SELECT id FROM messages ORDER BY id")] == live
    assert fts_rowids(path, "messages_fts", "lantern") == []
    assert fts_rowids(path, "messages_fts", "meadow") == []
    # The previous release goes on: it appends, and deletes a session holding a hidden row.
    with closing(sqlite3.connect(path)) as connection, connection:
        connection.execute("PRAGMA foreign_keys = ON")
        connection.execute(
            "INSERT INTO messages (session_id, role, content, timestamp) VALUES ('s', 'user', 'later', 9e9)"
        )
        connection.execute("DELETE FROM messages WHERE session_id = 'gone'")
        connection.execute("DELETE FROM sessions WHERE id = 'gone'")

    migrate.upgrade(path)
    rows = query(path, "SELECT id, active, compacted FROM messages ORDER BY id")
    later = rows[-1][0]
    assert rows == [(live[0], 1, 0), (live[1], 1, 0), (rewound, 0, 0), (compacted, 0, 1), (later, 1, 0)]
    assert "hermes_hidden_messages" not in {row[0] for row in query(path, "SELECT name FROM sqlite_master")}
    assert fts_rowids(path, "messages_fts", "lantern") == [rewound]
    with SessionDB(path) as db:
        assert [m["content"] for m in db.get_messages("s")] == ["live walnut 0", "live walnut 1", "later"]
