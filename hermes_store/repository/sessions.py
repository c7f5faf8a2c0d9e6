"""Session rows: lifecycle, token accounting, titles, deletion and pruning.

Every function takes the caller's ORM session and never commits; writes are meant to
run inside :meth:`hermes_store.uow.unit_of_work.UnitOfWork.write`.
"""

from __future__ import annotations

import re
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, delete, exists, func, select, update
from sqlalchemy.exc import IntegrityError

from hermes_store.db.backends import backend_for
from hermes_store.db.execution import Bind, connection_of, fetch_dicts, run, scalar_text
from hermes_store.db.server_errors import violated_unique_index
from hermes_store.domain.titles import escape_like, split_title_number
from hermes_store.repository import lineage, model_usage, system_prompts
from hermes_store.repository.delegates import delegate_children
from hermes_store.schema.models import TITLE_INDEX, Message, Session

SESSION_COLUMNS = tuple(Session.__table__.columns)


# What a later create_session may fill in on an existing row, where it is still NULL.
ENRICHED_ON_CONFLICT = (
    "model",
    "model_config",
    "system_prompt",
    "session_key",
    "chat_id",
    "chat_type",
    "thread_id",
    "parent_session_id",
    "cwd",
)


def insert_session(
    db: Bind,
    session_id: str,
    source: str,
    *,
    model: str | None = None,
    model_config: str | None = None,
    system_prompt: str | None = None,
    user_id: str | None = None,
    parent_session_id: str | None = None,
    session_key: str | None = None,
    chat_id: str | None = None,
    chat_type: str | None = None,
    thread_id: str | None = None,
    cwd: str | None = None,
    started_at: float | None = None,
) -> None:
    """Insert a session, or enrich the existing one with this id.

    On a conflict each of :data:`ENRICHED_ON_CONFLICT` takes the given value only where
    the stored one is NULL; ``source``, ``user_id`` and ``started_at`` stay as they are.
    (Hermes' gateway writes a bare row before the agent exists; the agent's own call then
    fills in its model and prompt.) A ``parent_session_id`` naming no session raises
    ``IntegrityError`` on either path.
    """
    given = {
        "model": model,
        "model_config": model_config,
        "system_prompt": system_prompt,
        "session_key": session_key,
        "chat_id": chat_id,
        "chat_type": chat_type,
        "thread_id": thread_id,
        "parent_session_id": parent_session_id,
        "cwd": cwd,
    }
    values = {
        "id": session_id,
        "source": source,
        "user_id": user_id,
        "started_at": time.time() if started_at is None else started_at,
        **given,
    }
    statement = backend_for(db).insert(Session).values(**values)
    # Columns given no value cannot fill anything: left out, the update stays short
    # (and a call with none at all does nothing to the existing row).
    filled = {
        name: func.coalesce(Session.__table__.c[name], statement.excluded[name])
        for name, value in given.items()
        if value is not None
    }
    if filled:
        statement = statement.on_conflict_do_update(index_elements=["id"], set_=filled)
    else:
        statement = statement.on_conflict_do_nothing(index_elements=["id"])
    run(db, statement)
    if system_prompt is not None:
        system_prompts.share_inline(db, session_id, system_prompt)


# get_session() is called on nearly every agent turn: plain SQL, its statement cached.
_SELECT_SESSION = f"SELECT {', '.join(c.name for c in SESSION_COLUMNS)} FROM sessions"


def get_row(db: Bind, session_id: str) -> dict[str, Any] | None:
    """All 27 columns of a session as a dict, or ``None``."""
    rows = fetch_dicts(db, f"{_SELECT_SESSION} WHERE id = :session_id", {"session_id": session_id})
    return system_prompts.resolve(db, rows)[0] if rows else None


def exists_id(db: Bind, session_id: str) -> bool:
    """Whether a session with exactly this id exists."""
    return bool(fetch_dicts(db, "SELECT 1 AS found FROM sessions WHERE id = :id", {"id": session_id}))


def end(db: Bind, session_id: str, end_reason: str | None) -> None:
    """Mark a live session ended; the first end wins."""
    run(
        db,
        update(Session)
        .where(Session.id == session_id, Session.ended_at.is_(None))
        .values(ended_at=time.time(), end_reason=end_reason),
    )


def reopen(db: Bind, session_id: str) -> None:
    """Clear ``ended_at`` and ``end_reason``."""
    run(db, update(Session).where(Session.id == session_id).values(ended_at=None, end_reason=None))


def set_column(db: Bind, session_id: str, **values: Any) -> int:
    """Set columns of one session; returns the number of rows changed (0 or 1)."""
    result = run(db, update(Session).where(Session.id == session_id).values(**values))
    return int(result.rowcount)


