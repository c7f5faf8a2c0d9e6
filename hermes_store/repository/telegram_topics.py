"""Telegram DM topic mode: which private chats run one session per forum topic, and
which topic is bound to which session.

``telegram_dm_topic_mode`` holds one row per chat (on or off, and what the chat was
found able to do); ``telegram_dm_topic_bindings`` one row per (chat, topic thread), each
bound to one session, and a session to at most one topic (a unique index). Deleting a
session deletes its binding (``ON DELETE CASCADE``).

On SQLite the tables exist only once topic mode was first used (:func:`open_tables`, as
upstream Hermes does); until then every function here answers as for empty tables and
creates nothing. On PostgreSQL they are part of the schema.
"""

from __future__ import annotations

import logging
from typing import Any

from sqlalchemy import delete, exists, select, text, update
from sqlalchemy.exc import IntegrityError

from hermes_store.db.backends import backend_for
from hermes_store.db.execution import Bind, fetch_dicts, run
from hermes_store.db.server_errors import violated_unique_index
from hermes_store.repository import meta
from hermes_store.repository.listing import LAST_ACTIVE_SQL, SESSION_COLUMNS_SQL, finish_preview, preview_sql
from hermes_store.schema.models import TelegramTopicBinding, TelegramTopicMode
from hermes_store.schema.telegram_topic_ddl import (
    BINDINGS_WITHOUT_SESSION,
    DROPPED_BINDINGS_WARNING,
    REBUILT_BINDINGS,
    SCHEMA_VERSION,
    SCHEMA_VERSION_KEY,
    SQLITE_TOPIC_DDL,
    TOPIC_TABLES,
    cascade_rebuild,
)

logger = logging.getLogger(__name__)

SESSION_INDEX = "idx_telegram_dm_topic_bindings_session"
ALREADY_LINKED = "session is already linked to another Telegram topic"

_BINDING_COLUMNS = tuple(TelegramTopicBinding.__table__.columns)


def record_schema_version(db: Bind) -> None:
    """Note in ``state_meta`` that the topic tables have their current layout."""
    meta.put(db, SCHEMA_VERSION_KEY, SCHEMA_VERSION)


def existing_tables(db: Bind) -> frozenset[str]:
    """Which of the two topic tables the store holds (both, always, on PostgreSQL)."""
    if backend_for(db).name != "sqlite":
        return frozenset(TOPIC_TABLES)
    names = run(db, text("SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'telegram_dm%'"))
    return frozenset(str(name) for (name,) in names) & frozenset(TOPIC_TABLES)


def create_tables(db: Bind) -> None:
    """Create whichever topic table or index is missing, and give a bindings table of
    upstream's first layout its cascade (SQLite; PostgreSQL has them at head)."""
    if backend_for(db).name != "sqlite":
        return
    if _bindings_lack_cascade(db):
        _rebuild_bindings_with_cascade(db)
    for statement in SQLITE_TOPIC_DDL:
        run(db, text(statement))


def _bindings_lack_cascade(db: Bind) -> bool:
    """Whether a bindings table exists whose session key does not cascade deletes (the
    layout upstream's first topic-mode release created)."""
    keys = run(
        db, text("SELECT \"table\", on_delete FROM pragma_foreign_key_list('telegram_dm_topic_bindings')")
    )
    return any(table == "sessions" and on_delete != "CASCADE" for table, on_delete in keys)


def _rebuild_bindings_with_cascade(db: Bind) -> None:
    """Recreate the bindings table in its current layout, as revision 0019 does (see
    :func:`~hermes_store.schema.telegram_topic_ddl.cascade_rebuild`)."""
    dangling = run(db, text(BINDINGS_WITHOUT_SESSION)).scalar()
    if dangling:
        logger.warning(DROPPED_BINDINGS_WARNING, dangling)
    current = next(ddl for ddl in SQLITE_TOPIC_DDL if "telegram_dm_topic_bindings (" in ddl)
    columns = ", ".join(column.name for column in _BINDING_COLUMNS)
    rebuilt = current.replace("IF NOT EXISTS telegram_dm_topic_bindings", REBUILT_BINDINGS)
    for statement in cascade_rebuild(rebuilt, columns):
        run(db, text(statement))


