"""Which way the statements of a transaction go (:class:`~hermes_store.db.sqlalchemy_private.Route`),
chosen once as the transaction begins from who watches then."""

from __future__ import annotations

import logging

from sqlalchemy.engine import Connection

from hermes_store.db import sqlalchemy_private
from hermes_store.db.sqlalchemy_private import Route

ROUTE_KEY = "hermes_store_route"
"""``Connection.info`` key of the way :func:`remember_route` chose for the transaction."""


def decide_route(connection: Connection) -> Route:
    """Which way the statements of a transaction beginning on ``connection`` go
    (:func:`sqlalchemy_private.route`), given who watches now: called once per
    transaction, so a listener added while a transaction is open sees the statements of
    the next one. Deciding once saves about 4 µs a statement."""
    route = sqlalchemy_private.route(connection)
    if route is Route.BARE_CURSOR and sqlalchemy_private.watches_transaction_ends(connection):
        # Only the public path opens SQLAlchemy's transaction around a driver-run one,
        # and only that transaction fires commit/rollback events.
        route = Route.DRIVER_SQL
    return route


_INFO = logging.INFO

FULL_CHECK_EVERY = 256
"""Transactions a :class:`RouteMemo` serves before deciding afresh anyway."""


class RouteMemo:
    """The way chosen for one connection's last transaction, reused while no SQLAlchemy
    event listener was added or removed since.

    Deciding (:func:`decide_route`) asks every listener collection that could watch a
    statement, about 20,000 CPU instructions a transaction, a tenth of an append's
    Python work; :func:`sqlalchemy_private.listeners_fingerprint` tells in a few hundred
    whether any listener came or went. The fingerprint can miss a change in one case
    only: between two transactions, the most recently added listener is removed and added
    again after other listeners were removed and as many others added. So the memo is
    also decided afresh every :data:`FULL_CHECK_EVERY` transactions, which bounds how long
    such a change could go unseen. Echo and logging levels are no listeners: whether the
    engine logs statements is asked for every transaction, and a change is decided
    afresh (which sets the connection's echo flag, :func:`sqlalchemy_private.follow_echo`).
    """

    __slots__ = ("_connection", "_echo", "_fingerprint", "_route", "_uses")

    def __init__(self) -> None:
        self._connection: Connection | None = None
        self._fingerprint: object = None
        self._echo: bool | None = None
        self._route = Route.CORE
        self._uses = 0

    def route_for(self, connection: Connection) -> Route:
        """The way the statements of a transaction beginning on ``connection`` go."""
        fingerprint = sqlalchemy_private.listeners_fingerprint()
        # What follow_echo() would set, asked here without its call (this runs for every
        # write): when it changed, deciding afresh sets the connection's flag.
        echo = connection.engine.logger.isEnabledFor(_INFO)
        if (
            connection is self._connection
            and fingerprint == self._fingerprint
            and echo is self._echo
            and fingerprint is not None
            and self._uses < FULL_CHECK_EVERY
        ):
            self._uses += 1
            return self._route
        self._route = decide_route(connection)
        self._connection = connection
        self._fingerprint = fingerprint
        self._echo = echo
        self._uses = 1
        return self._route


def remember_route(connection: Connection) -> Route:
    """:func:`decide_route` for a transaction SQLAlchemy begins, kept for its statements
    in ``connection.info``.

    Called by the SQLite engine's ``begin`` hook, which runs for every transaction of
    every connection of that engine, so the kept way is always the current
    transaction's.
    """
    route = decide_route(connection)
    connection.info[ROUTE_KEY] = route
    return route
