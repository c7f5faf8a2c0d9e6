"""The ORM models and the read-side query functions analytics scripts use."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from sqlalchemy import func, orm, select

from hermes_store import SessionDB, create_engine
from hermes_store.models import Message, SchemaVersion, Session, StateMeta
from hermes_store.repository import lineage, usage


def _seed(path: Path) -> None:
    db = SessionDB(path)
    db.create_session("root", "cli", model="gpt-5")
    db.create_session("child", "telegram", model="claude", parent_session_id="root")
    db.create_session("grandchild", "cli", model="gpt-5", parent_session_id="child")
    db.create_session("bare", "cli")
    db.update_token_counts("root", input_tokens=100, output_tokens=10, estimated_cost_usd=0.5)
    db.update_token_counts("child", input_tokens=7, output_tokens=3, estimated_cost_usd=1.25)
    db.update_token_counts("grandchild", input_tokens=40, output_tokens=2)
    for text in ("first", "second", "third"):
        db.append_message("root", "user", text)
    db.set_meta("k", "v")
    db.close()


def test_analytics_query_from_the_issue_runs_on_a_state_db(tmp_path: Path) -> None:
    _seed(tmp_path / "state.db")
    with orm.Session(create_engine(tmp_path / "state.db")) as session:
        rows = session.execute(
            select(Session.model, func.sum(Session.input_tokens))
            .group_by(Session.model)
            .order_by(Session.model)
        ).all()
    assert [tuple(row) for row in rows] == [(None, 0), ("claude", 7), ("gpt-5", 140)]


def test_relationships_follow_lineage_and_insertion_order(tmp_path: Path) -> None:
    _seed(tmp_path / "state.db")
    with orm.Session(create_engine(tmp_path / "state.db")) as session:
        root = session.get(Session, "root")
        assert root is not None
        assert [m.content for m in root.messages] == ["first", "second", "third"]
        assert root.messages[0].session is root
        assert [c.id for c in root.children] == ["child"]
        child = session.get(Session, "child")
        assert child is not None and child.parent is root
        assert [g.id for g in child.children] == ["grandchild"]
        assert session.execute(select(SchemaVersion.version)).scalar_one() == 17
        assert session.get(StateMeta, "k").value == "v"  # type: ignore[union-attr]
        assert repr(root) == "Session(id='root', source='cli', title=None)"
        assert repr(root.messages[0]).startswith("Message(id=1, session_id='root'")


def test_models_read_a_database_written_by_plain_sqlite(tmp_path: Path) -> None:
    _seed(tmp_path / "state.db")
    raw = sqlite3.connect(tmp_path / "state.db")
    raw.execute(
        "INSERT INTO messages (session_id, role, content, timestamp) VALUES ('bare', 'user', 'raw', 5.5)"
    )
    raw.commit()
    raw.close()
    with orm.Session(create_engine(tmp_path / "state.db")) as session:
        message = session.execute(select(Message).where(Message.content == "raw")).scalar_one()
        assert (message.session_id, message.timestamp) == ("bare", 5.5)


def test_usage_by_model_and_top_sessions(tmp_path: Path) -> None:
    _seed(tmp_path / "state.db")
    with orm.Session(create_engine(tmp_path / "state.db")) as session:
        report = usage.build_report(session, source=None, days=1, top=2, utc=True)
    # Most tokens first; sessions without a model are counted under "(unknown)".
    assert [
        (u.key, u.sessions, u.input_tokens, u.output_tokens, u.estimated_cost_usd) for u in report.by_model
    ] == [
        ("gpt-5", 2, 140, 12, 0.5),
        ("claude", 1, 7, 3, 1.25),
        (usage.UNKNOWN_MODEL, 1, 0, 0, 0.0),
    ]
    assert [(u.key, u.total_tokens, u.estimated_cost_usd) for u in report.top_sessions] == [
        ("root", 110, 0.5),
        ("grandchild", 42, 0.0),
    ]


def test_ancestors_and_descendants(tmp_path: Path) -> None:
    _seed(tmp_path / "state.db")
    with orm.Session(create_engine(tmp_path / "state.db")) as session:
        assert [(n.id, n.depth) for n in lineage.ancestors(session, "grandchild")] == [
            ("root", 2),
            ("child", 1),
            ("grandchild", 0),
        ]
        assert [(n.id, n.depth) for n in lineage.descendants(session, "root")] == [
            ("root", 0),
            ("child", 1),
            ("grandchild", 2),
        ]
        assert lineage.ancestors(session, "missing") == []
        assert lineage.chain_root_to_session(session, "missing") == ["missing"]


def test_lineage_walks_stop_on_a_cycle(tmp_path: Path) -> None:
    _seed(tmp_path / "state.db")
    raw = sqlite3.connect(tmp_path / "state.db")
    raw.execute("PRAGMA foreign_keys=OFF")
    raw.execute("UPDATE sessions SET parent_session_id = 'grandchild' WHERE id = 'root'")
    raw.commit()
    raw.close()
    with orm.Session(create_engine(tmp_path / "state.db")) as session:
        assert {n.id for n in lineage.ancestors(session, "child")} == {"root", "child", "grandchild"}
        assert {n.id for n in lineage.descendants(session, "root")} == {"root", "child", "grandchild"}
