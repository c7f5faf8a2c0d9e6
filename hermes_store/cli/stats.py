"""``stats``: tokens and cost by model, by source and by day, and the top sessions.

Token and cost counters live on the session row, so each session's usage is counted
once, on the day it started. "Tokens" means input + output tokens (cache and
reasoning tokens are reported beside them). The figures come from
:mod:`hermes_store.repository.usage`; this module prints them (table, JSON, CSV).
"""

from __future__ import annotations

import csv
import sys
from typing import TYPE_CHECKING

import click
from rich import box
from rich.table import Table
from rich.text import Text

from hermes_store.cli.output import console, echo_json, fmt_cost, fmt_int
from hermes_store.cli.target import StoreTarget, pass_target
from hermes_store.repository.usage import TOKEN_FIELDS, Report, Usage, build_report

if TYPE_CHECKING:
    from rich.console import Console

_BAR_BLOCKS = " ▏▎▍▌▋▊▉█"
MAX_BAR_WIDTH = 60


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
    with target.read_db() as db, db.unit_of_work.read() as session:
        report = build_report(session, source=source, days=days, top=top, utc=utc)
    if as_json:
        echo_json(report.as_dict())
    elif as_csv:
        write_csv(report)
    else:
        print_report(console(), report)
