"""Per-model token accounting where a file keeps it: upstream's ``session_model_usage``.

From its schema 20 on, upstream Hermes adds each incremental token update to a row per
(session, model, billing provider, base URL, billing mode, task) as well as to the
session's own counters, so that a session whose model changed midway is attributed
correctly; its usage report reads those rows and falls back to the session's counters
only for sessions that have none. On a file that has the table, this store's token
updates add their rows the same way, so no tokens go missing from that report. On other
files (the store's own layout, PostgreSQL) nothing here runs a statement.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from sqlalchemy import text

from hermes_store.db.execution import Bind, fetch_tuples, run
from hermes_store.schema.file_layout import layout_of

if TYPE_CHECKING:
    from hermes_store.repository.sessions import TokenUsage

USAGE_TABLE = "session_model_usage"

_UPSERT = """
INSERT INTO session_model_usage (
    session_id, model, billing_provider, billing_base_url, billing_mode, task,
    api_call_count, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens,
    reasoning_tokens, estimated_cost_usd, actual_cost_usd, cost_status, cost_source,
    first_seen, last_seen
) VALUES (
    :session_id, :model, :provider, :base_url, :mode, '',
    :api_calls, :input, :output, :cache_read, :cache_write,
    :reasoning, :estimated, :actual, :cost_status, :cost_source,
    :now, :now
)
ON CONFLICT (session_id, model, billing_provider, billing_base_url, billing_mode, task) DO UPDATE SET
    api_call_count = api_call_count + excluded.api_call_count,
    input_tokens = input_tokens + excluded.input_tokens,
    output_tokens = output_tokens + excluded.output_tokens,
    cache_read_tokens = cache_read_tokens + excluded.cache_read_tokens,
    cache_write_tokens = cache_write_tokens + excluded.cache_write_tokens,
    reasoning_tokens = reasoning_tokens + excluded.reasoning_tokens,
    estimated_cost_usd = estimated_cost_usd + excluded.estimated_cost_usd,
    actual_cost_usd = actual_cost_usd + excluded.actual_cost_usd,
    cost_status = COALESCE(excluded.cost_status, cost_status),
    cost_source = COALESCE(excluded.cost_source, cost_source),
    last_seen = excluded.last_seen
"""


def _counts(usage: TokenUsage) -> dict[str, int | float]:
    return {
        "api_calls": usage.api_call_count or 0,
        "input": usage.input_tokens or 0,
        "output": usage.output_tokens or 0,
        "cache_read": usage.cache_read_tokens or 0,
        "cache_write": usage.cache_write_tokens or 0,
        "reasoning": usage.reasoning_tokens or 0,
        "estimated": float(usage.estimated_cost_usd or 0.0),
        "actual": float(usage.actual_cost_usd or 0.0),
    }


def record(db: Bind, session_id: str, usage: TokenUsage) -> None:
    """Add an incremental token update to the session's per-model row, on a file that
    keeps them. The route is the update's own, else the one the session records (as
    upstream's main-loop rows take it). An update that counts nothing adds no row."""
    counts = _counts(usage)
    if not any(counts.values()) or USAGE_TABLE not in layout_of(db).tables:
        return
    route = fetch_tuples(
        db,
        "SELECT model, billing_provider, billing_base_url, billing_mode FROM sessions WHERE id = :id",
        {"id": session_id},
    )
    model, provider, base_url, mode = route[0] if route else (None, None, None, None)
    run(
        db,
        text(_UPSERT),
        {
            "session_id": session_id,
            "model": usage.model or model or "unknown",
            "provider": usage.billing_provider or provider or "",
            "base_url": usage.billing_base_url or base_url or "",
            "mode": usage.billing_mode or mode or "",
            "cost_status": usage.cost_status,
            "cost_source": usage.cost_source,
            "now": time.time(),
            **counts,
        },
    )
