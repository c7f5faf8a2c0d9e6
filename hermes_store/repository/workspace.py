"""Where sessions ran: working directory, git branch and repository root.

Functions take the caller's connection and never commit.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import bindparam, func, select, update

from hermes_store.db.execution import Bind, run
from hermes_store.schema.models import Session


def set_cwd(db: Bind, session_id: str, cwd: str, git_branch: str | None, git_repo_root: str | None) -> None:
    """Store a session's working directory; the git fields only when given (not ``None``)."""
    values: dict[str, Any] = {"cwd": cwd}
    if git_branch is not None:
        values["git_branch"] = git_branch
    if git_repo_root is not None:
        values["git_repo_root"] = git_repo_root
    run(db, update(Session).where(Session.id == session_id).values(**values))


def fill_repo_roots(db: Bind, roots: Sequence[tuple[str, str]]) -> None:
    """For each (cwd, root): give ``root`` to the sessions in ``cwd`` that have no
    repository root yet (NULL or empty); a recorded root is never replaced."""
    if not roots:
        return
    statement = (
        update(Session)
        .where(Session.cwd == bindparam("in_cwd"), func.coalesce(Session.git_repo_root, "") == "")
        .values(git_repo_root=bindparam("new_root"))
    )
    run(db, statement, [{"in_cwd": cwd, "new_root": root} for cwd, root in roots])


def distinct_cwds(db: Bind, include_archived: bool) -> list[dict[str, Any]]:
    """Each working directory sessions ran in (blank ones left out), ordered by path,
    with how many sessions ran there and when the latest of them ended or started."""
    last_active = func.max(func.coalesce(Session.ended_at, Session.started_at, 0.0))
    query = (
        select(Session.cwd, func.count().label("sessions"), last_active.label("last_active"))
        .where(Session.cwd.is_not(None), func.trim(Session.cwd) != "")
        .group_by(Session.cwd)
        .order_by(Session.cwd)
    )
    if not include_archived:
        query = query.where(Session.archived == 0)
    return [
        {"cwd": row.cwd, "sessions": int(row.sessions or 0), "last_active": float(row.last_active or 0)}
        for row in run(db, query)
    ]
