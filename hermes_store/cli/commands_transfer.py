"""``export`` and ``import`` (sessions out as JSON, JSONL or Markdown, and JSONL back in),
``copy`` (a whole store onto another backend) and ``verify`` (that a copy is exact)."""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO

import click

from hermes_store.admin.session_files import (
    Importer,
    count_sessions,
    export_records,
    iter_session_ids,
    output_stream,
    read_records,
)
from hermes_store.admin.transfer import BATCH_ROWS
from hermes_store.cli.export_formats import FORMATS, format_for, write_records
from hermes_store.cli.output import console, echo_json, fmt_int, progress_bar, step_progress
from hermes_store.cli.resolve import complete_session, resolve_session
from hermes_store.cli.target import StoreTarget, pass_target


@click.command()
@click.argument("session", required=False, metavar="[ID|TITLE|PREFIX]", shell_complete=complete_session)
@click.option("--source", metavar="SOURCE", help="Export every session of this source.")
@click.option(
    "--format",
    "-f",
    "fmt",
    type=click.Choice(FORMATS),
    help="Output format (default: from the --output suffix, else jsonl).",
)
@click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=False, allow_dash=True),
    default="-",
    show_default=True,
    help="File to write ('-' = stdout). Written whole or not at all.",
)
@pass_target
def export(
    target: StoreTarget, session: str | None, source: str | None, fmt: str | None, output: str
) -> None:
    """Export one session, one source's sessions, or everything.

    JSONL (one session per line, streamed with bounded memory) is what 'import'
    reads back; JSON is one array (or one object for a single session); Markdown is
    for reading.
    """
    if session and source:
        raise click.UsageError("give a session or --source, not both")
    chosen = format_for(output, fmt)
    stdout = sys.stdout
    with target.read_db() as db:
        if session:
            ids = [resolve_session(db, session)]
            total = 1
        else:
            total = count_sessions(db, source)
        with output_stream(output, stdout) as stream, progress_bar("Exporting", total) as progress:
            records = export_records(db, ids if session else iter_session_ids(db, source))
            written = write_records(
                records,
                chosen,
                stream,
                single=bool(session),
                on_record=lambda: progress.advance(progress.tasks[0].id, 1),
            )
    if output != "-":
        console(stderr=True).print(f"Exported {fmt_int(written)} session(s) to {output} ({chosen}).")


@click.command("import")
@click.argument("file", type=click.Path(dir_okay=False, allow_dash=True, exists=False))
@click.option("--skip-existing", is_flag=True, help="Skip sessions whose id is already in the store.")
@click.option(
    "--batch-size", type=click.IntRange(1), default=200, show_default=True, help="Sessions per transaction."
)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON summary.")
@pass_target
def import_(target: StoreTarget, file: str, skip_existing: bool, batch_size: int, as_json: bool) -> None:
    """Import sessions from a JSONL export ('-' reads stdin), keeping ids and timestamps.

    The store is created if it does not exist yet. Sessions already present stop the
    import unless --skip-existing.
    """
    stream: IO[bytes]
    if file == "-":
        stream, size = sys.stdin.buffer, None
    else:
        path = Path(file)
        stream, size = path.open("rb"), path.stat().st_size
    try:
        with target.session_db(create=True) as db, progress_bar("Importing", size) as progress:
            importer = Importer(db, skip_existing=skip_existing, batch_sessions=batch_size)
            result = importer.run(
                read_records(stream, on_bytes=lambda n: progress.advance(progress.tasks[0].id, n))
            )
    finally:
        if stream is not sys.stdin.buffer:
            stream.close()
    if as_json:
        echo_json(
            {
                "sessions": result.sessions,
                "messages": result.messages,
                "skipped": result.skipped,
                "unlinked_parents": result.unlinked_parents,
            }
        )
        return
    out = console()
    out.print(
        f"Imported {fmt_int(result.sessions)} session(s) and {fmt_int(result.messages)} message(s) "
        f"into {target.describe()}"
        + (f"; skipped {fmt_int(result.skipped)} existing" if result.skipped else "")
    )
    if result.unlinked_parents:
        click.secho(
            f"Warning: {len(result.unlinked_parents)} session(s) name a parent that is in neither the file "
            "nor the store; they were imported without it",
            err=True,
            fg="yellow",
        )


