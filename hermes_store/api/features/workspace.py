"""Where sessions ran: working directory and git metadata, for project grouping."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from hermes_store.api.features.base import FacadeBase
from hermes_store.domain.validation import optional_str, require_str
from hermes_store.repository import workspace


class WorkspaceMethods(FacadeBase):
    """A session's ``cwd``, ``git_branch`` and ``git_repo_root``."""

    _ASYNC_READS: ClassVar[tuple[str, ...]] = ("distinct_session_cwds",)
    _ASYNC_WRITES: ClassVar[tuple[str, ...]] = ("update_session_cwd", "backfill_repo_roots")

    def update_session_cwd(
        self,
        session_id: str,
        cwd: str,
        git_branch: str | None = None,
        git_repo_root: str | None = None,
    ) -> None:
        """Record the directory a session runs in; nothing happens without both a session
        id and a ``cwd``.

        ``cwd`` is stored as given. The branch and repository root are stored stripped,
        and only when not blank, so that a failed git probe never erases what an earlier
        one found.
        """
        if not session_id or not cwd:
            return
        require_str("session_id", session_id)
        require_str("cwd", cwd)
        branch = (optional_str("git_branch", git_branch) or "").strip() or None
        repo_root = (optional_str("git_repo_root", git_repo_root) or "").strip() or None
        self._write(
            lambda db: workspace.set_cwd(db, session_id, cwd, branch, repo_root),
            "recording a working directory",
        )

    def backfill_repo_roots(self, cwd_to_root: Mapping[str, str]) -> None:
        """Give each directory's repository root to its sessions that have none yet, in
        one transaction; pairs with an empty directory or root are skipped."""
        pairs = [(cwd, root) for cwd, root in cwd_to_root.items() if cwd and root]
        for cwd, root in pairs:
            require_str("cwd", cwd)
            require_str("root", root)
        if pairs:
            self._write(lambda db: workspace.fill_repo_roots(db, pairs), "recording repository roots")

    def distinct_session_cwds(self, include_archived: bool = False) -> list[dict[str, Any]]:
        """Every non-blank working directory of any session (children too), by path:
        ``{"cwd", "sessions", "last_active"}``, where ``last_active`` is the latest end
        (or start, for a live session) among them. Archived sessions count only when
        ``include_archived``."""
        return self._query(lambda db: workspace.distinct_cwds(db, bool(include_archived)))
