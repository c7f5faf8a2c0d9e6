"""Pool and timeout settings for a store on a database server (PostgreSQL).

A service sets them in the URL's query or as keyword arguments, which win::

    postgresql+psycopg://app@db/hermes?pool_size=20&statement_timeout=30s
    SessionDB(url="postgresql+psycopg://app@db/hermes", pool_size=20, lock_timeout="2s")

A timeout the caller sets in its own server options
(``connect_args={"options": "-c statement_timeout=5s"}``) counts as set by the caller too:
it wins over the URL's query and the defaults, and a keyword wins over it.

The pool settings go to SQLAlchemy's ``QueuePool``; the two timeouts are sent to the
server as connection options (``-c statement_timeout=…``), so every connection of the
pool has them from its first statement without an extra round trip. A timeout is a
number of milliseconds or a string with a PostgreSQL unit (``"500ms"``, ``"30s"``,
``"2min"``); ``0`` turns it off. Schema migrations switch both off for their own
transaction (see :mod:`hermes_store.schema.migrate`): a large upgrade may legitimately run long.

The network settings go to libpq (psycopg) as connection parameters: how long connecting
may take, and TCP keepalives plus ``tcp_user_timeout`` so that a connection whose peer
has vanished (a partition, a dead host) fails within seconds instead of the kernel's
quarter of an hour. A server that stays reachable but never replies is caught by
:mod:`hermes_store.db.reply_watchdog`, ``statement_timeout`` plus
:data:`~hermes_store.db.reply_watchdog.REPLY_GRACE_S` after the statement began.
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
NETWORK_DEFAULTS: dict[str, int] = {
    "connect_timeout": 5,
    "keepalives": 1,
    "keepalives_idle": 5,
    "keepalives_interval": 2,
    "keepalives_count": 3,
    "tcp_user_timeout": 10000,
}
"""libpq's connection parameters (seconds; ``tcp_user_timeout`` in milliseconds): give up
connecting after 5 s; probe an idle connection after 5 s of silence, every 2 s, and drop
it after 3 unanswered probes (about 11 s); drop a connection whose sent data has gone
unacknowledged for 10 s. A partitioned network is so found within the writers' 15 s
reconnect budget (``UnitOfWork.reconnect_wait_s``)."""
_LIBPQ_DRIVERS = ("psycopg", "psycopg_async", "psycopg2")
"""Defaults: a pool that serves a few threads per process and checks a connection before
handing it out (a restarted server or a dropped connection costs a reconnect, not an
error), connections renewed every 30 minutes (before typical firewall idle cuts), no
statement running longer than a minute and no lock waited on for more than 10 s."""

_TIMEOUTS = ("statement_timeout", "lock_timeout")
_TIMEOUT_IN_OPTIONS = re.compile(r"(?:-c\s*|--)(statement_timeout|lock_timeout)=(\S+)")
"""A timeout in a libpq ``options`` string: ``-c name=value``, ``-cname=value`` or ``--name=value``."""
JIT_DEFAULT = "-c jit=off"
"""PostgreSQL's JIT compiler, off: it pays only for long analytical queries."""
_DURATION = re.compile(r"\d+(\.\d+)?\s*(us|ms|s|min|h|d)?")
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def split_options(url: URL, overrides: dict[str, Any]) -> tuple[URL, dict[str, Any]]:
    """The URL without our query options, and SQLAlchemy ``create_engine`` arguments.

    ``overrides`` (keyword arguments) win over the URL's query, which wins over
    :data:`DEFAULTS` and, for libpq drivers, :data:`NETWORK_DEFAULTS`; a timeout in the
    caller's ``connect_args`` options wins over the query, a keyword over it. Other keyword
    arguments pass through unchanged. A malformed value raises ``ValueError`` naming the
    option.
    """
    query, settings, passthrough = _resolve(url, overrides)
    timeouts = {name: settings.pop(name) for name in _TIMEOUTS}
    network = {name: settings.pop(name) for name in NETWORK_DEFAULTS if name in settings}
    clean_url = url.set(query=query)
    if passthrough.get("poolclass") is not None:
        # NullPool and friends take no sizing arguments.
        for name in ("pool_size", "max_overflow", "pool_timeout"):
            settings.pop(name, None)
    connect_args = {**network, **passthrough.pop("connect_args", {})}
    server_settings = " ".join(f"-c {name}={value}" for name, value in timeouts.items())
    existing = connect_args.get("options")
    # JIT off unless the caller's options say otherwise (theirs come after, so they win):
    # the store's statements are short, and compiling a listing's plan took 1-2.5 s of a
    # 0.3 s query at 20,000 sessions. The timeouts come last, so the server applies the
    # values resolved here, a timeout in the caller's options included (_resolve).
    before = f"{JIT_DEFAULT} {existing}" if existing else JIT_DEFAULT
    connect_args["options"] = f"{before} {server_settings}"
    return clean_url, {**settings, **passthrough, "connect_args": connect_args}


def statement_timeout_s(url: URL, overrides: dict[str, Any]) -> float:
    """The ``statement_timeout`` the connections of :func:`split_options` get, in seconds
    (``0.0``: off)."""
    return duration_s(_resolve(url, overrides)[1]["statement_timeout"])


def _resolve(url: URL, overrides: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """The URL's query left over, our settings (defaults < query < a timeout in the
    caller's ``connect_args`` options < keywords) and the keyword arguments that are not
    ours."""
    query = dict(url.query)
    settings: dict[str, Any] = dict(DEFAULTS)
    names: tuple[str, ...] = (*DEFAULTS, "pool_timeout")
    if url.get_driver_name() in _LIBPQ_DRIVERS:
        settings.update(NETWORK_DEFAULTS)
        names = (*names, *NETWORK_DEFAULTS)
    for name in names:
        if name in query:
            settings[name] = _parse(name, query.pop(name))
    # PostgreSQL applies the last of a setting's -c: so does this.
    options = (overrides.get("connect_args") or {}).get("options")
    for name, value in _TIMEOUT_IN_OPTIONS.findall(str(options or "")):
        settings[name] = _parse(name, value)
    passthrough = dict(overrides)
    for name in names:
        if name in passthrough:
            settings[name] = _parse(name, passthrough.pop(name))
    return query, settings, passthrough


_UNIT_S = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "min": 60.0, "h": 3600.0, "d": 86400.0}


def duration_s(value: str) -> float:
    """A PostgreSQL duration (``"500ms"``, ``"30s"``, ``"2min"``) in seconds; a bare number
    is milliseconds, PostgreSQL's unit for the timeouts. Raises ``ValueError`` otherwise."""
    match = _DURATION.fullmatch(value.strip().lower())
    if match is None:
        raise ValueError(f"not a duration: {value!r}")
    value = value.strip().lower()
    number = float(value[: match.start(2)] if match.group(2) else value)
    return number * _UNIT_S[match.group(2) or "ms"]


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
