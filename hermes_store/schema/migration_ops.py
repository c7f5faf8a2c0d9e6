"""Idempotent schema operations shared by the Alembic revisions.

Legacy Hermes databases are ragged: a database stamped 7 may lack a version-7 column,
and one stamped 2 may already have version-5 columns (upstream added columns on every
open, whatever the version said). The revisions therefore add only what is missing and
drop only what is there. These helpers hold no DDL of their own: each revision keeps its
frozen DDL text, so history does not change when the package does.

In offline (``--sql``) mode there is no database to inspect; the helpers then emit the
operation unconditionally, which is right for a database the script itself built from
empty (or an online upgrade did): so a revision must not "re-add" offline what an earlier
revision has just created (0001 skips its legacy-gap columns offline). Tests run the
``--sql`` output through ``sqlite3 -bail`` and ``psql -v ON_ERROR_STOP=1``.
"""

from __future__ import annotations

import logging
import os
import random
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from functools import partial
from typing import TypeVar

import sqlalchemy as sa
from alembic import op

from hermes_store.db.backends import backend_for
from hermes_store.db.profiles import qualified, store_schema
from hermes_store.db.profiles import table_names as profile_table_names
from hermes_store.domain.progress import ProgressFn, ignore_progress

T = TypeVar("T")


def dialect_name() -> str:
    """The dialect the migration runs on (online or offline)."""
    return backend_for(op.get_context().dialect).name


def is_offline() -> bool:
    """True when Alembic renders SQL instead of running it."""
    return bool(op.get_context().as_sql)


def in_store_schema(name: str) -> str:
    """``name`` (a table, index or function) named in the profile's schema, for a statement
    that drops it if it exists: on a profile lacking it, the search path would find the one
    in ``public``, another store's. As it is without a profile, and offline (whose script
    sets the search path to the profile's schema first)."""
    if is_offline():
        return name
    return qualified(op.get_bind(), name)


def table_names() -> set[str]:
    """Names of the tables (and SQLite virtual tables) present now; empty offline."""
    if is_offline():
        return set()
    return profile_table_names(op.get_bind())


def column_names(table: str) -> set[str]:
    """Names of the columns ``table`` has now; empty offline or if the table is missing."""
    if is_offline():
        return set()
    bind = op.get_bind()
    if table not in profile_table_names(bind):
        return set()
    return {column["name"] for column in sa.inspect(bind).get_columns(table, schema=store_schema(bind))}


def index_names(table: str) -> set[str]:
    """Names of the indexes on ``table`` now; empty offline."""
    if is_offline():
        return set()
    bind = op.get_bind()
    if table not in profile_table_names(bind):
        return set()
    return {str(index["name"]) for index in sa.inspect(bind).get_indexes(table, schema=store_schema(bind))}


def add_columns_if_missing(table: str, columns: Iterable[sa.Column[object]]) -> None:
    """Add each column ``table`` lacks; columns already there are left alone."""
    present = column_names(table)
    for column in columns:
        if column.name not in present:
            with_lock_retry(partial(op.add_column, table, column), f"adding {table}.{column.name}")


def drop_columns_if_present(table: str, names: Iterable[str]) -> None:
    """Drop each named column that exists, with a native ``ALTER TABLE … DROP COLUMN``.

    Native drops (SQLite ≥ 3.35) keep the table and therefore its triggers; Alembic's
    batch mode would rebuild ``messages`` and silently drop the FTS triggers.
    """
    present = column_names(table)
    for name in names:
        if is_offline() or name in present:
            op.execute(sa.text(f'ALTER TABLE "{table}" DROP COLUMN "{name}"'))


def execute_all(statements: Iterable[str]) -> None:
    """Run raw DDL statements one at a time (``op.execute`` takes one statement)."""
    for statement in statements:
        op.execute(sa.text(statement))


