"""``stats``: tokens and cost by model, by source and by day, and the top sessions.

Token and cost counters live on the session row, so each session's usage is counted
once, on the day it started. "Tokens" means input + output tokens (cache and
reasoning tokens are reported beside them). Queries are plain ORM ``select()``s over
:class:`hermes_store.models.Session` and run on any backend; days are bucketed in
Python (local time, or UTC with ``--utc``) over the requested window only.
"""

from __future__ import annotations

import csv
import dataclasses
import datetime as dt
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import click
from rich import box
from rich.table import Table
from rich.text import Text
from sqlalchemy import ColumnElement, func, orm, select

from hermes_store.cli.output import console, echo_json, fmt_cost, fmt_int
from hermes_store.cli.target import StoreTarget, pass_target
from hermes_store.models import Session

if TYPE_CHECKING:
    from rich.console import Console

TOKEN_FIELDS = (
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "reasoning_tokens",
)
UNKNOWN_MODEL = "(unknown)"
_BAR_BLOCKS = " ▏▎▍▌▋▊▉█"
MAX_BAR_WIDTH = 60


@dataclass
class Usage:
    """Summed counters of a group of sessions."""

    key: str
    sessions: int = 0
    messages: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0
    estimated_cost_usd: float = 0.0
    actual_cost_usd: float | None = None
    label: str = ""
    model: str | None = None

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens

    def as_dict(self) -> dict[str, Any]:
        """The figures as a JSON-ready dict (with ``total_tokens``)."""
        data = dataclasses.asdict(self)
        data["total_tokens"] = self.total_tokens
        return data


@dataclass
class Report:
    """Everything ``stats`` prints."""

    totals: Usage
    by_model: list[Usage]
    by_source: list[Usage]
    by_day: list[Usage]
    top_sessions: list[Usage]
    days: int
    utc: bool
    source: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """The report as a JSON-ready dict."""
        return {
            "source": self.source,
            "days": self.days,
            "timezone": "UTC" if self.utc else "local",
            "totals": self.totals.as_dict(),
            "by_model": [u.as_dict() for u in self.by_model],
            "by_source": [u.as_dict() for u in self.by_source],
            "by_day": [u.as_dict() for u in self.by_day],
            "top_sessions": [u.as_dict() for u in self.top_sessions],
        }


def _sum(column: Any) -> ColumnElement[Any]:
    return func.coalesce(func.sum(column), 0)


def _aggregates() -> list[ColumnElement[Any]]:
    return [
        func.count(),
        _sum(Session.message_count),
        *(_sum(getattr(Session, name)) for name in TOKEN_FIELDS),
        _sum(Session.estimated_cost_usd),
        func.sum(Session.actual_cost_usd),
    ]


def _usage(key: str, values: Any) -> Usage:
    count, messages, *tokens, estimated, actual = values
    usage = Usage(
        key,
        sessions=int(count or 0),
        messages=int(messages or 0),
        estimated_cost_usd=float(estimated or 0.0),
        actual_cost_usd=None if actual is None else float(actual),
    )
    for name, value in zip(TOKEN_FIELDS, tokens, strict=True):
        setattr(usage, name, int(value or 0))
    return usage


def _filtered(query: Any, source: str | None) -> Any:
    return query.where(Session.source == source) if source else query


def _grouped(db: orm.Session, key: Any, source: str | None) -> list[Usage]:
    total = _sum(Session.input_tokens) + _sum(Session.output_tokens)
    query = _filtered(select(key, *_aggregates()), source).group_by(key).order_by(total.desc(), key)
    return [_usage(str(row[0]), row[1:]) for row in db.execute(query)]


def _day_key(epoch: float, utc: bool) -> dt.date:
    moment = dt.datetime.fromtimestamp(epoch, tz=dt.UTC) if utc else dt.datetime.fromtimestamp(epoch)
    return moment.date()


