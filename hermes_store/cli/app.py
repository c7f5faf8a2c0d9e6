"""The ``hermes-store`` command group: global options, error reporting, entry point.

Exit statuses: 0 success, 1 an expected failure reported on one line (``Error: …``),
2 a usage mistake (click's own). Warnings the store raises on purpose (a newer schema,
a WAL fallback) are shown as one ``Warning: …`` line on stderr. ``--debug`` lets
unexpected exceptions through with their traceback.
"""

from __future__ import annotations

import logging
import os
import sys
import warnings
from collections.abc import Sequence
from typing import Any

import click
from click.core import ParameterSource

from hermes_store.cli.commands_browse import COMMANDS as BROWSE_COMMANDS
from hermes_store.cli.commands_maintenance import COMMANDS as MAINTENANCE_COMMANDS
from hermes_store.cli.commands_schema import COMMANDS as SCHEMA_COMMANDS
from hermes_store.cli.commands_transfer import COMMANDS as TRANSFER_COMMANDS
from hermes_store.cli.errors import EXPECTED_ERRORS, as_cli_error
from hermes_store.cli.stats import stats_command
from hermes_store.cli.target import StoreTarget
from hermes_store.db.engine import parse_url, resolve_url
from hermes_store.db.profiles import with_profile

PROG_NAME = "hermes-store"
COMPLETE_VAR = "_HERMES_STORE_COMPLETE"

_EPILOG = """\b
The store is --db PATH, else --url URL (or $HERMES_STORE_URL), else
$HERMES_HOME/state.db (~/.hermes/state.db). --profile NAME picks a profile's
store in a PostgreSQL database (its schema hermes_NAME).

\b
Shell completion (bash; use zsh_source / fish_source for other shells):
  eval "$(_HERMES_STORE_COMPLETE=bash_source hermes-store)"
"""


class StoreGroup(click.Group):
    """A group that reports expected errors and store warnings on one line each."""

    def invoke(self, ctx: click.Context) -> Any:
        """Run the subcommand, turning expected exceptions into ``Error: …`` (exit 1)."""
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                return super().invoke(ctx)
            except BrokenPipeError:
                _silence_stdout()  # the reader went away (`| head`): stop quietly
                ctx.exit(1)
            except EXPECTED_ERRORS as exc:
                target = ctx.find_object(StoreTarget)
                if target is not None and target.debug:
                    raise
                raise as_cli_error(exc) from exc
            finally:
                _report_warnings(caught)


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass  # not a real file descriptor (tests, embedded use)


def _report_warnings(caught: Sequence[warnings.WarningMessage]) -> None:
    seen: set[str] = set()
    for item in caught:
        if not issubclass(item.category, UserWarning):
            continue  # DeprecationWarning & co. are for developers, not operators
        text = str(item.message)
        if text in seen:
            continue
        seen.add(text)
        click.secho(f"Warning: {text}", err=True, fg="yellow")


def _build_target(
    db: str | None, url: str | None, profile: str | None, no_color: bool, debug: bool
) -> StoreTarget:
    if db is not None:
        if profile is not None:
            raise click.UsageError("--profile names a schema of a PostgreSQL database: give --url, not --db")
        return StoreTarget(resolve_url(os.path.expanduser(db)), no_color=no_color, debug=debug)
    # A --url that is not a URL is an error, never taken as a file name to create.
    chosen = parse_url(url) if url else resolve_url(None)
    try:
        chosen = with_profile(chosen, profile)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    return StoreTarget(chosen, no_color=no_color, debug=debug, default_location=not url)


@click.group(cls=StoreGroup, epilog=_EPILOG, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--db",
    "db",
    metavar="PATH",
    type=click.Path(dir_okay=False),
    help="SQLite database file to use.",
)
@click.option(
    "--url",
    "url",
    metavar="URL",
    envvar="HERMES_STORE_URL",
    show_envvar=True,
    help="SQLAlchemy URL of the store (e.g. postgresql+psycopg://…).",
)
@click.option(
    "--profile",
    "profile",
    metavar="NAME",
    help="The Hermes profile whose store to use, in a PostgreSQL database (schema hermes_NAME).",
)
@click.option("--no-color", is_flag=True, help="Never colour the output (also: $NO_COLOR).")
@click.option("--debug", is_flag=True, hidden=True, help="Show tracebacks of unexpected errors.")
@click.version_option(package_name="hermes-store", prog_name=PROG_NAME)
@click.pass_context
def cli(
    ctx: click.Context, db: str | None, url: str | None, profile: str | None, no_color: bool, debug: bool
) -> None:
    """Operate and explore a Hermes session store (state.db)."""
    if db is not None and url is not None and ctx.get_parameter_source("url") is ParameterSource.COMMANDLINE:
        raise click.UsageError("give either --db or --url, not both")
    ctx.obj = _build_target(db, url, profile, no_color, debug)


for _command in (
    *SCHEMA_COMMANDS,
    *BROWSE_COMMANDS,
    stats_command,
    *TRANSFER_COMMANDS,
    *MAINTENANCE_COMMANDS,
):
    cli.add_command(_command)


class _TitleCaseLevel(logging.Formatter):
    """Prints ``Warning:``/``Error:`` rather than logging's ``WARNING:``/``ERROR:``."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        """The record's line, with its level name in title case."""
        return self._style.format(record).replace(record.levelname, record.levelname.title(), 1)


def main(argv: Sequence[str] | None = None) -> Any:
    """Console-script entry point (``hermes-store``)."""
    if not logging.getLogger().handlers:
        # "Warning: …", as the store's own warnings are printed (and as docs/cli.md says).
        handler = logging.StreamHandler()
        handler.setFormatter(_TitleCaseLevel("%(levelname)s: %(message)s"))
        logging.basicConfig(level=logging.WARNING, handlers=[handler])
    return cli.main(
        args=list(argv) if argv is not None else None,
        prog_name=PROG_NAME,
        complete_var=COMPLETE_VAR,
    )
