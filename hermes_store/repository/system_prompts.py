"""System prompts where a file keeps them: in ``sessions.system_prompt``, or shared.

From its schema 25 on, upstream Hermes stores each distinct prompt once, in
``system_prompts(hash, prompt)`` keyed by the SHA-256 of its UTF-8 text, points
``sessions.system_prompt_hash`` at it and leaves ``sessions.system_prompt`` NULL; its
readers take the shared text first and the column only as a fallback. On such a file
this module reads prompts the same way and writes them the way upstream does, so that
both programs see the same prompt. On every other file (the store's own layout, and
PostgreSQL) the column is the prompt and nothing here runs a statement.
"""

from __future__ import annotations

import hashlib
from typing import Any

from sqlalchemy import text

from hermes_store.db.execution import Bind, fetch_tuples, run
from hermes_store.schema.file_layout import layout_of


def prompt_hash(prompt: str) -> str:
    """The key upstream gives ``prompt`` in ``system_prompts``: SHA-256 of its UTF-8, in hex."""
    return hashlib.sha256(prompt.encode("utf-8")).hexdigest()


def resolve(db: Bind, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Give each session row (a dict with ``id`` and ``system_prompt``) the prompt upstream's
    readers give it: the shared text where its hash names one. Returns ``rows``."""
    if not rows or not layout_of(db).shared_prompts:
        return rows
    found = dict(
        fetch_tuples(
            db,
            "SELECT s.id, p.prompt FROM sessions s JOIN system_prompts p ON p.hash = s.system_prompt_hash "
            "WHERE s.id IN :ids",
            {"ids": sorted({str(row["id"]) for row in rows})},
        )
    )
    for row in rows:
        prompt = found.get(row["id"])
        if prompt is not None:
            row["system_prompt"] = prompt
    return rows


def store(db: Bind, session_id: str, prompt: str | None) -> bool:
    """Store ``prompt`` as a session's system prompt the way the file keeps prompts; returns
    False when the file keeps them in the column (the caller writes it there)."""
    if not layout_of(db).shared_prompts:
        return False
    if prompt is None:
        _write(
            db,
            "UPDATE sessions SET system_prompt = NULL, system_prompt_hash = NULL WHERE id = :id",
            {"id": session_id},
        )
    else:
        key = prompt_hash(prompt)
        _write(
            db,
            "INSERT INTO system_prompts (hash, prompt) SELECT :hash, :prompt "
            "WHERE EXISTS (SELECT 1 FROM sessions WHERE id = :id) ON CONFLICT (hash) DO NOTHING",
            {"hash": key, "prompt": prompt, "id": session_id},
        )
        _write(
            db,
            "UPDATE sessions SET system_prompt_hash = :hash, system_prompt = NULL WHERE id = :id",
            {"hash": key, "id": session_id},
        )
    forget_unused(db)
    return True


def share_inline(db: Bind, session_id: str, prompt: str) -> None:
    """On a file that shares prompts, move a prompt just written into a session's column
    (by an insert that filled it in) into ``system_prompts``; otherwise nothing."""
    if not layout_of(db).shared_prompts:
        return
    key = prompt_hash(prompt)
    params = {"hash": key, "prompt": prompt, "id": session_id}
    unshared = (
        "SELECT 1 FROM sessions WHERE id = :id AND system_prompt_hash IS NULL AND system_prompt = :prompt"
    )
    _write(
        db,
        f"INSERT INTO system_prompts (hash, prompt) SELECT :hash, :prompt WHERE EXISTS ({unshared}) "
        "ON CONFLICT (hash) DO NOTHING",
        params,
    )
    _write(
        db,
        "UPDATE sessions SET system_prompt_hash = :hash, system_prompt = NULL "
        "WHERE id = :id AND system_prompt_hash IS NULL AND system_prompt = :prompt",
        params,
    )


def forget_unused(db: Bind) -> None:
    """Delete the shared prompts no session points at any more (as upstream does after it
    drops or rewrites sessions); nothing on a file that keeps prompts in the column."""
    if not layout_of(db).shared_prompts:
        return
    _write(
        db,
        "DELETE FROM system_prompts WHERE NOT EXISTS "
        "(SELECT 1 FROM sessions s WHERE s.system_prompt_hash = system_prompts.hash)",
    )


def _write(db: Bind, sql: str, params: dict[str, Any] | None = None) -> None:
    run(db, text(sql), params)