def open_tables(db: Bind) -> None:
    """What opting in to topic mode does first: the tables exist afterwards, and
    ``state_meta`` says they have their current layout."""
    create_tables(db)
    record_schema_version(db)


def _has_mode(db: Bind) -> bool:
    return "telegram_dm_topic_mode" in existing_tables(db)


def _has_bindings(db: Bind) -> bool:
    return "telegram_dm_topic_bindings" in existing_tables(db)


def enable(db: Bind, chat_id: str, user_id: str, capabilities: dict[str, int | None], now: float) -> None:
    """Turn topic mode on for the chat, owned by ``user_id``.

    ``capabilities`` holds ``has_topics_enabled`` and ``allows_users_to_create_topics``
    (1, 0 or ``None``), overwritten each time as the latest check of the chat;
    ``activated_at`` keeps the first time the chat was turned on.
    """
    statement = (
        backend_for(db)
        .insert(TelegramTopicMode)
        .values(
            chat_id=chat_id,
            user_id=user_id,
            enabled=1,
            activated_at=now,
            updated_at=now,
            capability_checked_at=now,
            **capabilities,
        )
    )
    replaced = ("user_id", "updated_at", "capability_checked_at", *capabilities)
    run(
        db,
        statement.on_conflict_do_update(
            index_elements=["chat_id"],
            set_={"enabled": 1, **{name: statement.excluded[name] for name in replaced}},
        ),
    )


def disable(db: Bind, chat_id: str, clear_bindings: bool, now: float) -> None:
    """Turn topic mode off for the chat, and unless told otherwise forget its bindings
    (a missing table has nothing to change)."""
    present = existing_tables(db)
    if "telegram_dm_topic_mode" in present:
        _switch_off(db, chat_id, now)
    if clear_bindings and "telegram_dm_topic_bindings" in present:
        run(db, delete(TelegramTopicBinding).where(TelegramTopicBinding.chat_id == chat_id))


def _switch_off(db: Bind, chat_id: str, now: float) -> None:
    run(
        db,
        update(TelegramTopicMode)
        .where(TelegramTopicMode.chat_id == chat_id)
        .values(enabled=0, updated_at=now),
    )


def is_enabled(db: Bind, chat_id: str, user_id: str) -> bool:
    """Whether the chat has topic mode on for exactly this user."""
    if not _has_mode(db):
        return False
    statement = select(TelegramTopicMode.enabled).where(
        TelegramTopicMode.chat_id == chat_id, TelegramTopicMode.user_id == user_id
    )
    return bool(run(db, statement).scalar())


def _bindings(db: Bind, *conditions: Any, newest_first: bool = False) -> list[dict[str, Any]]:
    if not _has_bindings(db):
        return []
    statement = select(*_BINDING_COLUMNS).where(*conditions)
    if newest_first:
        statement = statement.order_by(TelegramTopicBinding.updated_at.desc(), TelegramTopicBinding.thread_id)
    return [dict(row) for row in run(db, statement).mappings()]


def binding(db: Bind, chat_id: str, thread_id: str) -> dict[str, Any] | None:
    """The binding of one topic thread, or ``None``."""
    rows = _bindings(db, TelegramTopicBinding.chat_id == chat_id, TelegramTopicBinding.thread_id == thread_id)
    return rows[0] if rows else None


def binding_of_session(db: Bind, session_id: str) -> dict[str, Any] | None:
    """The binding of the session's topic, or ``None``."""
    rows = _bindings(db, TelegramTopicBinding.session_id == session_id)
    return rows[0] if rows else None