# --- Online steps on PostgreSQL -----------------------------------------------------------
#
# A revision's PostgreSQL steps run while the previous release keeps reading and writing.
# So every step is its own short transaction (Alembic's autocommit block), a statement that
# needs a lock readers or writers would queue behind waits at most LOCK_TIMEOUT for it and
# is retried with backoff, indexes are built CONCURRENTLY, and rows are filled in bounded
# batches. Each step is idempotent, so a run killed at any point is completed by the next.
#
# An empty database is the exception ("fresh build", decided by migrations/env.py under the
# migrators' lock): nothing reads or writes it yet, so the whole history runs in ONE
# transaction instead. Other openers then see it empty or at head, never part-way, and a
# build killed part-way leaves it empty. In that mode the helpers below stay inside the
# transaction, build and drop indexes without CONCURRENTLY (which a transaction refuses),
# run each blocking statement once (a lock timeout inside the transaction would abort it,
# and no other session can see the new tables to hold a lock on them), and the batch
# fills find no rows.

LOCK_TIMEOUT = "500ms"
"""How long a blocking DDL statement may wait for its lock. While it waits, readers and
writers queue behind it; half a second keeps their stall under the 1 s target."""
LOCK_RETRIES = 40
"""Attempts of a blocking statement before the upgrade gives up (about two minutes with
the backoff below)."""
STATEMENT_TIMEOUT = "60s"
"""The migration session's statement timeout: generous for a DDL statement or a batch, a
backstop for a step that hangs. Concurrent builds and ANALYZE lift it (they scan the table)."""
BATCH_ROWS = 1_000
"""Rows a backfill updates per statement (and per transaction). Each updated row is a new
row version in every index of ``messages`` (two GIN indexes among them): 5,000-row
batches took 19 s on the shared 2-core machine at a load average of 15, too close to the
60 s statement timeout; a fifth of that keeps a batch a few seconds even there."""
BATCH_ROWS_ENV = "HERMES_MIGRATION_BATCH_ROWS"
"""Environment variable that sets the rows per backfill batch in place of :data:`BATCH_ROWS`
(docs/postgresql.md): smaller batches hold each row lock for less time on a busy server,
larger ones finish sooner on an idle one."""
PROGRESS_POLL_S = 0.5

LOCK_NOT_AVAILABLE = "55P03"

log = logging.getLogger("hermes_store.migrations")


def batch_rows() -> int:
    """Rows per backfill batch: :data:`BATCH_ROWS_ENV` when set, else :data:`BATCH_ROWS`.

    Raises ``ValueError`` naming the variable when it is not a positive whole number, before
    any batch runs.
    """
    raw = os.environ.get(BATCH_ROWS_ENV, "").strip()
    if not raw:
        return BATCH_ROWS
    try:
        rows = int(raw)
    except ValueError:
        rows = 0
    if rows < 1:
        raise ValueError(f"{BATCH_ROWS_ENV} must be a positive whole number of rows, not {raw!r}")
    return rows


def session_settings() -> dict[str, str]:
    """What the migration session sets on PostgreSQL (online and in ``--sql`` output)."""
    return {
        "lock_timeout": LOCK_TIMEOUT,
        "statement_timeout": STATEMENT_TIMEOUT,
        # A migrator that dies while a transaction is open frees its locks at once (the
        # server sees the socket close); one that hangs frees them after this.
        "idle_in_transaction_session_timeout": "10s",
    }


def is_online_server() -> bool:
    """True when the migration runs against a live PostgreSQL server (not ``--sql``)."""
    return dialect_name() == "postgresql" and not is_offline()


def is_fresh_build() -> bool:
    """True when an empty PostgreSQL database is being built in one transaction.

    ``migrations/env.py`` sets ``config.attributes["fresh_database"]`` after finding the
    database empty under the migrators' lock.
    """
    from alembic import context

    return is_online_server() and bool(context.config.attributes.get("fresh_database"))


@contextmanager
def outside_transaction() -> Iterator[None]:
    """Run the enclosed PostgreSQL steps each in its own transaction (autocommit).

    In ``--sql`` output this is a ``COMMIT`` before and a ``BEGIN`` after, so the
    ``CONCURRENTLY`` statements between run outside a transaction block in ``psql``.
    In a fresh build the steps stay in the build's one transaction.
    """
    if is_fresh_build():
        yield
        return
    with op.get_context().autocommit_block():
        yield


