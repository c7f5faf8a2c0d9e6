"""``stats``: tokens and cost by model, source and day; top sessions; JSON and CSV."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable

from click.testing import Result

from hermes_store.cli.stats import bar

Invoke = Callable[..., Result]


def test_stats_json_totals_and_groups(invoke: Invoke) -> None:
    report = json.loads(invoke("stats", "--json").output)
    totals = report["totals"]
    assert totals["sessions"] == 8
    assert totals["input_tokens"] == 1200 + 400 + 5000 + 3000 + 800 + 600 + 100
    assert totals["output_tokens"] == 300 + 80 + 800 + 500 + 100 + 200 + 50
    assert abs(totals["estimated_cost_usd"] - 0.105) < 1e-9
    assert totals["actual_cost_usd"] == 0.005
    models = {row["key"]: row for row in report["by_model"]}
    assert models["gpt-5"]["sessions"] == 3 and models["gpt-5"]["total_tokens"] == 5800 + 3500 + 900
    assert report["by_model"][0]["key"] == "gpt-5"  # most tokens first
    sources = {row["key"]: row["sessions"] for row in report["by_source"]}
    assert sources == {"cli": 6, "telegram": 1, "tui": 1}
    top = [row["key"] for row in report["top_sessions"]]
    assert top[:2] == ["beta-refactor", "beta-refactor-2"]


def test_stats_by_day_window(invoke: Invoke) -> None:
    report = json.loads(invoke("stats", "--json", "--days", "7").output)
    days = report["by_day"]
    assert len(days) == 7
    assert sum(day["sessions"] for day in days) == 7  # everything but the 200-day-old session
    assert sum(day["total_tokens"] for day in days) == 13130 - 150
    assert days == sorted(days, key=lambda day: day["key"])


def test_stats_source_filter(invoke: Invoke) -> None:
    report = json.loads(invoke("stats", "--json", "--source", "telegram").output)
    assert report["totals"]["sessions"] == 1
    assert [row["key"] for row in report["by_model"]] == ["gpt-5"]


def test_stats_csv(invoke: Invoke) -> None:
    rows = list(csv.DictReader(io.StringIO(invoke("stats", "--csv", "--days", "3").output)))
    sections = {row["section"] for row in rows}
    assert sections == {"total", "model", "source", "day", "session"}
    total = next(row for row in rows if row["section"] == "total")
    assert int(total["total_tokens"]) == 13130
    assert sum(1 for row in rows if row["section"] == "day") == 3


def test_stats_human_output_has_a_bar_chart(invoke: Invoke) -> None:
    output = invoke("stats", "--days", "7").output
    assert "By model" in output and "By source" in output and "Top sessions by tokens" in output
    assert "Tokens per day, last 7 days" in output
    assert "█" in output


def test_stats_json_and_csv_together_is_a_usage_error(invoke: Invoke) -> None:
    invoke("stats", "--json", "--csv", status=2)


def test_bar_scaling() -> None:
    assert bar(0, 100, 10) == ""
    assert bar(100, 100, 10) == "█" * 10
    assert bar(50, 100, 10) == "█" * 5
    assert bar(1, 1000, 10) == "▏"
