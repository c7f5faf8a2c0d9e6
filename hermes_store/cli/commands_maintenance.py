"""Operating a store: ``info``, ``prune``, ``vacuum``, ``doctor``, ``backup``.

``info``, ``doctor``, ``vacuum`` and ``backup`` look at the database as it is — they
never upgrade it. ``prune`` goes through ``SessionDB`` like any writer.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click
from rich.table import Table
from rich.text import Text
from sqlalchemy import orm
from sqlalchemy.engine import Engine

from hermes_store.admin import doctor as doctor_checks
from hermes_store.admin.backup import DEFAULT_PAGES_PER_STEP, backup_sqlite
from hermes_store.cli.errors import CliError
from hermes_store.cli.output import (
    console,
    echo_json,
    fmt_count,
    fmt_int,
    fmt_size,
    fmt_time,
    progress_bar,
    step_progress,
)
from hermes_store.cli.target import StoreTarget, pass_target
from hermes_store.db.backends import backend_for
from hermes_store.repository import facts, maintenance
from hermes_store.repository import sessions as sessions_repo
from hermes_store.schema import file_layout
from hermes_store.schema import revisions as script_history
from hermes_store.schema.migrate import read_schema_state

# --- info ---------------------------------------------------------------------------------


def _size(path: Path | None, suffix: str = "") -> int | None:
    if path is None:
        return None
    candidate = Path(f"{path}{suffix}")
    return candidate.stat().st_size if candidate.exists() else 0


def gather_info(target: StoreTarget, engine: Engine) -> dict[str, Any]:
    """Facts about the store: location, schema, sizes, counts, journal mode."""
    state = read_schema_state(engine)
    path = target.path
    info: dict[str, Any] = {
        "database": target.describe(),
        "path": str(path) if path else None,
        "backend": f"{backend_for(engine).name}+{engine.dialect.driver}",
        "revision": state.revision,
        "schema_version": state.legacy_version,
        "head": script_history.history().head,
        "at_head": state.at_head,
        "size_bytes": _size(path),
        "wal_bytes": _size(path, "-wal"),
        "shm_bytes": _size(path, "-shm"),
    }
    with orm.Session(engine) as session:
        info.update(facts.storage(session))
        info.update(facts.counts(session))
        if path is not None:
            layout = file_layout.read_layout(session)
            info["layout"] = {
                "schema_version": layout.schema_version,
                "fts_layout": layout.fts_layout,
                "cjk_index": layout.cjk_index,
                "shared_prompts": layout.shared_prompts,
                "other_tables": list(layout.other_tables),
                "summary": file_layout.describe(layout),
                "handling": file_layout.handling(layout),
            }
    return info


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_target
def info(target: StoreTarget, as_json: bool) -> None:
    """Show the store's path, backend, schema revision, sizes, counts, journal mode and layout."""
    with target.engine() as engine:
        facts = gather_info(target, engine)
    if as_json:
        echo_json(facts)
        return
    revision = facts["revision"] or "-"
    if facts["revision"] and facts["at_head"]:
        revision += " (head)"
    elif facts["revision"] is None and facts["schema_version"] is not None:
        revision = "- (legacy database; run 'upgrade')"
    rows = [
        ("Database", facts["database"]),
        ("Backend", facts["backend"]),
        ("Revision", revision),
        ("schema_version", "-" if facts["schema_version"] is None else str(facts["schema_version"])),
        ("Size", fmt_size(facts["size_bytes"])),
    ]
    if facts["path"]:
        rows.append(("WAL", f"{fmt_size(facts['wal_bytes'])} (shm {fmt_size(facts['shm_bytes'])})"))
        rows.append(("Journal mode", str(facts.get("journal_mode") or "-")))
        rows.append(
            (
                "Pages",
                f"{fmt_int(facts.get('page_count'))} × {fmt_int(facts.get('page_size'))} B, "
                f"{fmt_int(facts.get('freelist_count'))} free",
            )
        )
        rows.append(("SQLite", str(facts.get("sqlite_version"))))
        rows.append(("Layout", facts["layout"]["summary"]))
        rows.append(("This release", facts["layout"]["handling"]))
    rows.append(("Sessions", f"{fmt_int(facts['sessions'])} ({fmt_int(facts['live_sessions'])} live)"))
    rows.append(("Messages", fmt_int(facts["messages"])))
    if facts["sources"]:
        rows.append(("Sources", ", ".join(f"{k} {fmt_int(v)}" for k, v in facts["sources"].items())))
    if facts["first_started"] is not None:
        rows.append(("Period", f"{fmt_time(facts['first_started'])} → {fmt_time(facts['last_started'])}"))
    table = Table(box=None, show_header=False, pad_edge=False)
    table.add_column(style="bold")
    table.add_column(overflow="fold")
    for key, value in rows:
        table.add_row(key, value)
    console().print(table)


# --- prune / vacuum -------------------------------------------------------------------------


