"""Usage figures: tokens and cost by model, by source, by day, and the top sessions.

Token and cost counters live on the session row, so each session's usage is counted
once, on the day it started. "Tokens" means input + output tokens (cache and
reasoning tokens are reported beside them). Queries are plain ORM ``select()``s over
:class:`hermes_store.schema.models.Session` and run on any backend; days are bucketed in
Python (local time, or UTC) over the requested window only. Call :func:`build_report`
inside ``SessionDB.unit_of_work.read()``.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, func, orm, select

from hermes_store.schema.models import Session

TOKEN_FIELDS = (
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "reasoning_tokens",
)
UNKNOWN_MODEL = "(unknown)"


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