def bindings_of_chat(db: Bind, chat_id: str) -> list[dict[str, Any]]:
    """The chat's bindings, the most recently updated first."""
    return _bindings(db, TelegramTopicBinding.chat_id == chat_id, newest_first=True)


def is_linked(db: Bind, session_id: str) -> bool:
    """Whether the session is bound to some topic."""
    if not _has_bindings(db):
        return False
    statement = select(exists().where(TelegramTopicBinding.session_id == session_id))
    return bool(run(db, statement).scalar())


def bind(db: Bind, binding_values: dict[str, str], now: float) -> None:
    """Bind the topic ``(chat_id, thread_id)`` of ``binding_values`` to its ``session_id``.

    ``binding_values`` holds ``chat_id``, ``thread_id``, ``user_id``, ``session_key``,
    ``session_id`` and ``managed_mode``. A topic already bound gets the new values
    (``linked_at`` stays); a session bound to another topic raises ``ValueError``; a
    session that does not exist fails the foreign key (``IntegrityError``).
    """
    chat_id, thread_id = binding_values["chat_id"], binding_values["thread_id"]
    current = binding_of_session(db, binding_values["session_id"])
    if current is not None and (current["chat_id"], current["thread_id"]) != (chat_id, thread_id):
        raise ValueError(ALREADY_LINKED)
    statement = (
        backend_for(db).insert(TelegramTopicBinding).values(**binding_values, linked_at=now, updated_at=now)
    )
    replaced = ("user_id", "session_key", "session_id", "managed_mode", "updated_at")
    upsert = statement.on_conflict_do_update(
        index_elements=["chat_id", "thread_id"],
        set_={name: statement.excluded[name] for name in replaced},
    )
    try:
        run(db, upsert)
    except IntegrityError as exc:
        # On PostgreSQL another transaction may bind the same session to another topic
        # between the check above and this insert (SQLite's writers run one at a time);
        # the unique index then refuses the later one, which says so as SQLite would.
        if violated_unique_index(exc) == SESSION_INDEX:
            raise ValueError(ALREADY_LINKED) from exc
        raise


def delete_binding(db: Bind, chat_id: str, thread_id: str, now: float) -> int:
    """Delete one topic's binding; returns how many rows went (0 or 1). When it was the
    chat's last binding, topic mode is switched off for the chat as well. Without a
    bindings table nothing is deleted."""
    present = existing_tables(db)
    if "telegram_dm_topic_bindings" not in present:
        return 0
    result = run(
        db,
        delete(TelegramTopicBinding).where(
            TelegramTopicBinding.chat_id == chat_id, TelegramTopicBinding.thread_id == thread_id
        ),
    )
    deleted = int(result.rowcount)
    if deleted and "telegram_dm_topic_mode" in present and not bindings_of_chat(db, chat_id):
        _switch_off(db, chat_id, now)
    return deleted


def unlinked_sessions(db: Bind, user_id: str, limit: int) -> list[dict[str, Any]]:
    """The user's Telegram sessions bound to no topic, most recently active first, each
    with ``last_active`` and ``preview`` computed as the session listing does. Without
    a bindings table no session is bound, so every one of the user's qualifies."""
    preview, preview_params = preview_sql(db)
    unbound = (
        "AND NOT EXISTS (SELECT 1 FROM telegram_dm_topic_bindings b WHERE b.session_id = s.id)"
        if _has_bindings(db)
        else ""
    )
    sql = f"""
    SELECT {SESSION_COLUMNS_SQL}, {LAST_ACTIVE_SQL} AS last_active, {preview} AS preview
    FROM sessions s
    WHERE s.source = 'telegram'
      AND s.user_id = :user_id
      {unbound}
    ORDER BY last_active DESC, s.started_at DESC, s.id DESC
    LIMIT :limit
    """
    rows = fetch_dicts(
        db, sql, {**preview_params, "user_id": user_id, "limit": limit}, content_keys=("preview",)
    )
    for row in rows:
        row["preview"] = finish_preview(row["preview"])
    return rows
