"""A copy into PostgreSQL keeps both sides busy: the next batch is read while one is
written, the rows are verified while the indexes are built, and the longest builds start
first. Each is observed on a real copy (a progress callback that waits, a bounded time,
for the other side to have begun), then the target is compared with the source."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from copy_support import assert_same_store, fill_store

from hermes_store.admin.copy_schema import SchemaObject
from hermes_store.admin.copy_target import LONGEST_BUILDS, build_order
from hermes_store.admin.transfer import copy_store
from hermes_store.db.engine import create_engine

WAIT_S = 10.0
"""How long a callback waits for the other side to begin (it begins at once when it runs
beside; it never does when the copy runs the steps one after the other)."""


@pytest.mark.postgres
def test_the_rows_are_verified_while_the_indexes_are_built(pg_url: str, tmp_path: Path) -> None:
    fill_store(tmp_path / "source.db", 6, 5)
    source, target = create_engine(tmp_path / "source.db", prepare=False), create_engine(pg_url)
    verifying = threading.Event()
    seen: list[tuple[str, int, bool]] = []

    def progress(step: str, done: int, total: int | None) -> None:
        if step == "verify":
            verifying.set()
        if step == "indexes" and done == 0:
            seen.append((step, done, verifying.wait(WAIT_S)))

    try:
        copy_store(source, target, progress)
        assert_same_store(source, target)
    finally:
        source.dispose()
        target.dispose()
    assert seen == [("indexes", 0, True)]  # the row checks had begun before the first build


@pytest.mark.postgres
def test_the_next_batch_is_read_while_one_is_written(pg_url: str, tmp_path: Path) -> None:
    fill_store(tmp_path / "source.db", 6, 5)
    source, target = create_engine(tmp_path / "source.db", prepare=False), create_engine(pg_url)
    pages = 0
    second_page = threading.Event()
    ahead: list[bool] = []

    def count_pages(conn: Any, cursor: Any, statement: str, *_: Any) -> None:
        nonlocal pages
        if "ORDER BY messages.id LIMIT" in " ".join(statement.split()):  # a page of messages
            pages += 1
            if pages == 2:
                second_page.set()

    def progress(step: str, done: int, total: int | None) -> None:
        if step == "messages" and done == 10:  # the first batch is written and committed
            ahead.append(second_page.wait(WAIT_S))

    sa.event.listen(source, "before_cursor_execute", count_pages)
    try:
        copy_store(source, target, progress, batch_rows=10)
        assert_same_store(source, target)
    finally:
        source.dispose()
        target.dispose()
    assert ahead == [True]


def test_the_longest_builds_start_first() -> None:
    def index(name: str) -> SchemaObject:
        return SchemaObject("index", name, "messages", f"CREATE INDEX {name}", f"CREATE INDEX {name}")

    given = [index(name) for name in ("idx_a", *reversed(LONGEST_BUILDS), "idx_b")]
    assert [item.name for item in build_order(given)] == [*LONGEST_BUILDS, "idx_a", "idx_b"]
