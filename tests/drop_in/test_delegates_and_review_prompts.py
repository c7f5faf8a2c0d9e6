"""Hermes' private module functions its tests import: the delegate cascade on a plain
sqlite3 connection, and the background-review prompt filter."""

from __future__ import annotations

import json
import sqlite3

import hermes_state


def _sessions(*rows: tuple[str, str | None, str | None]) -> sqlite3.Connection:
    """A bare connection with ``(id, parent, delegate marker)`` sessions, one message each."""
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE sessions (id TEXT PRIMARY KEY, parent_session_id TEXT, model_config TEXT)")
    conn.execute("CREATE TABLE messages (session_id TEXT)")
    for session_id, parent, marker in rows:
        config = json.dumps({"_delegate_from": marker}) if marker else None
        conn.execute("INSERT INTO sessions VALUES (?, ?, ?)", (session_id, parent, config))
        conn.execute("INSERT INTO messages VALUES (?)", (session_id,))
    return conn


def test_delegates_are_collected_through_chains_but_never_a_parent() -> None:
    conn = _sessions(
        ("O", None, None),
        ("A", None, "O"),
        ("B", None, "A"),
        ("tagged-child", "O", "elsewhere"),
        ("branch", "O", None),
        ("loop", None, "X"),
        ("X", None, "loop"),
    )
    assert hermes_state._collect_delegate_child_ids(conn, ["O"]) == ["A", "B", "tagged-child"]
    assert hermes_state._collect_delegate_child_ids(conn, ["X"]) == ["loop"]
    assert hermes_state._collect_delegate_child_ids(conn, ["", "branch"]) == []


def test_deleting_delegates_keeps_the_parent_and_detaches_untagged_children() -> None:
    conn = _sessions(("A", None, "B"), ("B", None, "A"), ("plain", "B", None))
    assert hermes_state._delete_delegate_children(conn, ["A"]) == ["B"]
    assert [row[0] for row in conn.execute("SELECT id FROM sessions ORDER BY id")] == ["A", "plain"]
    assert conn.execute("SELECT parent_session_id FROM sessions WHERE id = 'plain'").fetchone()[0] is None
    assert [row[0] for row in conn.execute("SELECT session_id FROM messages ORDER BY 1")] == ["A", "plain"]


def test_review_prompts_and_their_replies_are_dropped() -> None:
    prompt = {"role": "user", "content": "  Review the conversation above and consider saving to memory."}
    messages = [
        {"role": "user", "content": "hello"},
        prompt,
        {"role": "assistant", "content": "saved"},
        {"role": "assistant", "content": "kept: not a reply to a prompt"},
        {"role": "system", "content": "Review the conversation above and update the skill library"},
        {"role": "tool", "content": "kept: not an assistant reply"},
    ]
    assert hermes_state._is_background_review_harness_message(prompt) is True
    assert (
        hermes_state._is_background_review_harness_message(
            {"role": "assistant", "content": prompt["content"]}
        )
        is False
    )
    assert hermes_state._is_background_review_harness_message("not a dict") is False  # type: ignore[arg-type]
    assert [m["content"] for m in hermes_state._strip_background_review_harness(messages)] == [
        "hello",
        "kept: not a reply to a prompt",
        "kept: not an assistant reply",
    ]