def _is_lock_timeout(exc: BaseException) -> bool:
    original = exc.orig if isinstance(exc, sa.exc.DBAPIError) else exc
    return getattr(original, "sqlstate", None) == LOCK_NOT_AVAILABLE


def with_lock_retry(work: Callable[[], T], what: str) -> T:
    """Run ``work`` (one blocking DDL step); on ``lock_timeout``, back off and retry.

    Online on PostgreSQL each attempt is its own transaction, so a step that got its lock
    holds it only for the statement. Elsewhere (SQLite, ``--sql``) ``work`` runs once, in
    the migration's transaction, as before; so does a fresh build's.
    """
    if not is_online_server() or is_fresh_build():
        return work()
    if _in_autocommit():
        return _retrying(work, what)
    return _retrying(work, what, own_transaction=True)


def _in_autocommit() -> bool:
    return op.get_bind().get_execution_options().get("isolation_level") == "AUTOCOMMIT"


def _retrying(work: Callable[[], T], what: str, own_transaction: bool = False) -> T:
    delay = 0.1
    for attempt in range(1, LOCK_RETRIES + 1):
        try:
            if not own_transaction:
                return work()
            with outside_transaction():
                return work()
        except sa.exc.OperationalError as exc:
            if not _is_lock_timeout(exc) or attempt == LOCK_RETRIES:
                raise
            log.info("%s: lock not granted within %s (attempt %d); retrying", what, LOCK_TIMEOUT, attempt)
            time.sleep(delay * random.uniform(0.5, 1.0))
            delay = min(delay * 2, 5.0)
    raise AssertionError("unreachable")  # pragma: no cover


def execute_with_lock_retry(statement: str) -> None:
    """:func:`with_lock_retry` for one raw statement."""
    with_lock_retry(lambda: op.execute(sa.text(statement)), statement.split("(")[0][:60])


@contextmanager
def lifted_timeouts() -> Iterator[None]:
    """Lift the session's statement and lock timeouts around a concurrent step.

    ``CREATE INDEX CONCURRENTLY``, ``DROP INDEX CONCURRENTLY`` and ``ANALYZE`` take a
    lock no reader or writer conflicts with, so waiting for it stalls nobody; a short
    ``lock_timeout`` would only throw away a finished build in its last phase (which
    waits for older snapshots), and a build over millions of rows rightly takes minutes.
    """
    op.execute(sa.text("SET statement_timeout = 0"))
    op.execute(sa.text("SET lock_timeout = 0"))
    try:
        yield
    finally:
        if not is_online_server() or _connection_usable():
            op.execute(sa.text(f"SET statement_timeout = '{STATEMENT_TIMEOUT}'"))
            op.execute(sa.text(f"SET lock_timeout = '{LOCK_TIMEOUT}'"))


def _connection_usable() -> bool:
    return not op.get_bind().closed and not op.get_bind().invalidated


def invalid_index_names(table: str) -> set[str]:
    """Indexes on ``table`` a killed or failed ``CREATE INDEX CONCURRENTLY`` left INVALID."""
    if not is_online_server():
        return set()
    rows = op.get_bind().execute(
        sa.text(
            "SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
            "WHERE i.indrelid = CAST(:table AS regclass) AND NOT i.indisvalid"
        ),
        {"table": table},
    )
    return {str(name) for name in rows.scalars()}


def create_index_concurrently(name: str, statement: str) -> None:
    """Build index ``name`` with ``statement`` (a ``CREATE … INDEX CONCURRENTLY IF NOT
    EXISTS`` of that name), first dropping an INVALID leftover of a killed build.

    Must run inside :func:`outside_transaction`. Reports the build's progress (blocks,
    then tuples) from ``pg_stat_progress_create_index`` when the caller asked for progress.
    A fresh build runs the statement without ``CONCURRENTLY``, in its transaction, over
    an empty table.
    """
    if is_fresh_build():
        op.execute(sa.text(statement.replace(" CONCURRENTLY ", " ", 1)))
        return
    table = statement.split(" ON ", 1)[1].split()[0]
    with lifted_timeouts():
        if name in invalid_index_names(table):
            log.warning("index %s was left INVALID by an interrupted build; rebuilding it", name)
            op.execute(sa.text(f"DROP INDEX CONCURRENTLY IF EXISTS {name}"))
        with _build_progress(f"index {name}"):
            op.execute(sa.text(statement))


