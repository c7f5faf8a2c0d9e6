"""A failover under a store: the primary dies, the standby is promoted, writes go on.

A real primary and a synchronous streaming standby (``replication.primary_and_standby``);
the store is opened with a libpq multi-host URL that takes whichever node accepts writes.
"""

from __future__ import annotations

import threading
import time

import pytest
from replication import failover_url, primary_and_standby

from hermes_store import SessionDB
from hermes_store.errors import ServerUnavailable

pytestmark = pytest.mark.postgres


def test_writes_go_on_after_a_failover_and_no_acknowledged_write_is_lost() -> None:
    with primary_and_standby(synchronous=True) as (primary, standby):
        db = SessionDB(url=failover_url(primary, standby))
        try:
            session = db.create_session("s", "cli")
            acknowledged: list[int] = []
            failed: list[BaseException] = []
            stop = threading.Event()

            def append_forever() -> None:
                n = 0
                while not stop.is_set():
                    try:
                        acknowledged.append(db.append_message(session, role="user", content=f"m{n}"))
                    except ServerUnavailable as exc:
                        failed.append(exc)
                    n += 1
                    time.sleep(0.01)

            writer = threading.Thread(target=append_forever)
            writer.start()
            time.sleep(1.0)
            before = len(acknowledged)
            primary.stop("immediate")
            killed_at = time.monotonic()
            standby.promote()
            deadline = time.monotonic() + 60
            while len(acknowledged) == before and time.monotonic() < deadline:
                time.sleep(0.05)
            recovered_s = time.monotonic() - killed_at
            time.sleep(0.5)
            stop.set()
            writer.join(timeout=60)
            stored = {m["id"] for m in db.get_messages(session)}
        finally:
            db.close()
        print(f"first acknowledged write {recovered_s:.2f} s after the kill; {len(failed)} calls failed")
        assert len(acknowledged) > before, "no write was acknowledged after the failover"
        assert set(acknowledged) <= stored  # synchronous replication: nothing acknowledged is lost
        assert all("\n" not in str(error) for error in failed)
