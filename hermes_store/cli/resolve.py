"""Finding the session a user means, and completing session ids in the shell.

A session can be named by its id, its exact title, a unique id prefix, or a title
whose numbered continuations exist (``"my project"`` → the latest ``"my project #3"``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click
import sqlalchemy as sa
from click.shell_completion import CompletionItem
from sqlalchemy import orm

from hermes_store.cli.errors import SessionNotFound
from hermes_store.db.engine import create_engine, resolve_url, sqlite_path
from hermes_store.repository import sessions as sessions_repo

if TYPE_CHECKING:
    from hermes_store.api.session_db import SessionDB

_SHOWN_CANDIDATES = 5
_COMPLETION_LIMIT = 50


def _prefix_matches(db: SessionDB, prefix: str, limit: int) -> list[str]:
    with db.unit_of_work.read() as session:
        return [session_id for session_id, _title in sessions_repo.ids_with_prefix(session, prefix, limit)]


def resolve_session(db: SessionDB, reference: str) -> str:
    """The id of the session ``reference`` names (id, title or unique id prefix).

    :raises SessionNotFound: when nothing matches, or a prefix matches several sessions.
    """
    if not reference:
        raise SessionNotFound("no session given")
    if db.get_session(reference) is not None:
        return reference
    titled = db.get_session_by_title(reference)
    if titled is not None:
        return str(titled["id"])
    by_prefix = db.resolve_session_id(reference)
    if by_prefix is not None:
        return by_prefix
    by_title = db.resolve_session_by_title(reference)
    if by_title is not None:
        return by_title
    candidates = _prefix_matches(db, reference, _SHOWN_CANDIDATES + 1)
    if len(candidates) > 1:
        shown = ", ".join(candidates[:_SHOWN_CANDIDATES])
        more = ", …" if len(candidates) > _SHOWN_CANDIDATES else ""
        raise SessionNotFound(f"'{reference}' matches several sessions ({shown}{more}); give more of the id")
    raise SessionNotFound(f"no session matches '{reference}' (by id, title or id prefix)")


def complete_session(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """Shell completion for session arguments: ids starting with what was typed.

    Never fails and never creates a database: any problem gives no suggestions.
    """
    try:
        root = ctx.find_root()
        params: dict[str, Any] = root.params
        raw = params.get("db") or params.get("url")
        url = resolve_url(raw or None)
        path = sqlite_path(url)
        if path is not None and not path.exists():
            return []
        engine = create_engine(url, poolclass=sa.pool.NullPool)
        try:
            # A bare ORM session, not SessionDB: completion must never create or migrate.
            with orm.Session(engine) as session:
                rows = sessions_repo.ids_with_prefix(session, incomplete, _COMPLETION_LIMIT)
        finally:
            engine.dispose()
        return [CompletionItem(str(row[0]), help=row[1] or None) for row in rows]
    except Exception:  # completion must never print a traceback into the shell
        return []
