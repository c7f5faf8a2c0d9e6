"""Schema commands: ``upgrade``, ``downgrade``, ``current``, ``history``.

They open a bare engine (never the self-migrating ``SessionDB``) and drive
:mod:`hermes_store.schema.migrate`, so legacy upstream databases are adopted exactly as on a
normal open. On SQLite the whole upgrade runs in one write transaction; on PostgreSQL it
runs online, step by step (``docs/postgresql.md``, "Online migrations"). The progress
display (:func:`~hermes_store.cli.output.step_progress`) has a line per revision (from
Alembic's "Running upgrade 0010 -> 0011" records) and one per long step inside it: batch
backfills (rows done of total) and concurrent index builds (blocks, then tuples, from
``pg_stat_progress_create_index``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import click
from rich.table import Table
from sqlalchemy import orm
from sqlalchemy.engine import Engine

from hermes_store.cli.errors import CliError
from hermes_store.cli.output import console, echo_json, fmt_int, step_progress
from hermes_store.cli.target import StoreTarget, pass_target
from hermes_store.domain.progress import ProgressFn
from hermes_store.repository import facts
from hermes_store.schema import migrate
from hermes_store.schema import revisions as script_history
from hermes_store.schema.migrate import SchemaState, read_schema_state

_ALEMBIC_RUNTIME_LOGGER = "alembic.runtime.migration"


def _describe_state(state: SchemaState) -> str:
    if state.revision is None and state.legacy_version is None:
        return "empty (no schema)"
    if state.revision is None:
        return f"legacy schema_version {state.legacy_version} (not yet adopted)"
    marker = " (head)" if state.at_head else (" (newer than this hermes_store)" if state.newer else "")
    return f"{state.revision}{marker}"


class _StepTracker(logging.Handler):
    """Gives each revision a line of the step display, on its "Running upgrade A -> B" record.

    A revision's line completes when the next one starts (or the run ends); the long steps
    inside a revision (batch backfills, concurrent index builds) report their own lines
    through the same :data:`~hermes_store.domain.progress.ProgressFn`.
    """

    def __init__(self, report: ProgressFn, message_count: int | None) -> None:
        super().__init__(logging.INFO)
        self.report = report
        self.message_count = message_count
        self.steps = 0
        self.current: str | None = None

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if not text.startswith("Running "):
            return
        self.finish()
        self.steps += 1
        step = text.removeprefix("Running ").split(",")[0]
        rows = f" · {fmt_int(self.message_count)} messages" if self.message_count else ""
        self.current = f"{step}{rows}"
        self.report(self.current, 0, 1)

    def finish(self) -> None:
        """Mark the running revision's line done."""
        if self.current is not None:
            self.report(self.current, 1, 1)
            self.current = None


def _message_count(engine: Engine) -> int | None:
    with orm.Session(engine) as session:
        return facts.message_total(session)


@contextmanager
def _tracked_migration(message_count: int | None) -> Iterator[_StepTracker]:
    logger = logging.getLogger(_ALEMBIC_RUNTIME_LOGGER)
    saved_level, saved_propagate = logger.level, logger.propagate
    with step_progress() as report:
        tracker = _StepTracker(report, message_count)
        logger.addHandler(tracker)
        logger.setLevel(logging.INFO)
        logger.propagate = False
        try:
            yield tracker
            tracker.finish()
        finally:
            logger.removeHandler(tracker)
            logger.setLevel(saved_level)
            logger.propagate = saved_propagate


def _run(verb: str, target: StoreTarget, revision: str, create: bool) -> tuple[SchemaState, SchemaState, int]:
    from alembic.util import CommandError

    with target.engine(create=create) as engine:
        before = read_schema_state(engine)
        try:
            with _tracked_migration(_message_count(engine)) as tracker:
                if verb == "upgrade":
                    migrate.upgrade(engine, revision, progress=tracker.report)
                else:
                    migrate.downgrade(engine, revision)
        except CommandError as exc:
            raise CliError(str(exc)) from exc
        after = read_schema_state(engine)
    return before, after, tracker.steps


