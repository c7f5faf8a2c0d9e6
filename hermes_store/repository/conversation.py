"""Messages between the API's shapes and the stored rows, both ways.

:func:`new_message` and :func:`message_from_dict` encode what ``append_message`` and
``replace_messages`` receive into a row ready to store (see :mod:`hermes_store.domain.codec`);
:func:`decoded` and the export functions turn stored rows back into ``get_messages``' dicts.

:func:`decoded` turns rows as stored into ``get_messages``' dicts (content and tool
calls decoded). :func:`replay` builds the OpenAI-format conversation an agent resumes
from: text cleaned of recalled-memory blocks, assistant-only fields only on assistant
turns, and — across a parent chain — without the user prompts that were re-sent when a
session was resumed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from hermes_store.db.execution import Bind
from hermes_store.domain import codec
from hermes_store.domain.context_sanitizer import sanitize_context
from hermes_store.repository import lineage, listing, messages, sessions, system_prompts

_JSON_ASSISTANT_FIELDS = ("reasoning_details", "codex_reasoning_items", "codex_message_items")


def new_message(
    role: str,
    content: Any = None,
    tool_name: str | None = None,
    tool_calls: Any = None,
    tool_call_id: str | None = None,
    token_count: int | None = None,
    finish_reason: str | None = None,
    reasoning: str | None = None,
    reasoning_content: str | None = None,
    reasoning_details: Any = None,
    codex_reasoning_items: Any = None,
    codex_message_items: Any = None,
    platform_message_id: str | None = None,
    observed: object = False,
    timestamp: float | None = None,
    encode_content: Callable[[Any], Any] = codec.encode_content,
) -> messages.NewMessage:
    """``append_message``'s arguments as a row to store: content and JSON fields encoded,
    and how much the message adds to the session's ``tool_call_count``.

    ``timestamp`` is already converted (:func:`~hermes_store.domain.codec.explicit_timestamp`);
    ``observed`` is stored as 1 when truthy. ``encode_content`` is the store's content
    encoder (``SessionDB._encode_content``, a seam upstream's tests patch). The
    parameters are ``append_message``'s, in its order, so that it can pass them
    positionally (sixteen keywords cost about a microsecond an append)."""
    # Per append: the JSON fields are mostly empty, and encode_json stores every falsy
    # value as NULL, so it is called only for the others (a call each saved). Fields in
    # NewMessage's order, positionally: sixteen keywords cost about a microsecond more.
    encode_json = codec.encode_json
    return messages.NewMessage(
        role,
        encode_content(content),
        tool_call_id,
        encode_json(tool_calls) if tool_calls else None,
        tool_name,
        token_count,
        finish_reason,
        reasoning,
        reasoning_content,
        encode_json(reasoning_details) if reasoning_details else None,
        encode_json(codex_reasoning_items) if codex_reasoning_items else None,
        encode_json(codex_message_items) if codex_message_items else None,
        platform_message_id,
        1 if observed else 0,
        0 if tool_calls is None else codec.count_tool_calls(tool_calls),
        timestamp,
    )


def message_from_dict(
    entry: dict[str, Any], encode_content: Callable[[Any], Any] = codec.encode_content
) -> messages.NewMessage:
    """One OpenAI-style message dict of ``replace_messages`` as a row to store.

    A missing role is ``"unknown"``; the reasoning fields are kept on assistant messages
    only. A ``timestamp`` key is honoured (``None`` when it is no time, so the insert's
    clock applies); the platform's id comes from ``platform_message_id``, else from
    ``message_id`` (the key conversation dicts carry it under).
    """
    role = entry.get("role") or "unknown"
    assistant = role == "assistant"

    def assistant_only(key: str) -> Any:
        return entry.get(key) if assistant else None

    stamp = entry.get("timestamp")
    platform_id = entry.get("platform_message_id") or entry.get("message_id")

    return new_message(
        role,
        entry.get("content"),
        tool_name=entry.get("tool_name"),
        tool_calls=entry.get("tool_calls"),
        tool_call_id=entry.get("tool_call_id"),
        token_count=entry.get("token_count"),
        finish_reason=entry.get("finish_reason"),
        reasoning=assistant_only("reasoning"),
        reasoning_content=assistant_only("reasoning_content"),
        reasoning_details=assistant_only("reasoning_details"),
        codex_reasoning_items=assistant_only("codex_reasoning_items"),
        codex_message_items=assistant_only("codex_message_items"),
        platform_message_id=codec.platform_message_text("platform_message_id", platform_id),
        observed=entry.get("observed"),
        timestamp=None if stamp is None else codec.explicit_timestamp(stamp),
        encode_content=encode_content,
    )


def messages_from_dicts(
    entries: Iterable[Any], encode_content: Callable[[Any], Any] = codec.encode_content
) -> list[messages.NewMessage]:
    """A list of message dicts (``replace_messages``, ``archive_and_compact``) as rows to
    store, each as :func:`message_from_dict` makes it. An entry that is not a dict raises
    ``TypeError``, so a caller checks the whole list before writing any of it."""
    prepared = []
    for entry in entries:
        if not isinstance(entry, dict):
            raise TypeError(f"each message must be a dict, not {type(entry).__name__}")
        prepared.append(message_from_dict(entry, encode_content))
    return prepared


def decoded(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Decode ``content`` and ``tool_calls`` of message rows in place; returns the rows."""
    for item in rows:
        item["content"] = codec.decode_content(item["content"])
        if item["tool_calls"]:
            item["tool_calls"] = codec.decode_tool_calls(item["tool_calls"])
    return rows


def exported_session(db: Bind, session_id: str) -> dict[str, Any] | None:
    """A session's row plus ``"messages"`` (decoded), or ``None``."""
    row = sessions.get_row(db, session_id)
    if row is None:
        return None
    return {**row, "messages": decoded(messages.rows_for(db, session_id))}


def exported_all(db: Bind, source: str | None) -> list[dict[str, Any]]:
    """Every session (of ``source``), most recently active first, each with its live messages."""
    rows = system_prompts.resolve(db, listing.by_last_active(db, source, 100000, 0))
    by_session = messages.rows_by_session(db, source)
    return [{**row, "messages": decoded(by_session.get(row["id"], []))} for row in rows]


def replay(
    db: Bind, session_id: str, include_ancestors: bool, include_inactive: bool = False
) -> list[dict[str, Any]]:
    """The session (with ``include_ancestors``, its whole parent chain, root first) as
    OpenAI-format messages in insertion order: live messages only unless
    ``include_inactive``, and without background-review prompts and their replies."""
    ids = lineage.chain_root_to_session(db, session_id) if include_ancestors else [session_id]
    conversation: list[dict[str, Any]] = []
    for row in messages.conversation_rows(db, ids, include_inactive):
        entry = entry_of(row)
        if include_ancestors and is_replayed_prompt(conversation, entry):
            continue
        conversation.append(entry)
    return without_review_harness(conversation)


# Older upstream builds let the background skill/memory review write its prompt into the
# user's own session; replayed, it turns the agent into the curator. These openings mark it.
_REVIEW_HARNESS_OPENINGS = (
    "Review the conversation above and update the skill library",
    "Review the conversation above and consider saving to memory",
)


def is_review_harness(entry: dict[str, Any]) -> bool:
    """A user or system message holding a background-review prompt."""
    content = entry.get("content")
    return (
        entry.get("role") in ("user", "system")
        and isinstance(content, str)
        and content.lstrip().startswith(_REVIEW_HARNESS_OPENINGS)
    )


def without_review_harness(conversation: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``conversation`` without background-review prompts and the assistant message that
    directly follows each (the curator's reply)."""
    kept: list[dict[str, Any]] = []
    after_prompt = False
    for entry in conversation:
        if is_review_harness(entry):
            after_prompt = True
            continue
        if not (after_prompt and entry.get("role") == "assistant"):
            kept.append(entry)
        after_prompt = False
    return kept


def entry_of(row: dict[str, Any]) -> dict[str, Any]:
    """One replay message from a stored row."""
    content = codec.decode_content(row["content"])
    if row["role"] in ("user", "assistant") and isinstance(content, str):
        content = sanitize_context(content).strip()
    entry: dict[str, Any] = {"role": row["role"], "content": content}
    if row["timestamp"]:
        entry["timestamp"] = row["timestamp"]
    if row["tool_call_id"]:
        entry["tool_call_id"] = row["tool_call_id"]
    if row["tool_name"]:
        entry["tool_name"] = row["tool_name"]
    if row["tool_calls"]:
        entry["tool_calls"] = codec.decode_tool_calls(row["tool_calls"])
    if row["platform_message_id"]:
        entry["message_id"] = row["platform_message_id"]
    if row["observed"]:
        entry["observed"] = True
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