@dataclass(frozen=True)
class TokenUsage:
    """One ``update_token_counts`` call's figures."""

    input_tokens: int | None = 0
    output_tokens: int | None = 0
    cache_read_tokens: int | None = 0
    cache_write_tokens: int | None = 0
    reasoning_tokens: int | None = 0
    estimated_cost_usd: float | None = None
    actual_cost_usd: float | None = None
    cost_status: str | None = None
    cost_source: str | None = None
    pricing_version: str | None = None
    billing_provider: str | None = None
    billing_base_url: str | None = None
    billing_mode: str | None = None
    model: str | None = None
    api_call_count: int | None = 0


_TOKEN_COLUMNS = (
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "reasoning_tokens",
)
_FIRST_VALUE_WINS = ("billing_provider", "billing_base_url", "billing_mode", "model")
_LATEST_NON_NULL_WINS = ("cost_status", "cost_source", "pricing_version")


def apply_token_usage(db: Bind, session_id: str, usage: TokenUsage, absolute: bool) -> None:
    """Add (or, with ``absolute``, set) token and cost figures; creates a missing session.

    Incremental mode treats a NULL counter as 0. ``model`` and the billing fields keep
    the first non-NULL value ever written; cost status/source/pricing take the latest
    non-NULL value. On a file that keeps per-model usage rows (a newer upstream's), an
    incremental update adds to its row there too (:mod:`.model_usage`).
    """
    insert_session(db, session_id, "unknown")
    columns = Session.__table__.c
    values: dict[str, Any] = {}
    for name in _TOKEN_COLUMNS:
        given = getattr(usage, name)
        if absolute:
            values[name] = given
        else:
            values[name] = func.coalesce(columns[name], 0) + (given or 0)
    if absolute:
        values["estimated_cost_usd"] = usage.estimated_cost_usd or 0.0
        values["api_call_count"] = usage.api_call_count
    else:
        values["estimated_cost_usd"] = func.coalesce(columns.estimated_cost_usd, 0.0) + (
            usage.estimated_cost_usd or 0.0
        )
        values["api_call_count"] = func.coalesce(columns.api_call_count, 0) + (usage.api_call_count or 0)
    if usage.actual_cost_usd is not None:
        values["actual_cost_usd"] = (
            usage.actual_cost_usd
            if absolute
            else func.coalesce(columns.actual_cost_usd, 0.0) + usage.actual_cost_usd
        )
    for name in _LATEST_NON_NULL_WINS:
        if getattr(usage, name) is not None:
            values[name] = getattr(usage, name)
    for name in _FIRST_VALUE_WINS:
        if getattr(usage, name) is not None:
            values[name] = func.coalesce(columns[name], getattr(usage, name))
    run(db, update(Session).where(Session.id == session_id).values(**values))
    if not absolute:
        # Absolute totals cannot be split by route (upstream records none for them either).
        model_usage.record(db, session_id, usage)


# --- titles -------------------------------------------------------------------------


def title_owner(db: Bind, title: str, other_than: str) -> str | None:
    """Id of a session other than ``other_than`` holding exactly ``title``."""
    return scalar_text(
        db, select(Session.id).where(Session.title == title, Session.id != other_than).limit(1)
    )


def set_title(db: Bind, session_id: str, title: str | None) -> bool:
    """Set (``None``: clear) a session's title; ``False`` if there is no such session.

    A title held by a session that ``session_id`` continues after compression (see
    :func:`hermes_store.repository.lineage.compression_ancestors`) moves to
    ``session_id``: that ancestor is hidden behind its continuation in every listing, so
    its title could otherwise never be taken back.

    :raises ValueError: when any other session holds the title.
    """
    if title is None:
        return set_column(db, session_id, title=None) > 0
    _take_title_from_ancestor(db, title, session_id)
    _refuse_title_in_use(db, title, session_id)
    try:
        # The check above serialises writers only on SQLite (BEGIN IMMEDIATE). On a server
        # two writers can pass it at once; the unique index then refuses the later one once
        # the earlier has committed. The UPDATE runs in a savepoint so that this transaction
        # can still read who won, and the loser gets the same ValueError as on SQLite.
        with connection_of(db).begin_nested():
            changed = set_column(db, session_id, title=title)
    except IntegrityError as exc:
        if violated_unique_index(exc) != TITLE_INDEX:
            raise
        _refuse_title_in_use(db, title, session_id)
        raise  # the winner has since given the title up again: report what the server said
    return changed > 0


def _take_title_from_ancestor(db: Bind, title: str, session_id: str) -> None:
    """Clear ``title`` from its holder when that is a compression ancestor of ``session_id``."""
    owner = title_owner(db, title, session_id)
    if owner is not None and owner in lineage.compression_ancestors(db, session_id):
        set_column(db, owner, title=None)


