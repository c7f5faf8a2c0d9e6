"""Pool and timeout settings for a store on a database server (PostgreSQL).

A service sets them in the URL's query or as keyword arguments, which win::

    postgresql+psycopg://app@db/hermes?pool_size=20&statement_timeout=30s
    SessionDB(url="postgresql+psycopg://app@db/hermes", pool_size=20, lock_timeout="2s")

The pool settings go to SQLAlchemy's ``QueuePool``; the two timeouts are sent to the
server as connection options (``-c statement_timeout=…``), so every connection of the
pool has them from its first statement without an extra round trip. A timeout is a
number of milliseconds or a string with a PostgreSQL unit (``"500ms"``, ``"30s"``,
``"2min"``); ``0`` turns it off. Schema migrations switch both off for their own
transaction (see :mod:`hermes_store.schema.migrate`): a large upgrade may legitimately run long.
"""

from __future__ import annotations

import re
from typing import Any

from sqlalchemy.engine import URL

DEFAULTS: dict[str, Any] = {
    "pool_size": 5,
    "max_overflow": 10,
    "pool_pre_ping": True,
    "pool_recycle": 1800,
    "statement_timeout": "60s",
    "lock_timeout": "10s",
}
"""Defaults: a pool that serves a few threads per process and checks a connection before
handing it out (a restarted server or a dropped connection costs a reconnect, not an
error), connections renewed every 30 minutes (before typical firewall idle cuts), no
statement running longer than a minute and no lock waited on for more than 10 s."""

_TIMEOUTS = ("statement_timeout", "lock_timeout")
_DURATION = re.compile(r"\d+(\.\d+)?\s*(us|ms|s|min|h|d)?")
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def split_options(url: URL, overrides: dict[str, Any]) -> tuple[URL, dict[str, Any]]:
    """The URL without our query options, and SQLAlchemy ``create_engine`` arguments.

    ``overrides`` (keyword arguments) win over the URL's query, which wins over
    :data:`DEFAULTS`. Other keyword arguments pass through unchanged. A malformed value
    raises ``ValueError`` naming the option.
    """
    query = dict(url.query)
    settings: dict[str, Any] = dict(DEFAULTS)
    for name in (*DEFAULTS, "pool_timeout"):
        if name in query:
            settings[name] = _parse(name, query.pop(name))
    passthrough = dict(overrides)
    for name in (*DEFAULTS, "pool_timeout"):
        if name in passthrough:
            settings[name] = _parse(name, passthrough.pop(name))
    timeouts = {name: settings.pop(name) for name in _TIMEOUTS}
    clean_url = url.set(query=query)
    if passthrough.get("poolclass") is not None:
        # NullPool and friends take no sizing arguments.
        for name in ("pool_size", "max_overflow", "pool_timeout"):
            settings.pop(name, None)
    connect_args = dict(passthrough.pop("connect_args", {}))
    server_settings = " ".join(f"-c {name}={value}" for name, value in timeouts.items())
    existing = connect_args.get("options")
    connect_args["options"] = f"{existing} {server_settings}" if existing else server_settings
    return clean_url, {**settings, **passthrough, "connect_args": connect_args}


def _parse(name: str, value: Any) -> Any:
    text = str(value).strip().lower() if isinstance(value, str) else value
    if name == "pool_pre_ping":
        if isinstance(text, bool):
            return text
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
        raise ValueError(f"{name} must be true or false, not {value!r}")
    if name in _TIMEOUTS:
        if isinstance(text, int | float) and not isinstance(text, bool) and text >= 0:
            return str(int(text))  # milliseconds, PostgreSQL's unit for both settings
        if isinstance(text, str) and _DURATION.fullmatch(text):
            return text.replace(" ", "")
        raise ValueError(f"{name} must be milliseconds or a duration like '30s', not {value!r}")
    try:
        number = int(text)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be an integer, not {value!r}") from None
    if number < (-1 if name in ("pool_recycle", "max_overflow") else 0):
        raise ValueError(f"{name} must not be negative, not {value!r}")
    return number
