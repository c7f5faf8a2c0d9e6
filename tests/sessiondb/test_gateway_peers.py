"""Gateway routing peers: recording a session's peer and finding a peer's session again."""

from __future__ import annotations

from typing import Any

import pytest

from hermes_store import SessionDB

PEER = {"user_id": "u1", "chat_id": "c1", "chat_type": "dm", "thread_id": None}


def peer_columns(store: SessionDB, session_id: str) -> dict[str, Any]:
    row = store.get_session(session_id) or {}
    names = ("session_key", "source", "user_id", "chat_id", "chat_type", "thread_id")
    return {name: row.get(name) for name in names}


def gateway_session(
    store: SessionDB,
    make_session: Any,
    session_id: str,
    *,
    started: float,
    key: str = "agent:main:tg:dm:c1",
    **kw: Any,
) -> str:
    """A telegram session with one message, its peer recorded under ``key``."""
    source = kw.pop("source", "telegram")
    make_session(session_id, started=started, source=source, **kw)
    store.append_message(session_id, "user", "hello")
    store.record_gateway_session_peer(session_id, source=source, session_key=key, **PEER)
    return session_id


# --- recording ------------------------------------------------------------------------------


def test_record_writes_every_peer_column(db: SessionDB) -> None:
    db.create_session("s1", "cli", user_id="old-user")
    db.record_gateway_session_peer(
        "s1",
        source="telegram",
        user_id="u1",
        session_key="k1",
        chat_id="c1",
        chat_type="group",
        thread_id="t9",
    )
    assert peer_columns(db, "s1") == {
        "session_key": "k1",
        "source": "telegram",
        "user_id": "u1",
        "chat_id": "c1",
        "chat_type": "group",
        "thread_id": "t9",
    }


def test_record_overwrites_with_none(db: SessionDB) -> None:
    db.create_session("s1", "telegram")
    db.record_gateway_session_peer(
        "s1",
        source="telegram",
        user_id="u1",
        session_key="k1",
        chat_id="c1",
        chat_type="group",
        thread_id="t9",
    )
    db.record_gateway_session_peer("s1", source="discord", session_key="k2")
    assert peer_columns(db, "s1") == {
        "session_key": "k2",
        "source": "discord",
        "user_id": None,
        "chat_id": None,
        "chat_type": None,
        "thread_id": None,
    }


@pytest.mark.parametrize(("session_id", "session_key"), [("", "k1"), ("s1", ""), ("s1", None)])
def test_record_needs_a_session_id_and_a_key(db: SessionDB, session_id: str, session_key: str | None) -> None:
    db.create_session("s1", "cli", user_id="keep")
    db.record_gateway_session_peer(session_id, source="telegram", session_key=session_key, user_id="other")
    assert peer_columns(db, "s1")["user_id"] == "keep"
    assert peer_columns(db, "s1")["source"] == "cli"


def test_record_for_a_missing_session_does_nothing(db: SessionDB) -> None:
    db.record_gateway_session_peer("nowhere", source="telegram", session_key="k1")
    assert db.get_session("nowhere") is None


def test_record_checks_argument_types(db: SessionDB) -> None:
    db.create_session("s1", "cli")
    with pytest.raises(TypeError, match="chat_id"):
        db.record_gateway_session_peer("s1", source="telegram", session_key="k1", chat_id=12345)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="source"):
        db.record_gateway_session_peer("s1", source=None, session_key="k1")  # type: ignore[arg-type]
    assert peer_columns(db, "s1")["session_key"] is None


# --- finding by session key -------------------------------------------------------------------


def test_the_newest_recoverable_session_for_the_key(db: SessionDB, make_session: Any) -> None:
    gateway_session(db, make_session, "older", started=100.0)
    gateway_session(db, make_session, "newer", started=200.0)
    found = db.find_latest_gateway_session_for_peer(source="telegram", session_key="agent:main:tg:dm:c1")
    assert found is not None
    assert found["id"] == "newer"
    assert found == db.get_session("newer")


def test_without_a_key_nothing_is_found(db: SessionDB, make_session: Any) -> None:
    gateway_session(db, make_session, "s1", started=100.0)
    assert db.find_latest_gateway_session_for_peer(source="telegram", **PEER) is None
    assert db.find_latest_gateway_session_for_peer(source="telegram", session_key="", **PEER) is None


def test_the_source_must_match(db: SessionDB, make_session: Any) -> None:
    gateway_session(db, make_session, "s1", started=100.0)
    assert (
        db.find_latest_gateway_session_for_peer(source="discord", session_key="agent:main:tg:dm:c1") is None
    )


def test_sessions_ended_by_agent_close_are_recoverable(db: SessionDB, make_session: Any, raw: Any) -> None:
    gateway_session(db, make_session, "closed", started=100.0)
    raw.set_ended("closed", 150.0, "agent_close")
    found = db.find_latest_gateway_session_for_peer(source="telegram", session_key="agent:main:tg:dm:c1")
    assert found is not None and found["id"] == "closed"