def _refuse_title_in_use(db: Bind, title: str, session_id: str) -> None:
    owner = title_owner(db, title, session_id)
    if owner is not None:
        raise ValueError(f"Title '{title}' is already in use by session {owner}")


def resolve_title(db: Bind, title: str) -> str | None:
    """The latest ``"<title> #N"`` session if any, else the session titled exactly ``title``."""
    exact = id_by_title(db, title)
    return latest_numbered_variant(db, title) or exact


def id_by_title(db: Bind, title: str) -> str | None:
    """Id of the session titled exactly ``title`` (case-sensitive)."""
    return scalar_text(db, select(Session.id).where(Session.title == title))


def row_by_title(db: Bind, title: str) -> dict[str, Any] | None:
    """The full row of the session titled exactly ``title``."""
    rows = fetch_dicts(db, f"{_SELECT_SESSION} WHERE title = :title", {"title": title})
    return rows[0] if rows else None


def _ascii_case_like(db: Bind, column: Any, pattern: str) -> ColumnElement[bool]:
    """``LIKE`` that ignores case as SQLite's does (PostgreSQL's LIKE is case-sensitive)."""
    return backend_for(db).ascii_case_like(column, pattern)


def _numbered_variants(db: Bind, title: str) -> ColumnElement[bool]:
    return _ascii_case_like(db, Session.title, f"{escape_like(title)} #%")


def latest_numbered_variant(db: Bind, title: str) -> str | None:
    """Id of the most recently started session titled ``"<title> #…"``."""
    return scalar_text(
        db,
        select(Session.id).where(_numbered_variants(db, title)).order_by(Session.started_at.desc()).limit(1),
    )


_TRAILING_NUMBER = re.compile(r" #([0-9]+)$")


def next_title_in_lineage(db: Bind, base_title: str) -> str:
    """``"<base> #N"`` with N one above the highest number in use, or the base if unused."""
    base, _ = split_title_number(base_title)
    titles = (
        run(db, select(Session.title).where((Session.title == base) | _numbered_variants(db, base)))
        .scalars()
        .all()
    )
    if not titles:
        return base
    highest = 1
    for title in titles:
        match = _TRAILING_NUMBER.search(title or "")
        if match:
            highest = max(highest, int(match.group(1)))
    return f"{base} #{highest + 1}"


def resolve_id_prefix(db: Bind, prefix: str) -> str | None:
    """The id equal to ``prefix``, else the only id starting with it, else ``None``."""
    if exists_id(db, prefix):
        return prefix
    ids = (
        run(
            db,
            select(Session.id)
            .where(_ascii_case_like(db, Session.id, f"{escape_like(prefix)}%"))
            .order_by(Session.started_at.desc())
            .limit(2),
        )
        .scalars()
        .all()
    )
    return ids[0] if len(ids) == 1 else None


# --- deletion -----------------------------------------------------------------------

DELETE_BATCH = 500
"""Sessions deleted per statement, and per transaction where a sweep runs in batches:
bounded, so that no statement meets a driver's parameter limit and no sweep holds the
write lock for long."""
MESSAGES_PER_BATCH = 2_000
"""The most messages a prune batch deletes (by the sessions' counters). The prune sizes its
batches below that by how long they take (``api.features.sweeps.TimedBudget``): on SQLite
each deleted message also costs its two full-text index entries, so a batch's time, and
the wait of every other writer behind it, depends on the machine and its load. A session
holding more than a batch loses its messages a batch at a time and then goes."""


def delete_sessions(db: Bind, ids: Sequence[str]) -> None:
    """Delete sessions and their messages, detaching their children first.

    Children (compression continuations, branches, untagged sub-agents) are kept with
    ``parent_session_id = NULL``; grandchildren keep their link to the child. On a file
    that shares system prompts, the prompts no session names any more go too.
    """
    for chunk_start in range(0, len(ids), DELETE_BATCH):
        chunk = list(ids[chunk_start : chunk_start + DELETE_BATCH])
        run(db, update(Session).where(Session.parent_session_id.in_(chunk)).values(parent_session_id=None))
        run(db, delete(Message).where(Message.session_id.in_(chunk)))
        run(db, delete(Session).where(Session.id.in_(chunk)))
    if ids:
        system_prompts.forget_unused(db)


def delete_with_delegates(db: Bind, ids: Sequence[str], keep: Collection[str] = ()) -> list[str]:
    """Delete stored sessions ``ids`` and their delegate sub-agents (:mod:`.delegates`);
    other children are detached. Returns the delegates' ids (``keep``: ids the caller
    deletes in another batch, never taken as delegates here)."""
    delegates = delegate_children(db, ids, keep)
    delete_sessions(db, delegates)
    delete_sessions(db, ids)
    return delegates