def _report_change(
    verb: str, target: StoreTarget, before: SchemaState, after: SchemaState, steps: int
) -> None:
    out = console()
    if steps == 0 and before == after:
        out.print(f"{target.describe()}: already at {_describe_state(after)}; nothing to do.")
        return
    if steps == 0 and before.empty:
        # A new SQLite file: made from the head snapshot (hermes_store.schema.sqlite_head).
        out.print(
            f"Created {target.describe()}: {_describe_state(before)} → {_describe_state(after)} "
            "(the schema of the whole history, in one step)"
        )
        return
    out.print(
        f"{verb} {target.describe()}: {_describe_state(before)} → {_describe_state(after)} "
        f"({steps} revision{'s' if steps != 1 else ''} applied)"
    )


@click.command()
@click.argument("revision", default="head")
@pass_target
def upgrade(target: StoreTarget, revision: str) -> None:
    """Create the schema or upgrade it to REVISION (default: head).

    Legacy upstream databases are adopted first. On SQLite the upgrade runs in one
    transaction: it completes, or leaves the database as it was. On PostgreSQL it runs
    online while the running release keeps serving; if it stops part-way, run it again.
    """
    with target.engine(create=True) as engine:
        state = read_schema_state(engine)
    if state.newer:
        console().print(f"{target.describe()}: {_describe_state(state)}; left as it is.")
        return
    before, after, steps = _run("upgrade", target, revision, create=True)
    _report_change("Upgraded", target, before, after, steps)


@click.command()
@click.argument("revision")
@click.option("--yes", "-y", is_flag=True, help="Do not ask before a downgrade that drops rows.")
@pass_target
def downgrade(target: StoreTarget, revision: str, yes: bool) -> None:
    """Downgrade the schema to REVISION, such as 0018, keeping every session and every
    live message.

    Below 0019 the previous release cannot hide messages: the rewound and compacted-away
    ones are set aside until the next upgrade puts them back. Compression leases and
    Telegram topic state are dropped, and archived sessions are listed again: the command
    says how many and asks first (unless --yes). Downgrading to 'base' removes every
    table and asks first (unless --yes).
    """
    target.require_existing()
    if revision == "base" and not yes:
        click.confirm(f"Downgrading {target.describe()} to 'base' deletes all data. Continue?", abort=True)
    elif not yes:
        with target.engine(create=False) as engine:
            losses = migrate.downgrade_losses(engine, revision)
        if losses:
            click.confirm(
                f"Downgrading {target.describe()} to {revision}: {'; '.join(losses)}. Continue?", abort=True
            )
    before, after, steps = _run("downgrade", target, revision, create=False)
    _report_change("Downgraded", target, before, after, steps)


def _state_json(target: StoreTarget, state: SchemaState | None) -> dict[str, Any]:
    return {
        "database": target.describe(),
        "exists": state is not None,
        "revision": state.revision if state else None,
        "schema_version": state.legacy_version if state else None,
        "head": script_history.history().head,
        "at_head": bool(state and state.at_head),
        "newer": bool(state and state.newer),
    }


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_target
def current(target: StoreTarget, as_json: bool) -> None:
    """Show the database's schema revision and upstream schema_version."""
    if not target.exists():
        # Not an error: "is there a store here, and at which revision?" has an answer.
        if as_json:
            echo_json(_state_json(target, None))
        else:
            console().print(f"no database at {target.describe()}")
        return
    with target.engine() as engine:
        state = read_schema_state(engine)
    if as_json:
        echo_json(_state_json(target, state))
        return
    version = "-" if state.legacy_version is None else str(state.legacy_version)
    console().print(f"{_describe_state(state)}  schema_version {version}  ({target.describe()})")


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_target
def history(target: StoreTarget, as_json: bool) -> None:
    """List the schema revisions, oldest first, marking the database's current one."""
    from alembic.script import ScriptDirectory

    state: SchemaState | None = None
    if target.exists():
        with target.engine() as engine:
            state = read_schema_state(engine)
    scripts = ScriptDirectory.from_config(migrate.alembic_config())
    revisions = list(reversed(list(scripts.walk_revisions())))
    rows = [
        {
            "revision": script.revision,
            "down_revision": script.down_revision,
            "description": (script.doc or "").strip(),
            "head": script.is_head,
            "current": state is not None and state.revision == script.revision,
        }
        for script in revisions
    ]
    if as_json:
        echo_json(rows)
        return
    table = Table(box=None, pad_edge=False)
    table.add_column("Revision")
    table.add_column("Description")
    table.add_column("")
    for row in rows:
        marks = [name for name in ("current", "head") if row[name]]
        table.add_row(str(row["revision"]), str(row["description"]), ", ".join(marks))
    console().print(table)


COMMANDS = (upgrade, downgrade, current, history)