@click.command()
@click.option(
    "--older-than",
    "days",
    type=click.FloatRange(min=0),
    required=True,
    metavar="DAYS",
    help="Prune ended sessions started more than DAYS ago.",
)
@click.option("--source", metavar="SOURCE", help="Only prune sessions of this source.")
@click.option("--dry-run", is_flag=True, help="Only show what would be pruned.")
@click.option(
    "--sessions-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Also delete the pruned sessions' transcript files in this directory.",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_target
def prune(
    target: StoreTarget,
    days: float,
    source: str | None,
    dry_run: bool,
    sessions_dir: Path | None,
    as_json: bool,
) -> None:
    """Delete ended sessions older than DAYS, with their messages.

    Live sessions are never pruned; children of pruned sessions are kept and detached.
    The prune runs in short batches while agents keep writing, with a progress line on a
    terminal; interrupted, it leaves whole sessions only, and running it again finishes it.
    """
    with target.session_db() as db:
        if dry_run:
            cutoff = time.time() - days * 86400
            with db.unit_of_work.read() as session:
                ids = sessions_repo.prunable_ids(session, cutoff, source)
            if as_json:
                echo_json({"dry_run": True, "count": len(ids), "sessions": ids})
                return
            out = console()
            out.print(f"Would prune {fmt_int(len(ids))} session(s) started more than {days:g} days ago.")
            for session_id in ids[:20]:
                row = db.get_session(session_id) or {}
                out.print(
                    Text(
                        f"  {session_id}  {row.get('title') or ''}  {fmt_time(row.get('started_at'))}",
                        style="dim",
                    )
                )
            if len(ids) > 20:
                out.print(Text(f"  … and {len(ids) - 20} more", style="dim"))
            return
        with step_progress() as report:
            count = db.prune_sessions(days, source=source, sessions_dir=sessions_dir, progress=report)
    if as_json:
        echo_json({"dry_run": False, "count": count})
        return
    console().print(f"Pruned {fmt_int(count)} session(s) from {target.describe()}.")


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_target
def vacuum(target: StoreTarget, as_json: bool) -> None:
    """Checkpoint the WAL and rebuild the file compactly (VACUUM)."""
    with target.engine() as engine:
        before = _size(target.path)
        maintenance.vacuum(engine)
        after = _size(target.path)
    if as_json:
        echo_json({"size_before": before, "size_after": after})
        return
    console().print(f"Vacuumed {target.describe()}: {fmt_size(before)} → {fmt_size(after)}.")


# --- doctor ---------------------------------------------------------------------------------

_STATUS_STYLE = {
    "ok": ("✓", "green"),
    "warn": ("!", "yellow"),
    "fail": ("✗", "bold red"),
    "fixed": ("✓", "cyan"),
    "skipped": ("-", "dim"),
}


@click.command()
@click.option("--fix", is_flag=True, help="Rebuild the FTS indexes, recompute counters, repair orphans.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def doctor(ctx: click.Context, fix: bool, as_json: bool) -> None:
    """Check integrity, FTS indexes, orphans, counters and WAL size (exit 1 on problems)."""
    target = ctx.find_object(StoreTarget)
    assert target is not None
    with target.engine() as engine:
        findings, done = doctor_checks.run(engine, fix=fix)
    problems = [f for f in findings if f.status == "fail"]
    if as_json:
        echo_json({"ok": not problems, "findings": [f.as_dict() for f in findings], "repairs": done})
        if problems:
            ctx.exit(1)
        return
    out = console()
    table = Table(box=None, show_header=False, pad_edge=False)
    table.add_column(no_wrap=True)
    table.add_column(no_wrap=True, style="bold")
    table.add_column(overflow="fold")
    for finding in findings:
        mark, style = _STATUS_STYLE[finding.status]
        table.add_row(
            Text(mark, style=style),
            finding.check,
            Text(finding.detail, style=style if finding.status != "ok" else ""),
        )
    out.print(table)
    for line in done:
        out.print(Text(f"repaired: {line}", style="cyan"))
    if problems:
        fixable = any(f.fixable for f in problems)
        hint = "; run 'hermes-store doctor --fix'" if fixable and not fix else ""
        raise CliError(f"{len(problems)} problem(s) found{hint}")


# --- backup ---------------------------------------------------------------------------------


@click.command()
@click.argument("destination", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--force", is_flag=True, help="Replace DESTINATION if it exists.")
@click.option(
    "--pages",
    type=click.IntRange(min=1),
    default=DEFAULT_PAGES_PER_STEP,
    show_default=True,
    help="Pages copied per step.",
)
@click.option("--no-verify", is_flag=True, help="Skip integrity_check of the copy.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_target
def backup(
    target: StoreTarget, destination: Path, force: bool, pages: int, no_verify: bool, as_json: bool
) -> None:
    """Copy the store to DESTINATION online (SQLite backup API), consistent while writers write."""
    source = target.require_sqlite("backup")
    with progress_bar("Backing up", None) as progress:
        task = progress.tasks[0].id

        def on_progress(copied: int, total: int) -> None:
            progress.update(task, completed=copied, total=total)

        result = backup_sqlite(
            source,
            destination,
            pages_per_step=pages,
            verify=not no_verify,
            overwrite=force,
            on_progress=on_progress,
        )
    if as_json:
        echo_json(
            {
                "destination": str(result.destination),
                "pages": result.pages,
                "size_bytes": result.size,
                "sessions": result.sessions,
                "messages": result.messages,
                "integrity": result.integrity,
            }
        )
        return
    check = f", integrity_check {result.integrity}" if result.integrity else ""
    console().print(
        f"Backed up {target.describe()} to {result.destination}: {fmt_size(result.size)}, "
        f"{fmt_count(result.sessions, 'session')}, {fmt_count(result.messages, 'message')}{check}."
    )


COMMANDS: Sequence[click.Command] = (info, prune, vacuum, doctor, backup)
