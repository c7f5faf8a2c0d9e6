"""Reads from PostgreSQL hot standbys, with read-your-writes.

A store given standby URLs (``SessionDB(url=primary, read_urls=[standby, …])``) sends its
reads — searches, listings, replays, lookups — to a standby that has already replayed
this store's last write, else to the primary. The design is that of GitLab's database
load balancer: after each write the primary's WAL position is remembered
(``pg_current_wal_insert_lsn()``, read once the write has committed, so it lies past the
commit record); a standby serves a read once ``pg_last_wal_replay_lsn()`` has reached
that position. What a standby has replayed is remembered too, so a standby known to be
past the position serves without being asked again; one that is behind is asked again
at most every :data:`RECHECK_S`.

A standby is skipped while it lags more than ``max_lag_s`` behind the primary (measured
as GitLab does: zero while it has replayed everything it received, else the age of the
last transaction it replayed), while it is unreachable (for :data:`DOWN_S`), and for a
read it cancelled for a conflict with recovery ("canceling statement due to conflict
with recovery", SQLSTATE ``40001``): that read runs again on the primary. A read never
fails because of a standby; with none usable it runs on the primary, as it would without
standbys. Writes always go to the primary.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import sqlalchemy as sa
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import Connection, Engine

from hermes_store.db.server_errors import is_server_unreachable

T = TypeVar("T")

RECHECK_S = 0.5
"""How long what a standby reported (its replayed position, its lag) is taken as current."""
BEHIND_RECHECK_S = 0.005
"""How soon a standby that had not yet replayed a write is asked again (a read right after
a write asks once: the standby usually has it by then)."""
DOWN_S = 5.0
"""How long an unreachable standby is left alone before it is tried again."""
_RECOVERY_CONFLICT = "40001"


def lsn_value(text: str) -> int:
    """A PostgreSQL WAL position (``"16/B374D848"``) as a number."""
    high, _, low = text.partition("/")
    return (int(high, 16) << 32) | int(low, 16)


@dataclass
class _Standby:
    """One standby and what it last reported."""

    engine: Engine
    replayed: int = -1
    lag_s: float = 0.0
    checked_at: float = -1e9
    down_until: float = 0.0
    served: int = 0

    def usable(self, needed: int, max_lag_s: float, now: float) -> bool:
        """Whether this standby has replayed position ``needed`` and lags at most
        ``max_lag_s``: from what it last reported while that is current (what it has
        replayed only grows), else asked again."""
        if now < self.down_until:
            return False
        behind = self.replayed < needed
        if now - self.checked_at >= (BEHIND_RECHECK_S if behind else RECHECK_S):
            self._check(now)
        return self.replayed >= needed and self.lag_s <= max_lag_s

    def _check(self, now: float) -> None:
        with self.engine.connect() as connection:
            replayed, lag = connection.execute(_STANDBY_STATE).one()
        self.checked_at = now
        if replayed is None:  # not a standby (promoted): it serves no reads here
            self.replayed, self.lag_s = -1, float("inf")
            return
        self.replayed, self.lag_s = lsn_value(str(replayed)), float(lag or 0.0)


# Lag as GitLab measures it: none while everything received is replayed (an idle primary
# sends nothing new, and the last replayed transaction grows old without any lag).
_STANDBY_STATE = sa.text(
    "SELECT pg_last_wal_replay_lsn()::text, CASE WHEN pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn() "
    "THEN 0 ELSE EXTRACT(EPOCH FROM now() - pg_last_xact_replay_timestamp()) END"
)


@dataclass
class StandbyReads:
    """Routes one store's reads between the primary and its standbys (see the module)."""

    standbys: list[_Standby]
    max_lag_s: float
    primary_served: int = 0
    _written: int = -1
    _turn: itertools.cycle[int] = field(default_factory=lambda: itertools.cycle([0]))
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def of(cls, engines: Sequence[Engine], max_lag_s: float) -> StandbyReads:
        """Reads for standbys ``engines``, each skipped while it lags more than ``max_lag_s``."""
        reads = cls([_Standby(engine) for engine in engines], max_lag_s)
        reads._turn = itertools.cycle(range(len(engines)))
        return reads

    def note_write(self, primary: Connection) -> None:
        """Remember the primary's WAL position after a committed write (``primary``: a
        connection outside any write transaction)."""
        current = primary.execute(sa.text("SELECT pg_current_wal_insert_lsn()::text")).scalar()
        position = lsn_value(str(current))
        with self._lock:
            self._written = max(self._written, position)

    def run(self, work: Callable[[Connection], T], on_primary: Callable[[], T]) -> T:
        """``work`` on a standby that has this store's writes, else ``on_primary()``."""
        for standby in self._candidates():
            try:
                with standby.engine.connect() as connection, connection.begin():
                    result = work(connection)
            except sa_exc.DBAPIError as exc:
                if getattr(exc.orig, "sqlstate", None) == _RECOVERY_CONFLICT:
                    break  # cancelled by the standby's replay: the primary answers instead
                if is_server_unreachable(exc):
                    standby.down_until = time.monotonic() + DOWN_S
                    continue
                raise
            standby.served += 1
            return result
        self.primary_served += 1
        return on_primary()

    def _candidates(self) -> list[_Standby]:
        now = time.monotonic()
        with self._lock:
            needed = self._written
            first = next(self._turn)
        ordered = self.standbys[first:] + self.standbys[:first]
        usable = []
        for standby in ordered:
            try:
                if standby.usable(needed, self.max_lag_s, now):
                    usable.append(standby)
            except sa_exc.DBAPIError:
                standby.down_until = now + DOWN_S
        return usable

    def dispose(self) -> None:
        """Close every standby connection."""
        for standby in self.standbys:
            standby.engine.dispose()

    def served(self) -> dict[str, int]:
        """How many reads each standby (by URL, password hidden) and the primary served."""
        counts = {s.engine.url.render_as_string(hide_password=True): s.served for s in self.standbys}
        return {**counts, "primary": self.primary_served}