def _by_day(db: orm.Session, source: str | None, days: int, utc: bool, today: dt.date) -> list[Usage]:
    first = today - dt.timedelta(days=days - 1)
    start = dt.datetime.combine(first, dt.time(), tzinfo=dt.UTC if utc else None).timestamp()
    buckets = {first + dt.timedelta(days=n): Usage(str(first + dt.timedelta(days=n))) for n in range(days)}
    query = _filtered(
        select(
            Session.started_at,
            Session.message_count,
            *(getattr(Session, name) for name in TOKEN_FIELDS),
            Session.estimated_cost_usd,
            Session.actual_cost_usd,
        ).where(Session.started_at >= start),
        source,
    )
    for row in db.execute(query).yield_per(1000):
        bucket = buckets.get(_day_key(float(row[0]), utc))
        if bucket is None:
            continue  # started "in the future" (clock skew): outside the window
        bucket.sessions += 1
        bucket.messages += int(row[1] or 0)
        for offset, name in enumerate(TOKEN_FIELDS, start=2):
            setattr(bucket, name, getattr(bucket, name) + int(row[offset] or 0))
        bucket.estimated_cost_usd += float(row[7] or 0.0)
        if row[8] is not None:
            bucket.actual_cost_usd = (bucket.actual_cost_usd or 0.0) + float(row[8])
    return list(buckets.values())


def _top(db: orm.Session, source: str | None, limit: int) -> list[Usage]:
    total = func.coalesce(Session.input_tokens, 0) + func.coalesce(Session.output_tokens, 0)
    query = _filtered(
        select(
            Session.id,
            Session.title,
            Session.model,
            Session.message_count,
            *(getattr(Session, name) for name in TOKEN_FIELDS),
            Session.estimated_cost_usd,
            Session.actual_cost_usd,
        ),
        source,
    ).order_by(total.desc(), Session.id)
    result = []
    for row in db.execute(query.limit(limit)):
        usage = _usage(str(row[0]), (1, *row[3:]))
        usage.label = row[1] or ""
        usage.model = row[2]
        result.append(usage)
    return result


def build_report(
    db: orm.Session, *, source: str | None, days: int, top: int, utc: bool, today: dt.date | None = None
) -> Report:
    """Compute every figure ``stats`` shows, in one read transaction."""
    if today is None:
        today = dt.datetime.now(dt.UTC).date() if utc else dt.date.today()
    totals_row = db.execute(_filtered(select(*_aggregates()), source)).one()
    totals = _usage("total", totals_row)
    model_key = func.coalesce(Session.model, UNKNOWN_MODEL)
    return Report(
        totals=totals,
        by_model=_grouped(db, model_key, source),
        by_source=_grouped(db, Session.source, source),
        by_day=_by_day(db, source, days, utc, today),
        top_sessions=_top(db, source, top),
        days=days,
        utc=utc,
        source=source,
    )


# --- output -------------------------------------------------------------------------------

CSV_FIELDS = (
    "section",
    "key",
    "label",
    "model",
    "sessions",
    "messages",
    *TOKEN_FIELDS,
    "total_tokens",
    "estimated_cost_usd",
    "actual_cost_usd",
)


def write_csv(report: Report) -> None:
    """The report as one CSV table on stdout, one row per group, keyed by ``section``."""
    writer = csv.DictWriter(sys.stdout, fieldnames=CSV_FIELDS, lineterminator="\n", extrasaction="ignore")
    writer.writeheader()
    sections = (
        ("total", [report.totals]),
        ("model", report.by_model),
        ("source", report.by_source),
        ("day", report.by_day),
        ("session", report.top_sessions),
    )
    for section, rows in sections:
        for usage in rows:
            writer.writerow({"section": section, **usage.as_dict()})


def _table(title: str) -> Table:
    return Table(
        title=title,
        title_justify="left",
        title_style="bold",
        header_style="bold",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
    )


def _usage_table(title: str, key_title: str, rows: list[Usage]) -> Table:
    table = _table(title)
    table.add_column(key_title, no_wrap=True, overflow="ellipsis")
    for name in ("Sessions", "Msgs", "Input", "Output", "Est. cost", "Actual"):
        table.add_column(name, justify="right", no_wrap=True)
    for usage in rows:
        table.add_row(
            usage.key,
            fmt_int(usage.sessions),
            fmt_int(usage.messages),
            fmt_int(usage.input_tokens),
            fmt_int(usage.output_tokens),
            fmt_cost(usage.estimated_cost_usd),
            fmt_cost(usage.actual_cost_usd),
        )
    return table


def bar(value: float, peak: float, width: int) -> str:
    """A horizontal bar of ``width`` cells for ``value`` out of ``peak`` (eighth-cell steps)."""
    if peak <= 0 or value <= 0 or width <= 0:
        return ""
    eighths = max(1, round(value / peak * width * 8))
    full, rest = divmod(eighths, 8)
    return "█" * full + (_BAR_BLOCKS[rest] if rest else "")


