"""Health checks of a store and the repairs for what they find (``hermes-store doctor``).

The checks run on an engine, not a ``SessionDB``: a damaged or unmigrated file must be
examined as it is, never upgraded or written by opening it.

Checks (SQLite-only ones are skipped on other backends):

* schema — the Alembic revision is ours and current;
* integrity — ``PRAGMA integrity_check``;
* FTS — for ``messages_fts`` and ``messages_fts_trigram``: the table and its three
  triggers exist, FTS5's own ``integrity-check`` passes, and the index holds exactly one
  up-to-date row per message (no missing, extra or stale rows);
* orphans — messages whose session is gone; sessions whose parent is gone;
* counters — ``message_count`` and ``tool_call_count`` agree with the messages;
* WAL — the size of the ``-wal`` file.

``--fix`` recreates missing FTS tables and triggers, rebuilds both indexes from
``messages`` (``DELETE`` + ``INSERT … SELECT``; FTS5's ``'rebuild'`` command would only
re-read the inline tables' own copy), gives orphaned messages a placeholder session,
detaches sessions from missing parents, recomputes counters — all in one write
transaction — and finally truncates the WAL.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from hermes_store.db.backends import backend_for
from hermes_store.db.engine import sqlite_path, write_engine
from hermes_store.db.profiles import table_names
from hermes_store.schema.file_layout import CJK_INDEX, read_layout
from hermes_store.schema.fts_ddl import FTS_TABLES, fts_triggers
from hermes_store.schema.indexed_text import indexed_text
from hermes_store.schema.migrate import read_schema_state

Status = Literal["ok", "warn", "fail", "fixed", "skipped"]
WAL_WARN_BYTES = 64 * 1024 * 1024
_SESSIONS = sa.table("sessions", sa.column("id"), sa.column("message_count"), sa.column("tool_call_count"))


@dataclass
class Finding:
    """The outcome of one check."""

    check: str
    status: Status
    detail: str
    fixable: bool = False

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"check": self.check, "status": self.status, "detail": self.detail, "fixable": self.fixable}


@dataclass
class _Facts:
    """What the checks found, kept for the fixes."""

    fts_broken: set[str]
    missing_fts_objects: dict[str, list[str]]
    orphan_messages: int = 0
    dangling_parents: int = 0
    counter_fixes: dict[str, tuple[int, int]] | None = None
    big_wal: bool = False


def tool_call_units(raw: str | bytes | None) -> int:
    """How much a stored ``tool_calls`` value adds to ``tool_call_count`` (list length, else 1)."""
    if raw is None:
        return 0
    try:
        value = json.loads(raw)
    except (TypeError, ValueError):
        return 1
    return len(value) if isinstance(value, list) else 1


def _mib(size: int) -> str:
    return f"{size / 2**20:.1f} MiB"


def _names(connection: Connection, kind: str) -> set[str]:
    rows = connection.exec_driver_sql("SELECT name FROM sqlite_master WHERE type = ?", (kind,)).all()
    return {str(row[0]) for row in rows}


def _count(connection: Connection, sql: str) -> int:
    return int(connection.exec_driver_sql(sql).scalar() or 0)


class Doctor:
    """Runs the checks on one engine and applies fixes on request."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.sqlite = backend_for(engine).is_file
        self.at_head = False
        self.newer = False
        self.facts = _Facts(set(), {})

    # --- checks -------------------------------------------------------------------------

    def check(self) -> list[Finding]:
        """Run every check; returns one finding per check (in a stable order)."""
        self.facts = _Facts(set(), {})
        findings = [self._schema()]
        if findings[0].status == "fail":
            return findings
        with self.engine.connect() as connection:
            findings.append(self._integrity(connection))
            findings.extend(self._fts(connection))
            findings.extend(self._orphans(connection))
            findings.append(self._counters(connection))
        findings.append(self._wal())
        return findings

    def _schema(self) -> Finding:
        state = read_schema_state(self.engine)
        self.at_head = state.at_head
        self.newer = state.newer
        with self.engine.connect() as connection:
            tables = table_names(connection)
        if not {"sessions", "messages"} <= tables:
            return Finding(
                "schema",
                "fail",
                "no sessions/messages tables: not a Hermes store (create the schema: 'hermes-store upgrade')",
            )
        if state.newer:
            if state.revision is None:
                detail = (
                    f"schema_version {state.legacy_version}, written by a newer Hermes: used as it is, "
                    "never migrated by this hermes_store ('hermes-store info' says how)"
                )
            else:
                detail = (
                    f"revision {state.revision} is newer than this hermes_store; "
                    "update it: pip install -U hermes-store"
                )
            return Finding("schema", "warn", detail)
        if not state.at_head:
            where = state.revision or f"legacy schema_version {state.legacy_version}"
            return Finding("schema", "warn", f"at {where}, not head; run 'hermes-store upgrade'")
        return Finding("schema", "ok", f"revision {state.revision}, schema_version {state.legacy_version}")

    def _integrity(self, connection: Connection) -> Finding:
        if not self.sqlite:
            return Finding("integrity", "skipped", "SQLite only")
        rows = [str(row[0]) for row in connection.exec_driver_sql("PRAGMA integrity_check(20)").all()]
        if rows == ["ok"]:
            return Finding("integrity", "ok", "integrity_check: ok")
        return Finding("integrity", "fail", "integrity_check: " + "; ".join(rows[:5]) + " (restore a backup)")

    def _fts(self, connection: Connection) -> Iterator[Finding]:
        if not self.sqlite:
            yield Finding("fts", "skipped", "SQLite only")
            return
        layout = read_layout(connection)
        if self.newer or layout.external_fts:
            # A newer upstream's layout: FTS5's own check reads any layout; repairs are Hermes'.
            yield from self._fts5_checks(connection, layout.fts_layout)
            return
        if not self.at_head:
            yield Finding("fts", "skipped", "the schema is not at head; run 'hermes-store upgrade' first")
            return
        tables = _names(connection, "table")
        triggers = _names(connection, "trigger")
        for table in FTS_TABLES:
            missing = [] if table in tables else [table]
            missing += [name for name in fts_triggers(table) if name not in triggers]
            if missing:
                self.facts.fts_broken.add(table)
                self.facts.missing_fts_objects[table] = missing
                yield Finding(f"fts:{table}", "fail", "missing " + ", ".join(missing), fixable=True)
                continue
            yield self._fts_table(connection, table)

    def _fts5_checks(self, connection: Connection, layout: int | None) -> Iterator[Finding]:
        """FTS5's ``integrity-check`` of each full-text table of a file in a newer upstream
        layout (its repair is left to the Hermes that wrote it)."""
        tables = _names(connection, "table")
        for table in (*FTS_TABLES, CJK_INDEX):
            if table not in tables:
                continue
            problem = self._fts5_integrity(connection, table)
            if problem is None:
                yield Finding(f"fts:{table}", "ok", f"FTS5 integrity-check passes (Hermes layout {layout})")
            else:
                detail = f"{problem}; open the file with the Hermes that wrote it to rebuild the index"
                yield Finding(f"fts:{table}", "fail", detail)

    @staticmethod
    def _fts5_integrity(connection: Connection, table: str) -> str | None:
        """FTS5's own ``integrity-check`` of ``table``: ``None`` when it passes, else why not."""
        if connection.in_transaction():
            connection.rollback()
        try:
            connection.exec_driver_sql(f"INSERT INTO {table}({table}) VALUES('integrity-check')")
        except sa.exc.DBAPIError as exc:
            return f"FTS5 integrity-check failed ({str(exc.orig).strip()})"
        finally:
            connection.rollback()
        return None

    def _fts_table(self, connection: Connection, table: str) -> Finding:
        failed = self._fts5_integrity(connection, table)
        problems = [] if failed is None else [failed]
        if not problems:
            text = indexed_text("m.")
            missing = _count(
                connection,
                "SELECT COUNT(*) FROM messages m "
                f"WHERE NOT EXISTS (SELECT 1 FROM {table} f WHERE f.rowid = m.id)",
            )
            extra = _count(
                connection,
                f"SELECT COUNT(*) FROM {table} f "
                "WHERE NOT EXISTS (SELECT 1 FROM messages m WHERE m.id = f.rowid)",
            )
            stale = _count(
                connection,
                f"SELECT COUNT(*) FROM messages m JOIN {table} f ON f.rowid = m.id "
                f"WHERE f.content IS NOT ({text})",
            )
            for number, what in (
                (missing, "messages not indexed"),
                (extra, "rows of deleted messages"),
                (stale, "stale rows"),
            ):
                if number:
                    problems.append(f"{number} {what}")
        connection.rollback()
        if problems:
            self.facts.fts_broken.add(table)
            return Finding(f"fts:{table}", "fail", "; ".join(problems), fixable=True)
        return Finding(f"fts:{table}", "ok", "index matches messages")

    def _orphans(self, connection: Connection) -> Iterator[Finding]:
        orphans = _count(
            connection,
            "SELECT COUNT(DISTINCT session_id) FROM messages m "
            "WHERE NOT EXISTS (SELECT 1 FROM sessions s WHERE s.id = m.session_id)",
        )
        self.facts.orphan_messages = orphans
        if orphans:
            yield Finding(
                "orphan-messages", "fail", f"messages of {orphans} missing session(s)", fixable=True
            )
        else:
            yield Finding("orphan-messages", "ok", "every message has its session")
        dangling = _count(
            connection,
            "SELECT COUNT(*) FROM sessions s WHERE s.parent_session_id IS NOT NULL "
            "AND NOT EXISTS (SELECT 1 FROM sessions p WHERE p.id = s.parent_session_id)",
        )
        self.facts.dangling_parents = dangling
        if dangling:
            yield Finding(
                "orphan-sessions", "fail", f"{dangling} session(s) name a missing parent", fixable=True
            )
        else:
            yield Finding("orphan-sessions", "ok", "every parent exists")

    def _counters(self, connection: Connection) -> Finding:
        expected_messages: dict[str, int] = {
            str(row[0]): int(row[1])
            for row in connection.exec_driver_sql(
                "SELECT session_id, COUNT(*) FROM messages GROUP BY session_id"
            )
        }
        expected_tools: dict[str, int] = defaultdict(int)
        # Streamed; the option is given to this statement only (Connection.execution_options
        # would change the connection for every later statement, the fix's UPDATEs too).
        rows = connection.exec_driver_sql(
            "SELECT session_id, tool_calls FROM messages WHERE tool_calls IS NOT NULL",
            execution_options={"yield_per": 2000},
        )
        for session_id, tool_calls in rows:
            expected_tools[str(session_id)] += tool_call_units(tool_calls)
        fixes: dict[str, tuple[int, int]] = {}
        for session_id, message_count, tool_call_count in connection.exec_driver_sql(
            "SELECT id, message_count, tool_call_count FROM sessions"
        ):
            want = (expected_messages.get(str(session_id), 0), expected_tools.get(str(session_id), 0))
            if (message_count, tool_call_count) != want:
                fixes[str(session_id)] = want
        self.facts.counter_fixes = fixes
        if fixes:
            sample = ", ".join(sorted(fixes)[:3])
            return Finding(
                "counters",
                "fail",
                f"{len(fixes)} session(s) with wrong message/tool-call counts ({sample}…)",
                True,
            )
        return Finding("counters", "ok", "message and tool-call counts agree")

    def _wal(self) -> Finding:
        path = sqlite_path(self.engine.url)
        if path is None:
            return Finding("wal", "skipped", "SQLite files only")
        wal = Path(f"{path}-wal")
        size = wal.stat().st_size if wal.exists() else 0
        if size > WAL_WARN_BYTES:
            self.facts.big_wal = True
            return Finding("wal", "warn", f"WAL is {_mib(size)}; a checkpoint would shrink it", fixable=True)
        return Finding("wal", "ok", f"WAL is {_mib(size)}")

    # --- fixes --------------------------------------------------------------------------------

    def fix(self) -> list[str]:
        """Repair what the last :meth:`check` found; returns what was done."""
        done: list[str] = []
        facts = self.facts
        with write_engine(self.engine).connect() as connection, connection.begin():
            for table in sorted(facts.fts_broken):
                for name in facts.missing_fts_objects.get(table, []):
                    ddl = FTS_TABLES[table] if name == table else fts_triggers(table)[name]
                    connection.exec_driver_sql(ddl)
                connection.exec_driver_sql(f"DELETE FROM {table}")
                connection.exec_driver_sql(
                    f"INSERT INTO {table}(rowid, content) SELECT id, {indexed_text()} FROM messages"
                )
                done.append(f"rebuilt {table}")
            if facts.orphan_messages:
                connection.exec_driver_sql(
                    "INSERT INTO sessions (id, source, started_at) "
                    "SELECT session_id, 'unknown', MIN(timestamp) FROM messages m "
                    "WHERE NOT EXISTS (SELECT 1 FROM sessions s WHERE s.id = m.session_id) "
                    "GROUP BY session_id"
                )
                done.append(f"created {facts.orphan_messages} placeholder session(s) for orphaned messages")
            if facts.dangling_parents:
                connection.exec_driver_sql(
                    "UPDATE sessions SET parent_session_id = NULL WHERE parent_session_id IS NOT NULL "
                    "AND NOT EXISTS (SELECT 1 FROM sessions p WHERE p.id = sessions.parent_session_id)"
                )
                done.append(f"detached {facts.dangling_parents} session(s) from missing parents")
            # Counters last (placeholder sessions need theirs too), in this same transaction.
            if facts.counter_fixes or facts.orphan_messages:
                fixed = self._fix_counters(connection)
                if fixed:
                    done.append(f"recomputed counters of {fixed} session(s)")
        if self.sqlite and sqlite_path(self.engine.url) is not None:
            raw = self.engine.raw_connection()
            try:
                cursor = raw.cursor()
                cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                cursor.close()
            finally:
                raw.close()
            if facts.big_wal:
                done.append("truncated the WAL")
        return done

    def _fix_counters(self, connection: Connection) -> int:
        """Recompute the counters from the rows as they are now and write them; returns how many.

        Never the figures of the check: a message appended since then would be lost from
        them. The sessions are locked first, so no append can commit between the count and
        the write (SQLite's ``BEGIN IMMEDIATE`` already holds the write lock; PostgreSQL
        waits here for appends in flight, whose rows the count then sees).
        """
        connection.execute(sa.select(_SESSIONS.c.id).with_for_update()).close()
        self._counters(connection)
        fixes = self.facts.counter_fixes or {}
        for session_id, (messages, tools) in fixes.items():
            connection.execute(
                sa.update(_SESSIONS)
                .where(_SESSIONS.c.id == session_id)
                .values(message_count=messages, tool_call_count=tools)
            )
        return len(fixes)


def run(engine: Engine, *, fix: bool) -> tuple[list[Finding], list[str]]:
    """Check ``engine``'s store; with ``fix``, repair and check again.

    Returns the final findings (repaired ones marked ``fixed``) and the repairs made.
    """
    doctor = Doctor(engine)
    findings = doctor.check()
    needs_fix = [f for f in findings if f.fixable and f.status in ("fail", "warn")]
    if not fix or not needs_fix:
        return findings, []
    done = doctor.fix()
    after = {f.check: f for f in doctor.check()}
    final = []
    for finding in findings:
        now = after.get(finding.check, finding)
        if finding in needs_fix and now.status == "ok":
            final.append(Finding(finding.check, "fixed", f"{finding.detail} → {now.detail}"))
        else:
            final.append(now)
    return final, done