@click.command("copy")
@click.argument("source_url", metavar="SOURCE_URL")
@click.argument("target_url", metavar="TARGET_URL")
@click.option("--resume", is_flag=True, help="Continue an interrupted copy into TARGET_URL.")
@click.option(
    "--restart",
    is_flag=True,
    help="Delete what an interrupted copy wrote into TARGET_URL and copy again from the start.",
)
@click.option(
    "--batch-size",
    type=click.IntRange(1),
    default=BATCH_ROWS,
    show_default=True,
    help="Rows per batch (one COPY or insert, one transaction).",
)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON summary.")
def copy(
    source_url: str, target_url: str, resume: bool, restart: bool, batch_size: int, as_json: bool
) -> None:
    """Copy a whole store into an empty one (SQLite ⇄ PostgreSQL), then verify it.

    SOURCE_URL and TARGET_URL are SQLAlchemy URLs or SQLite paths. The source is only
    read, at the schema revision it is at (never migrated). A PostgreSQL target is loaded
    with COPY in committed batches; --resume continues a copy that was interrupted,
    --restart empties it and starts again. A target that already holds sessions or
    messages (and no interrupted copy) is refused. The copy ends with the checks of
    'hermes-store verify'.
    """
    from hermes_store.admin.transfer import copy_store
    from hermes_store.db.engine import create_engine

    if resume and restart:
        raise click.UsageError("give --resume or --restart, not both")
    source = create_engine(source_url, prepare=False)
    target = create_engine(target_url, prepare=True)
    started = time.perf_counter()
    try:
        with step_progress() as progress:
            report = copy_store(
                source, target, progress, resume=resume, restart=restart, batch_rows=batch_size
            )
    finally:
        source.dispose()
        target.dispose()
    seconds = time.perf_counter() - started
    rate = report.messages / seconds if seconds > 0 else 0.0
    if as_json:
        echo_json(
            {
                "sessions": report.sessions,
                "messages": report.messages,
                "meta": report.meta,
                "resumed_after_message_id": report.resumed_after,
                "restarted": report.restarted,
                "verified_searches": list(report.searched),
                "seconds": round(seconds, 3),
                "messages_per_second": round(rate, 1),
            }
        )
        return
    resumed = "" if report.resumed_after is None else f" (resumed after message {report.resumed_after})"
    if report.restarted:
        resumed = " (restarted)"
    console().print(
        f"Copied {fmt_int(report.sessions)} session(s), {fmt_int(report.messages)} message(s) and "
        f"{fmt_int(report.meta)} metadata row(s) in {seconds:.1f} s ({fmt_int(rate)} messages/s){resumed}; "
        "verified every row, the schema and "
        f"{len(report.searched)} search(es)"
    )


@click.command("verify")
@click.argument("source_url", metavar="SOURCE_URL")
@click.argument("target_url", metavar="TARGET_URL")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON summary.")
def verify(source_url: str, target_url: str, as_json: bool) -> None:
    """Check that TARGET_URL holds exactly what SOURCE_URL holds (both only read).

    Compares every row of every table (sessions and messages by per-session digests,
    naming the first differing table, key and column), every index, constraint and
    trigger of the target with a fresh store's at its revision, and a few searches.
    Exit status 1 at the first difference.
    """
    from hermes_store.admin.copy_verify import verify_copy
    from hermes_store.db.engine import create_engine

    source = create_engine(source_url, prepare=False)
    target = create_engine(target_url, prepare=False)
    started = time.perf_counter()
    try:
        with step_progress() as progress:
            result = verify_copy(source, target, progress)
    finally:
        source.dispose()
        target.dispose()
    seconds = time.perf_counter() - started
    if as_json:
        echo_json(
            {
                "sessions": result.sessions,
                "messages": result.messages,
                "meta": result.meta,
                "schema_objects": result.schema_objects,
                "verified_searches": list(result.searched),
                "seconds": round(seconds, 3),
            }
        )
        return
    console().print(
        f"Verified {fmt_int(result.sessions)} session(s), {fmt_int(result.messages)} message(s) and "
        f"{fmt_int(result.meta)} metadata row(s): every row matches; {result.schema_objects} indexes, "
        f"constraints and triggers match a fresh store's; {len(result.searched)} search(es) found "
        f"their messages ({seconds:.1f} s)"
    )


COMMANDS: Sequence[click.Command] = (export, import_, copy, verify)