def daily_chart(rows: list[Usage], width: int) -> Text:
    """Daily tokens as a bar chart: one line per day, bar scaled to the busiest day."""
    peak = max((usage.total_tokens for usage in rows), default=0)
    numbers = [fmt_int(usage.total_tokens) for usage in rows]
    number_width = max((len(n) for n in numbers), default=1)
    bar_width = min(MAX_BAR_WIDTH, max(10, width - 10 - 2 - number_width - 2))
    chart = Text()
    for usage, number in zip(rows, numbers, strict=True):
        quiet = "" if usage.total_tokens else "dim"
        chart.append(f"{usage.key}  ", style="dim")
        chart.append(f"{number:>{number_width}}", style=quiet)
        chart.append(
            ("  " + bar(usage.total_tokens, peak, bar_width)) if usage.total_tokens else "", style="cyan"
        )
        chart.append("\n")
    return chart


def _top_table(rows: list[Usage]) -> Table:
    table = _table("Top sessions by tokens")
    table.add_column("ID", no_wrap=True, style="cyan")
    table.add_column("Title", no_wrap=True, overflow="ellipsis", max_width=30)
    table.add_column("Model", no_wrap=True, overflow="ellipsis")
    table.add_column("Tokens", justify="right", no_wrap=True)
    table.add_column("Cost", justify="right", no_wrap=True)
    for usage in rows:
        cost = usage.actual_cost_usd if usage.actual_cost_usd is not None else usage.estimated_cost_usd
        table.add_row(usage.key, usage.label, usage.model or "", fmt_int(usage.total_tokens), fmt_cost(cost))
    return table


def print_report(out: Console, report: Report) -> None:
    """The report for people: totals, tables, the daily chart, top sessions."""
    scope = f" (source {report.source})" if report.source else ""
    totals = report.totals
    out.print(
        Text.assemble(
            ("Totals" + scope + ": ", "bold"),
            f"{fmt_int(totals.sessions)} sessions · {fmt_int(totals.messages)} messages · "
            f"est. cost {fmt_cost(totals.estimated_cost_usd)} · actual {fmt_cost(totals.actual_cost_usd)}\n",
            ("Tokens: ", "bold"),
            f"{fmt_int(totals.input_tokens)} in · {fmt_int(totals.output_tokens)} out · "
            f"cache {fmt_int(totals.cache_read_tokens)} read / {fmt_int(totals.cache_write_tokens)} write · "
            f"reasoning {fmt_int(totals.reasoning_tokens)}",
        )
    )
    out.print()
    out.print(_usage_table("By model", "Model", report.by_model))
    out.print()
    out.print(_usage_table("By source", "Source", report.by_source))
    out.print()
    zone = "UTC" if report.utc else "local time"
    out.print(Text(f"Tokens per day, last {report.days} days ({zone}, by session start)", style="bold"))
    if any(usage.sessions for usage in report.by_day):
        out.print(daily_chart(report.by_day, out.width), end="")
    else:
        out.print(Text(f"no sessions started in the last {report.days} days", style="dim"))
    out.print()
    if report.top_sessions:
        out.print(_top_table(report.top_sessions))


@click.command("stats")
@click.option("--source", metavar="SOURCE", help="Only sessions from this source.")
@click.option(
    "--days", type=click.IntRange(1, 3660), default=30, show_default=True, help="Days in the daily chart."
)
@click.option("--top", type=click.IntRange(0), default=10, show_default=True, help="How many top sessions.")
@click.option("--utc", is_flag=True, help="Bucket days in UTC instead of local time.")
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
@click.option("--csv", "as_csv", is_flag=True, help="Print the figures as one CSV table.")
@pass_target
def stats_command(
    target: StoreTarget, source: str | None, days: int, top: int, utc: bool, as_json: bool, as_csv: bool
) -> None:
    """Tokens and cost by model, by source and by day, and the top sessions."""
    if as_json and as_csv:
        raise click.UsageError("give either --json or --csv, not both")
    with target.read_db() as db:
        report = db._read(lambda session: build_report(session, source=source, days=days, top=top, utc=utc))
    if as_json:
        echo_json(report.as_dict())
    elif as_csv:
        write_csv(report)
    else:
        print_report(console(), report)
