"""PostgreSQL behind a transaction pooler (PgBouncer in ``pool_mode = transaction``, and the
poolers of managed PostgreSQL services that behave like it).

Such a pooler hands each *transaction* of a client to whichever server connection is free,
so nothing that lives in a server session survives from one transaction to the next: it
refuses the startup ``options`` that carry the store's statement bounds (``FATAL:
unsupported startup parameter: options``; with ``ignore_startup_parameters`` it drops them
silently), a prepared statement made in one transaction is missing in the next, and a
session-level ``SET`` or advisory lock stays behind on a server connection that another
client gets next.

A connection is known to be pooled when the server refuses the options, when the
settings they carry are not in force once connected, or when the URL says so
(``?pooler=transaction``). Such a connection is made again without the options and
without server-side prepared statements (psycopg's ``prepare_threshold=None``,
asyncpg's ``statement_cache_size=0``), and every transaction on it begins by applying
the same settings for that transaction only (``set_config(…, true)``, one statement).
The migrators' and copies' locks are taken per transaction there
(:func:`is_pooled` tells them; ``migrations/env.py``, :mod:`hermes_store.admin.copy_target`).
A direct connection is left exactly as before: one probe of ``statement_timeout`` when it
is made, nothing per transaction.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

log = logging.getLogger(__name__)

POOLED_KEY = "hermes_store.pooled_settings"
"""Where a pooled connection's record keeps the settings each transaction applies."""
POOLER_OPTION = "pooler"
"""The URL query option that declares a transaction pooler (``?pooler=transaction``)."""
SERVER_SETTING = re.compile(r"-c\s*([A-Za-z_][\w.]*)=(\S+)")
"""One ``-c name=value`` server setting of a libpq ``options`` string."""
_REFUSED_OPTIONS = "unsupported startup parameter"
_warned: set[str] = set()


def settings_of(options: str) -> dict[str, str]:
    """The ``-c name=value`` server settings of a libpq ``options`` string."""
    return dict(SERVER_SETTING.findall(options or ""))


def is_pooled(connection: Connection) -> bool:
    """Whether ``connection`` reaches PostgreSQL through a transaction pooler."""
    return POOLED_KEY in connection.info


def install(engine: Engine, *, declared: bool) -> None:
    """Make ``engine``'s connections work through a transaction pooler when they meet one
    (``declared``: the URL said there is one). ``engine`` is a sync engine (an async
    engine's ``sync_engine``)."""

    @sa.event.listens_for(engine, "do_connect")
    def _connect(dialect: Any, record: Any, cargs: Any, cparams: dict[str, Any]) -> Any:
        wanted = _wanted_settings(cparams)
        if not declared:
            try:
                connection = dialect.connect(*cargs, **cparams)
            except Exception as exc:
                if _REFUSED_OPTIONS not in str(exc):
                    raise
                _note(engine, "it refuses the startup options")
            else:
                if not wanted or _settings_in_force(connection, wanted):
                    return connection
                connection.close()
                _note(engine, "it dropped the startup options")
        record.info[POOLED_KEY] = wanted
        return dialect.connect(*cargs, **_pooled_parameters(cparams))

    @sa.event.listens_for(engine, "begin")
    def _begin(connection: Connection) -> None:
        settings = connection.info.get(POOLED_KEY)
        if settings:
            apply_for_transaction(connection, settings)


def apply_for_transaction(connection: Connection, settings: Mapping[str, str]) -> None:
    """Apply ``settings`` to ``connection``'s current (or next) transaction only.

    ``statement_timeout`` goes in a ``SET LOCAL`` of its own, the form the reply watchdog
    (:mod:`hermes_store.db.reply_watchdog`) follows; the others in one ``set_config`` call.
    """
    others = {name: value for name, value in settings.items() if name != "statement_timeout"}
    if "statement_timeout" in settings:
        timeout = _literal(settings["statement_timeout"])
        connection.exec_driver_sql(f"SET LOCAL statement_timeout = '{timeout}'")
    if others:
        calls = ", ".join(f"set_config('{name}', '{_literal(v)}', true)" for name, v in others.items())
        connection.exec_driver_sql(f"SELECT {calls}")


def _literal(value: str) -> str:
    return value.strip("'\"").replace("'", "''")


def _wanted_settings(cparams: Mapping[str, Any]) -> dict[str, str]:
    settings = settings_of(str(cparams.get("options") or ""))
    server_settings = cparams.get("server_settings")  # asyncpg's form
    if isinstance(server_settings, Mapping):
        settings.update({str(name): str(value) for name, value in server_settings.items()})
    return settings


def _pooled_parameters(cparams: Mapping[str, Any]) -> dict[str, Any]:
    """The connect parameters for a pooled connection: no startup settings, no
    server-side prepared statements."""
    pooled = {name: value for name, value in cparams.items() if name not in ("options", "server_settings")}
    if "server_settings" in cparams or "statement_cache_size" in cparams:
        pooled["statement_cache_size"] = 0  # asyncpg
    else:
        pooled["prepare_threshold"] = None  # psycopg
    return pooled


def _settings_in_force(connection: Any, wanted: Mapping[str, str]) -> bool:
    """Whether the new connection's server took ``wanted``'s first setting from the client's
    startup options (a pooler that ignores them leaves the server's own source)."""
    name = next(iter(wanted))
    cursor = connection.cursor()
    try:
        cursor.execute(f"SELECT source FROM pg_settings WHERE name = '{_literal(name)}'")
        row = cursor.fetchone()
    finally:
        cursor.close()
    connection.rollback()
    return bool(row and row[0] == "client")


def _note(engine: Engine, why: str) -> None:
    """Log, once per database, that its connections go through a transaction pooler."""
    where = engine.url.render_as_string(hide_password=True)
    if where in _warned:
        return
    _warned.add(where)
    log.info(
        "%s: a transaction pooler is in front of the server (%s); the store's settings are applied "
        "per transaction and statements are not prepared on the server",
        where,
        why,
    )