@pytest.mark.parametrize("reason", ["new_session", "compression", "user_exit", None])
def test_sessions_ended_otherwise_are_not(
    db: SessionDB, make_session: Any, raw: Any, reason: str | None
) -> None:
    gateway_session(db, make_session, "live", started=100.0)
    gateway_session(db, make_session, "ended", started=200.0)
    raw.set_ended("ended", 250.0, reason)
    found = db.find_latest_gateway_session_for_peer(source="telegram", session_key="agent:main:tg:dm:c1")
    assert found is not None and found["id"] == "live"


def test_empty_sessions_are_skipped(db: SessionDB, make_session: Any) -> None:
    gateway_session(db, make_session, "with-messages", started=100.0)
    make_session("empty", started=200.0, source="telegram")
    db.record_gateway_session_peer("empty", source="telegram", session_key="agent:main:tg:dm:c1", **PEER)
    found = db.find_latest_gateway_session_for_peer(source="telegram", session_key="agent:main:tg:dm:c1")
    assert found is not None and found["id"] == "with-messages"


def test_a_message_count_alone_makes_a_session_non_empty(db: SessionDB, make_session: Any, raw: Any) -> None:
    make_session("counted", started=100.0, source="telegram")
    db.record_gateway_session_peer("counted", source="telegram", session_key="k1")
    raw.execute("UPDATE sessions SET message_count = 3 WHERE id = ?", ("counted",))
    found = db.find_latest_gateway_session_for_peer(source="telegram", session_key="k1")
    assert found is not None and found["id"] == "counted"


def test_archived_and_child_sessions_are_found(db: SessionDB, make_session: Any, raw: Any) -> None:
    gateway_session(db, make_session, "parent", started=100.0)
    gateway_session(db, make_session, "child", started=200.0, parent="parent")
    raw.execute("UPDATE sessions SET archived = 1 WHERE id = ?", ("child",))
    found = db.find_latest_gateway_session_for_peer(source="telegram", session_key="agent:main:tg:dm:c1")
    assert found is not None and found["id"] == "child"


# --- finding by the whole peer ----------------------------------------------------------------


def peer_only_session(
    store: SessionDB, make_session: Any, session_id: str, started: float, **peer: Any
) -> None:
    """A session whose peer columns are set but whose session key is some other value."""
    make_session(session_id, started=started, source="telegram")
    store.append_message(session_id, "user", "hi")
    store.record_gateway_session_peer(session_id, source="telegram", session_key=f"old-{session_id}", **peer)


def test_the_whole_peer_is_the_fallback(db: SessionDB, make_session: Any) -> None:
    peer_only_session(db, make_session, "s1", 100.0, **PEER)
    found = db.find_latest_gateway_session_for_peer(source="telegram", session_key="lost-key", **PEER)
    assert found is not None and found["id"] == "s1"


def test_the_fallback_needs_chat_id_and_chat_type(db: SessionDB, make_session: Any) -> None:
    peer_only_session(db, make_session, "s1", 100.0, **PEER)
    assert (
        db.find_latest_gateway_session_for_peer(
            source="telegram", session_key="lost", user_id="u1", chat_id="c1"
        )
        is None
    )
    assert (
        db.find_latest_gateway_session_for_peer(
            source="telegram", session_key="lost", user_id="u1", chat_type="dm"
        )
        is None
    )


@pytest.mark.parametrize(
    "other", [{"user_id": "u2"}, {"chat_id": "c2"}, {"chat_type": "group"}, {"thread_id": "t1"}]
)
def test_the_fallback_never_crosses_peers(db: SessionDB, make_session: Any, other: dict[str, str]) -> None:
    peer_only_session(db, make_session, "s1", 100.0, **PEER)
    found = db.find_latest_gateway_session_for_peer(source="telegram", session_key="lost", **(PEER | other))
    assert found is None


def test_in_the_fallback_none_and_empty_are_the_same(db: SessionDB, make_session: Any) -> None:
    peer_only_session(db, make_session, "s1", 100.0, user_id=None, chat_id="c1", chat_type="dm", thread_id="")
    found = db.find_latest_gateway_session_for_peer(
        source="telegram", session_key="lost", user_id="", chat_id="c1", chat_type="dm", thread_id=None
    )
    assert found is not None and found["id"] == "s1"


def test_a_key_match_wins_over_a_newer_peer_match(db: SessionDB, make_session: Any) -> None:
    gateway_session(db, make_session, "by-key", started=100.0, key="k1")
    peer_only_session(db, make_session, "by-peer", 200.0, **PEER)
    found = db.find_latest_gateway_session_for_peer(source="telegram", session_key="k1", **PEER)
    assert found is not None and found["id"] == "by-key"


def test_the_fallback_takes_the_newest_recoverable_session(
    db: SessionDB, make_session: Any, raw: Any
) -> None:
    peer_only_session(db, make_session, "old", 100.0, **PEER)
    peer_only_session(db, make_session, "new", 200.0, **PEER)
    peer_only_session(db, make_session, "ended", 300.0, **PEER)
    raw.set_ended("ended", 350.0, "new_session")
    found = db.find_latest_gateway_session_for_peer(source="telegram", session_key="lost", **PEER)
    assert found is not None and found["id"] == "new"
