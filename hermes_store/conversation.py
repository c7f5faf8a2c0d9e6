"""Shaping stored message rows into what callers get back: decoded rows and replays.

:func:`decoded` turns rows as stored into ``get_messages``' dicts (content and tool
calls decoded). :func:`replay` builds the OpenAI-format conversation an agent resumes
from: text cleaned of recalled-memory blocks, assistant-only fields only on assistant
turns, and — across a parent chain — without the user prompts that were re-sent when a
session was resumed.
"""

from __future__ import annotations

from typing import Any

from hermes_store import codec
from hermes_store.context_sanitizer import sanitize_context
from hermes_store.execution import Bind
from hermes_store.repository import lineage, messages

_JSON_ASSISTANT_FIELDS = ("reasoning_details", "codex_reasoning_items", "codex_message_items")


def decoded(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Decode ``content`` and ``tool_calls`` of message rows in place; returns the rows."""
    for item in rows:
        item["content"] = codec.decode_content(item["content"])
        if item["tool_calls"]:
            item["tool_calls"] = codec.decode_tool_calls(item["tool_calls"])
    return rows


def replay(db: Bind, session_id: str, include_ancestors: bool) -> list[dict[str, Any]]:
    """The session (with ``include_ancestors``, its whole parent chain, root first) as
    OpenAI-format messages in insertion order."""
    ids = lineage.chain_root_to_session(db, session_id) if include_ancestors else [session_id]
    conversation: list[dict[str, Any]] = []
    for row in messages.conversation_rows(db, ids):
        entry = entry_of(row)
        if include_ancestors and is_replayed_prompt(conversation, entry):
            continue
        conversation.append(entry)
    return conversation


def entry_of(row: dict[str, Any]) -> dict[str, Any]:
    """One replay message from a stored row."""
    content = codec.decode_content(row["content"])
    if row["role"] in ("user", "assistant") and isinstance(content, str):
        content = sanitize_context(content).strip()
    entry: dict[str, Any] = {"role": row["role"], "content": content}
    if row["tool_call_id"]:
        entry["tool_call_id"] = row["tool_call_id"]
    if row["tool_name"]:
        entry["tool_name"] = row["tool_name"]
    if row["tool_calls"]:
        entry["tool_calls"] = codec.decode_tool_calls(row["tool_calls"])
    if row["role"] == "assistant":
        if row["finish_reason"]:
            entry["finish_reason"] = row["finish_reason"]
        if row["reasoning"]:
            entry["reasoning"] = row["reasoning"]
        if row["reasoning_content"] is not None:
            entry["reasoning_content"] = row["reasoning_content"]
        for key in _JSON_ASSISTANT_FIELDS:
            raw = row[key]
            if raw:
                entry[key] = codec.decode_json_or(raw, None)
    return entry


def is_replayed_prompt(kept: list[dict[str, Any]], entry: dict[str, Any]) -> bool:
    """A user prompt equal to an earlier one with no assistant output in between."""
    content = entry.get("content")
    if entry["role"] != "user" or not isinstance(content, str) or not content:
        return False
    for previous in reversed(kept):
        if previous["role"] == "user" and previous.get("content") == content:
            return True
        if previous["role"] == "assistant" and (previous.get("content") or previous.get("tool_calls")):
            return False
    return False