def delete_one(db: Bind, session_id: str) -> list[str]:
    """Delete one session with its delegate sub-agents, detaching its other children.

    Returns the ids deleted, the session's first; empty if there is no such session.
    """
    if not exists_id(db, session_id):
        return []
    return [session_id, *delete_with_delegates(db, [session_id])]


def prune_batch(
    db: Bind, cutoff: float, source: str | None, message_budget: int = MESSAGES_PER_BATCH
) -> list[str] | None:
    """Delete the oldest ended sessions started before ``cutoff`` (of ``source``), at most
    :data:`DELETE_BATCH` of them holding at most ``message_budget`` messages, detaching
    their children; returns their ids.

    A session that alone holds more than the budget loses its oldest ``message_budget``
    messages instead, and ``None`` says so (call again): a batch never holds the write lock
    for a whole huge session, and one killed part-way is finished by the next prune, as the
    session is still ended and old. Delegates are not cascaded: a pruned session's
    sub-agents are ended sessions of their own and go by their own start time.
    """
    ids = prunable_ids(db, cutoff, source, limit=DELETE_BATCH, message_budget=message_budget)
    if len(ids) == 1 and _delete_oldest_messages(db, ids[0], message_budget + 1) > message_budget:
        return None
    delete_sessions(db, ids)
    return ids


def _delete_oldest_messages(db: Bind, session_id: str, limit: int) -> int:
    """Delete up to ``limit`` of a session's messages, oldest first, when it holds more than
    ``limit - 1``; returns how many it holds (counted up to ``limit``)."""
    held = int(
        run(
            db,
            select(func.count()).select_from(
                select(Message.id).where(Message.session_id == session_id).limit(limit).subquery()
            ),
        ).scalar_one()
    )
    if held >= limit:
        oldest = select(Message.id).where(Message.session_id == session_id).order_by(Message.id)
        run(db, delete(Message).where(Message.id.in_(oldest.limit(limit - 1).scalar_subquery())))
    return held


def delete_ghosts(db: Bind, cutoff: float) -> list[str]:
    """Delete up to :data:`DELETE_BATCH` ghost sessions (:func:`ghost_ids`) started
    before ``cutoff``, detaching their children; their ids."""
    ids = ghost_ids(db, cutoff, limit=DELETE_BATCH)
    delete_sessions(db, ids)
    return ids


def prunable_ids(
    db: Bind,
    cutoff: float,
    source: str | None,
    limit: int | None = None,
    message_budget: int | None = None,
) -> list[str]:
    """Ended sessions started before ``cutoff`` (optionally of one source), oldest first:
    at most ``limit``, and, with a ``message_budget``, only as many as hold that many
    messages in all by their counters (always at least the first)."""
    query = select(Session.id, func.coalesce(Session.message_count, 0)).where(
        Session.started_at < cutoff, Session.ended_at.is_not(None)
    )
    if source:
        query = query.where(Session.source == source)
    rows = run(db, query.order_by(Session.started_at, Session.id).limit(limit)).all()
    if message_budget is None:
        return [row[0] for row in rows]
    chosen: list[str] = []
    held = 0
    for session_id, count in rows:
        held += count
        if chosen and held > message_budget:
            break
        chosen.append(session_id)
    return chosen


def count_prunable(db: Bind, cutoff: float, source: str | None) -> tuple[int, int]:
    """How many sessions :func:`prunable_ids` would give, and the messages they hold."""
    query = select(func.count(), func.coalesce(func.sum(Session.message_count), 0)).where(
        Session.started_at < cutoff, Session.ended_at.is_not(None)
    )
    if source:
        query = query.where(Session.source == source)
    sessions_, messages_ = run(db, query).one()
    return int(sessions_), int(messages_)


def ghost_ids(db: Bind, cutoff: float, limit: int | None = None) -> list[str]:
    """Untitled, ended, message-less ``tui`` sessions started before ``cutoff``."""
    has_messages = exists().where(Message.session_id == Session.id)
    query = select(Session.id).where(
        Session.source == "tui",
        Session.title.is_(None),
        Session.ended_at.is_not(None),
        Session.started_at < cutoff,
        ~has_messages,
    )
    return list(run(db, query.order_by(Session.id).limit(limit)).scalars())


def count(db: Bind, source: str | None = None) -> int:
    """Number of sessions, optionally of one source."""
    query = select(func.count()).select_from(Session)
    if source:
        query = query.where(Session.source == source)
    return int(run(db, query).scalar_one())


def ids_with_prefix(db: Bind, prefix: str, limit: int) -> list[tuple[str, str | None]]:
    """Up to ``limit`` (id, title) pairs whose id starts with ``prefix`` (literally), newest first."""
    query = (
        select(Session.id, Session.title)
        .where(Session.id.like(escape_like(prefix) + "%", escape="\\"))
        .order_by(Session.started_at.desc())
        .limit(limit)
    )
    return [(str(row[0]), row[1]) for row in run(db, query)]