def drop_index_concurrently(name: str) -> None:
    """``DROP INDEX CONCURRENTLY IF EXISTS`` (inside :func:`outside_transaction`); a
    plain ``DROP INDEX IF EXISTS`` in a fresh build's transaction."""
    if is_fresh_build():
        op.execute(sa.text(f"DROP INDEX IF EXISTS {in_store_schema(name)}"))
        return
    with lifted_timeouts():
        op.execute(sa.text(f"DROP INDEX CONCURRENTLY IF EXISTS {in_store_schema(name)}"))


def analyze(table: str) -> None:
    """Fresh planner statistics for ``table`` (inside :func:`outside_transaction`)."""
    with lifted_timeouts():
        op.execute(sa.text(f"ANALYZE {table}"))


def progress_fn() -> ProgressFn:
    """The progress callback the caller of the upgrade passed (``config.attributes["progress"]``)."""
    from alembic import context

    supplied = context.config.attributes.get("progress")
    return supplied if supplied is not None else ignore_progress


@contextmanager
def _build_progress(step: str) -> Iterator[None]:
    """While the enclosed statement builds an index, poll its progress from a second connection."""
    report = progress_fn()
    if report is ignore_progress or not is_online_server():
        yield
        return
    bind = op.get_bind()
    pid = bind.exec_driver_sql("SELECT pg_backend_pid()").scalar()
    stop = threading.Event()

    def poll() -> None:
        with bind.engine.connect() as watcher:
            while not stop.wait(PROGRESS_POLL_S):
                row = watcher.execute(
                    sa.text(
                        "SELECT phase, blocks_done, blocks_total, tuples_done, tuples_total "
                        "FROM pg_stat_progress_create_index WHERE pid = :pid"
                    ),
                    {"pid": pid},
                ).first()
                watcher.rollback()
                if row is None:
                    continue
                phase, blocks_done, blocks_total, tuples_done, tuples_total = row
                if tuples_total:
                    report(f"{step} ({phase})", int(tuples_done), int(tuples_total))
                elif blocks_total:
                    report(f"{step} ({phase})", int(blocks_done), int(blocks_total))

    watcher = threading.Thread(target=poll, name=f"progress of {step}", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        stop.set()
        watcher.join()


def backfill(step: str, table: str, assignment: str, missing: str) -> None:
    """Fill a new column of every row of ``table`` in batches of :func:`batch_rows` ids.

    ``assignment`` is the ``SET`` clause, ``missing`` the condition of a row not yet
    filled (``search_vector IS NULL``). Each batch is one statement in its own transaction
    (inside :func:`outside_transaction`), so readers and writers never wait on it for
    long, and a killed run resumes at the first row still missing. Rows written after the
    step started are filled by the trigger that must exist before this runs.

    In ``--sql`` output the same loop is a ``DO`` block that commits after every batch.
    """
    per_batch = batch_rows()
    if is_offline():
        with lifted_timeouts():  # one statement that runs every batch
            op.execute(sa.text(_backfill_do_block(table, assignment, missing, per_batch)))
        return
    bind = op.get_bind()
    # Where a killed run stopped: the first row still missing (a walk of the primary key).
    first = bind.exec_driver_sql(f"SELECT id FROM {table} WHERE {missing} ORDER BY id LIMIT 1").scalar()
    if first is None:
        return
    # Rows past the current last id were written with the trigger in place.
    last = int(bind.exec_driver_sql(f"SELECT max(id) FROM {table}").scalar() or first)
    update = f"UPDATE {table} SET {assignment} WHERE id >= :low AND id < :high AND {missing}"
    _run_batches(step, table, update, int(first), last, per_batch, {})


def _run_batches(
    step: str, table: str, statement: str, start: int, last: int, batch_rows: int, params: dict[str, object]
) -> None:
    """Run ``statement`` for the ids ``[low, low + batch_rows)`` from ``start`` to ``last``,
    each batch in its own transaction (retried on a lock timeout), merging the GIN pending
    lists after each and reporting progress."""
    bind = op.get_bind()
    report = progress_fn()
    batch = sa.text(statement)
    clean = sa.text(_CLEAN_GIN_PENDING.format(table=table))
    low = start
    while low <= last:
        bounds = {**params, "low": low, "high": low + batch_rows}
        with_lock_retry(partial(bind.execute, batch, bounds), f"{step} batch at id {low}")
        bind.execute(clean)
        low += batch_rows
        report(step, min(low, last + 1) - start, last + 1 - start)


_CLEAN_GIN_PENDING = (
    # Each updated row is queued in every GIN index's pending list; whoever inserts when a
    # list passes gin_pending_list_limit merges it into the index, which takes seconds. The
    # migrator merges after every batch, so a writer of the running release never has to.
    "SELECT count(gin_clean_pending_list(i.indexrelid)) FROM pg_index i "
    "JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am a ON a.oid = c.relam "
    "WHERE i.indrelid = '{table}'::regclass AND a.amname = 'gin' AND i.indisvalid"
)


def _backfill_do_block(table: str, assignment: str, missing: str, batch_rows: int) -> str:
    return f"""DO $$
DECLARE
    low bigint;
    last bigint;
BEGIN
    SELECT min(id), max(id) INTO low, last FROM {table} WHERE {missing};
    WHILE low <= last LOOP
        UPDATE {table} SET {assignment} WHERE id >= low AND id < low + {batch_rows} AND {missing};
        PERFORM {_CLEAN_GIN_PENDING.format(table=table).removeprefix("SELECT ")};
        COMMIT;
        low := low + {batch_rows};
    END LOOP;
END
$$"""


PROGRESS_TABLE = "hermes_backfill_progress"
"""Where :func:`rewrite_all` records, per step, the first id it has not rewritten yet."""

_CREATE_PROGRESS_TABLE = (
    f"CREATE TABLE IF NOT EXISTS {PROGRESS_TABLE} (step text PRIMARY KEY, next_id bigint NOT NULL)"
)


def rewrite_all(step: str, table: str, assignment: str) -> None:
    """Rewrite a column of every row of ``table`` (``SET assignment``) in batches of
    :func:`batch_rows` ids.

    For a value that changes for rows already filled (a new tokenizer), where
    :func:`backfill`'s "still missing" condition cannot tell done rows from the others.
    Each batch and the record of how far it got (:data:`PROGRESS_TABLE`, keyed by
    ``step``) are one statement in its own transaction, so a killed run resumes after
    the last batch that committed and a finished step is not run again. Rows written
    after the step started are kept up to date by a trigger that must exist before this
    runs. Offline it is a ``DO`` block that commits after every batch.
    """
    per_batch = batch_rows()
    if is_offline():
        op.execute(sa.text(_CREATE_PROGRESS_TABLE))
        with lifted_timeouts():
            op.execute(sa.text(_rewrite_do_block(step, table, assignment, per_batch)))
        return
    bind = op.get_bind()
    execute_with_lock_retry(_CREATE_PROGRESS_TABLE)
    done = bind.execute(
        sa.text(f"SELECT next_id FROM {PROGRESS_TABLE} WHERE step = :step"), {"step": step}
    ).scalar()
    first, last = bind.exec_driver_sql(f"SELECT min(id), max(id) FROM {table}").one()
    if first is None:
        return
    statement = (
        f"WITH batch AS (UPDATE {table} SET {assignment} WHERE id >= :low AND id < :high) "
        f"INSERT INTO {PROGRESS_TABLE} (step, next_id) VALUES (:step, :high) "
        "ON CONFLICT (step) DO UPDATE SET next_id = EXCLUDED.next_id"
    )
    start = max(int(first), int(done or 0))
    _run_batches(step, table, statement, start, int(last), per_batch, {"step": step})


def forget_rewrite(step: str) -> None:
    """Drop :func:`rewrite_all`'s record of ``step`` (a downgrade undid it: a later upgrade redoes it)."""
    execute_with_lock_retry(_CREATE_PROGRESS_TABLE)
    op.execute(sa.text(f"DELETE FROM {PROGRESS_TABLE} WHERE step = {_sql_string(step)}"))


def _sql_string(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _rewrite_do_block(step: str, table: str, assignment: str, batch_rows: int) -> str:
    quoted_step = _sql_string(step)
    return f"""DO $$
DECLARE
    low bigint;
    last bigint;
BEGIN
    SELECT min(id), max(id) INTO low, last FROM {table};
    low := GREATEST(low, COALESCE((SELECT next_id FROM {PROGRESS_TABLE} WHERE step = {quoted_step}), low));
    WHILE low <= last LOOP
        UPDATE {table} SET {assignment} WHERE id >= low AND id < low + {batch_rows};
        INSERT INTO {PROGRESS_TABLE} (step, next_id) VALUES ({quoted_step}, low + {batch_rows})
            ON CONFLICT (step) DO UPDATE SET next_id = EXCLUDED.next_id;
        PERFORM {_CLEAN_GIN_PENDING.format(table=table).removeprefix("SELECT ")};
        COMMIT;
        low := low + {batch_rows};
    END LOOP;
END
$$"""


def squawk_ignore(rules: str, reason: str) -> None:
    """In ``--sql`` output for PostgreSQL, tell squawk (the migration linter) to let ``rules``
    pass in this script, with the ``reason`` beside it; online, nothing."""
    if is_offline() and dialect_name() == "postgresql":
        op.get_context().impl.static_output(f"-- squawk-ignore-file {rules} -- {reason}")


def update_by_key_ranges(step: str, table: str, key: str, update: str) -> None:
    """Run ``update`` over ``table`` in ranges of :func:`batch_rows` rows of its text key.

    For a one-off data fix on a table whose key is not a number (``sessions.id``), where
    :func:`backfill`'s id arithmetic does not apply. ``update`` is an ``UPDATE`` whose
    ``WHERE`` holds ``{range}``, the condition naming the current range of ``key``; it must
    leave a fixed row outside its own condition, so that a run killed after any batch is
    completed by the next, which walks the key again. Each range is one statement in its
    own transaction (inside :func:`outside_transaction`). Offline it is a ``DO`` block
    that commits after every range.
    """
    per_batch = batch_rows()
    window = f"(SELECT {key} FROM {table} WHERE {{after}} ORDER BY {key} LIMIT {per_batch})"
    if is_offline():
        statement = update.format(
            range=f"(previous_key IS NULL OR {key} > previous_key) AND {key} <= range_end"
        )
        block = f"""DO $$
DECLARE
    previous_key text;
    range_end text;
BEGIN
    LOOP
        SELECT max({key}) INTO range_end
            FROM {window.format(after=f"(previous_key IS NULL OR {key} > previous_key)")} AS batch;
        EXIT WHEN range_end IS NULL;
        {statement};
        COMMIT;
        previous_key := range_end;
    END LOOP;
END
$$"""
        with lifted_timeouts():
            op.execute(sa.text(block))
        return
    bind = op.get_bind()
    report = progress_fn()
    total = int(bind.exec_driver_sql(f"SELECT count(*) FROM {table}").scalar() or 0)
    # NULL before the first range: every key, the empty string included, comes after it.
    past = f"(CAST(:after AS text) IS NULL OR {key} > CAST(:after AS text))"
    ranged = sa.text(update.format(range=f"{past} AND {key} <= :last"))
    after: str | None = None
    done = 0
    while True:
        bounds = bind.execute(
            sa.text(f"SELECT max({key}), count(*) FROM {window.format(after=past)} AS batch"),
            {"after": after},
        ).one()
        if bounds[0] is None:
            return
        last = str(bounds[0])
        with_lock_retry(partial(bind.execute, ranged, {"after": after, "last": last}), f"{step} up to {last}")
        done += int(bounds[1])
        report(step, min(done, total), max(total, done))
        after = last
