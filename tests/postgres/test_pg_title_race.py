"""Concurrent ``set_title`` with the same title on PostgreSQL: one wins, every other caller
gets the ``ValueError`` SQLite gives (never the driver's ``UniqueViolation``).

On SQLite ``BEGIN IMMEDIATE`` serialises the title check and the update; on PostgreSQL
several writers pass the check at once and the unique index refuses all but the first.
Writers here are separate stores (their own connections, real concurrent transactions),
released together by a barrier, round after round.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from hermes_store import SessionDB

WRITERS = 4
ROUNDS = 20


@pytest.fixture
def stores(pg_head_url: str) -> Iterator[list[SessionDB]]:
    first = SessionDB(url=pg_head_url)  # a new database at head
    opened = [first, *(SessionDB(url=pg_head_url) for _ in range(WRITERS - 1))]
    for writer in range(WRITERS):
        first.create_session(f"s{writer}", "cli")
    yield opened
    for db in opened:
        db.close()


def test_every_loser_of_a_title_race_gets_value_error(stores: list[SessionDB]) -> None:
    barrier = threading.Barrier(WRITERS)
    outcomes: dict[tuple[int, int], object] = {}

    def race(writer: int) -> None:
        db = stores[writer]
        for round_ in range(ROUNDS):
            barrier.wait(timeout=60)
            try:
                outcomes[round_, writer] = db.set_session_title(f"s{writer}", f"shared title {round_}")
            except Exception as exc:  # recorded, asserted below
                outcomes[round_, writer] = exc

    threads = [threading.Thread(target=race, args=(w,), daemon=True) for w in range(WRITERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert len(outcomes) == WRITERS * ROUNDS
    last_won: dict[str, str | None] = {f"s{w}": None for w in range(WRITERS)}
    for round_ in range(ROUNDS):
        results = [outcomes[round_, w] for w in range(WRITERS)]
        winners = [w for w, result in enumerate(results) if result is True]
        assert len(winners) == 1, results
        owner = f"s{winners[0]}"
        last_won[owner] = f"shared title {round_}"
        for result in results:
            if result is True:
                continue
            assert isinstance(result, ValueError), repr(result)
            assert str(result) == f"Title 'shared title {round_}' is already in use by session {owner}"
    assert {session: stores[0].get_session_title(session) for session in last_won} == last_won
