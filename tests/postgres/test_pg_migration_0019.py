"""Revision 0019: upstream's schema 17 on PostgreSQL; rows kept, delegates tagged, online.

Through the real ``alembic`` command on a database at 0018 holding 30 root sessions (ended
by compression, by a branch, or not at all), 270 children of every kind and 200 messages:
the upgrade adds the columns (existing rows take the defaults), the tables and the indexes
(valid), records schema_version 17 and the Telegram topic-schema key, and tags exactly
the delegate children (upstream's version-16 rules); the downgrade restores 0018's
catalog with every row; a run that stops after its last step, or is killed inside the
tagging (while the previous release keeps writing), is completed by the next run and ends
where a clean one does.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
import sqlalchemy as sa
from pg_catalog import (
    MIGRATOR,
    alembic,
    alembic_command,
    catalog,
    engine_for,
    hold_update_of,
    migrate_with_rows,
    scalar,
    update_is_held,
    wait_for,
)
from pg_server import scratch_database
from support import REPO_ROOT

from hermes_store import SessionDB
from hermes_store.schema.migration_ops import batch_rows

pytestmark = pytest.mark.postgres

ROOTS = 30
CHILDREN = 270
MESSAGES = 200
ENDED_AT = 1.7e9 + 100
CONFIGS = (
    None,
    '{"temperature": 0.5}',
    '{"_branched_from": "x"}',
    '{"_delegate_from": "orig"}',
    "not json",
    "[1, 2]",
)
"""A child's ``model_config`` by ``number % 6``."""

FILL = (
    "INSERT INTO sessions (id, source, started_at, ended_at, end_reason) "
    f"SELECT 'r' || lpad(i::text, 3, '0'), 'cli', 1.7e9, {ENDED_AT}, "
    "CASE mod(i, 3) WHEN 0 THEN 'compression' WHEN 1 THEN 'branched' END "
    f"FROM generate_series(1, {ROOTS}) AS i",
    "INSERT INTO sessions (id, source, started_at, parent_session_id, model_config) "
    "SELECT 'c' || lpad(i::text, 4, '0'), 'cli', 1.7e9 + 50 + mod(i, 2) * 100, "
    f"'r' || lpad((mod(i, {ROOTS}) + 1)::text, 3, '0'), "
    "(ARRAY[NULL, " + ", ".join(f"'{config}'" for config in CONFIGS[1:]) + "])[mod(i, 6) + 1] "
    f"FROM generate_series(1, {CHILDREN}) AS i",
    "INSERT INTO messages (session_id, role, content, timestamp) "
    f"SELECT 'r' || lpad((mod(i, {ROOTS}) + 1)::text, 3, '0'), 'user', 'message ' || i || ' 记忆', 1.7e9 + i "
    f"FROM generate_series(1, {MESSAGES}) AS i",
)
SESSIONS_DIGEST = (
    "SELECT md5(string_agg(concat_ws('|', id, source, started_at, ended_at, end_reason, parent_session_id), "
    "',' ORDER BY id)) FROM sessions"
)
MESSAGES_DIGEST = (
    "SELECT md5(string_agg(id || '|' || session_id || '|' || content, ',' ORDER BY id)) FROM messages"
)
CONFIGS_NOW = "SELECT id, model_config FROM sessions ORDER BY id"


def expected_configs() -> dict[str, object]:
    """Every session's ``model_config`` after the tagging, parsed (text when not JSON)."""
    expected: dict[str, object] = {f"r{i:03d}": None for i in range(1, ROOTS + 1)}
    for number in range(1, CHILDREN + 1):
        parent_number = number % ROOTS + 1
        parent_end = ("compression", "branched", None)[parent_number % 3]
        started_after_parent_ended = number % 2 == 1
        config = CONFIGS[number % 6]
        parsed = None if config is None else _parsed(config)
        is_branch = parent_end == "branched" and started_after_parent_ended
        tag = (
            parent_end != "compression"
            and not is_branch
            and (parsed is None or isinstance(parsed, dict))
            and not (isinstance(parsed, dict) and ({"_branched_from", "_delegate_from"} & set(parsed)))
        )
        if tag:
            parsed = {**(parsed or {}), "_delegate_from": f"r{parent_number:03d}"}  # type: ignore[dict-item]
        expected[f"c{number:04d}"] = parsed
    return expected


def _parsed(text: str | None) -> object:
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


def configs_now(url: str) -> dict[str, object]:
    engine = engine_for(url)
    with engine.connect() as connection:
        rows = connection.exec_driver_sql(CONFIGS_NOW).all()
    engine.dispose()
    return {str(sid): _parsed(config) for sid, config in rows}


def test_upgrade_keeps_every_row_gives_it_the_defaults_and_tags_the_delegate_children(pg_url: str) -> None:
    migrate_with_rows(pg_url, "0018", FILL)
    sessions, messages = scalar(pg_url, SESSIONS_DIGEST), scalar(pg_url, MESSAGES_DIGEST)
    result = alembic(pg_url, "upgrade", "0019")
    assert result.returncode == 0, result.stderr
    assert (scalar(pg_url, SESSIONS_DIGEST), scalar(pg_url, MESSAGES_DIGEST)) == (sessions, messages)
    assert (
        scalar(pg_url, "SELECT count(*) FROM messages WHERE (active, compacted, observed) <> (1, 0, 0)") == 0
    )
    assert scalar(pg_url, "SELECT count(*) FROM sessions WHERE (rewind_count, archived) <> (0, 0)") == 0
    expected = expected_configs()
    assert configs_now(pg_url) == expected
    tagged = [
        sid for sid, config in expected.items() if isinstance(config, dict) and "_delegate_from" in config
    ]
    assert 50 < len(tagged) < CHILDREN  # every kind of child is in the fill
    assert scalar(pg_url, "SELECT version FROM schema_version") == 17
    assert (
        scalar(pg_url, "SELECT value FROM state_meta WHERE key = 'telegram_dm_topic_schema_version'") == "2"
    )
    indexes = {row[0]: row[2] for row in catalog(pg_url)["indexes"]}
    for name in (
        "idx_sessions_source_id",
        "idx_sessions_session_key",
        "idx_sessions_gateway_peer",
        "idx_sessions_handoff_state",
        "idx_messages_session_active",
        "idx_messages_platform_msg_id",
        "idx_compression_locks_expires",
        "idx_telegram_dm_topic_bindings_session",
        "idx_telegram_dm_topic_bindings_user",
    ):
        assert indexes[name] is True, name
    db = SessionDB(url=pg_url)
    try:
        assert len(db.get_messages("r001")) == MESSAGES // ROOTS  # messages 30, 60, …, 180
        written = db.append_message("r001", "user", "after the upgrade 记忆")
        assert written in {int(hit["id"]) for hit in db.search_messages("记忆", limit=MESSAGES + 1)}
    finally:
        db.close()


def test_downgrade_restores_0018_keeping_rows_and_a_second_upgrade_ends_the_same(pg_url: str) -> None:
    migrate_with_rows(pg_url, "0018", FILL)
    at_0018 = catalog(pg_url)
    sessions, messages = scalar(pg_url, SESSIONS_DIGEST), scalar(pg_url, MESSAGES_DIGEST)
    alembic(pg_url, "upgrade", "0019")
    at_0019 = catalog(pg_url)
    result = alembic(pg_url, "downgrade", "0018")
    assert result.returncode == 0, result.stderr
    assert catalog(pg_url) == at_0018  # schema_version back to 11 included
    assert (scalar(pg_url, SESSIONS_DIGEST), scalar(pg_url, MESSAGES_DIGEST)) == (sessions, messages)
    assert scalar(pg_url, "SELECT count(*) FROM state_meta") == 0
    # The tags are data: they stay, and the next upgrade leaves them as they are.
    assert configs_now(pg_url) == expected_configs()
    alembic(pg_url, "upgrade", "0019")
    assert catalog(pg_url) == at_0019
    assert configs_now(pg_url) == expected_configs()


def test_a_run_stopped_after_its_last_step_is_finished_by_the_next(pg_url: str) -> None:
    """Everything done but the version stamps (a run killed at its very end): the rerun
    repeats each step harmlessly, tags nothing twice and stamps 0019 and 17."""
    migrate_with_rows(pg_url, "0018", FILL)
    alembic(pg_url, "upgrade", "0019")
    at_0019 = catalog(pg_url)
    tagged_versions = scalar(pg_url, "SELECT string_agg(xmin::text, ',' ORDER BY id) FROM sessions")
    engine = engine_for(pg_url)
    with engine.begin() as connection:
        connection.exec_driver_sql("UPDATE alembic_version SET version_num = '0018'")
        connection.exec_driver_sql("UPDATE schema_version SET version = 11")
    engine.dispose()
    alembic(pg_url, "upgrade", "0019")
    assert catalog(pg_url) == at_0019
    assert configs_now(pg_url) == expected_configs()
    # No session row was written again: every one already carried its tag or was no delegate.
    assert scalar(pg_url, "SELECT string_agg(xmin::text, ',' ORDER BY id) FROM sessions") == tagged_versions


PREVIOUS_RELEASE_WRITES = (
    # What revision 0018's release does while serving: new sessions and messages (no new
    # column named), counters bumped on a session the tagging does not touch.
    "INSERT INTO sessions (id, source, started_at, message_count, tool_call_count, input_tokens, "
    "output_tokens) VALUES ('during', 'telegram', 1.8e9, 0, 0, 0, 0)",
    "INSERT INTO messages (session_id, role, content, timestamp) VALUES ('during', 'user', 'hi', 1.8e9)",
    "INSERT INTO messages (session_id, role, content, timestamp) "
    "VALUES ('c0001', 'user', 'in a child', 1.8e9)",
    "UPDATE sessions SET message_count = message_count + 1 WHERE id = 'during'",
)


def test_killed_inside_the_tagging_is_completed_by_the_next_run_while_the_previous_release_writes(
    pg_url: str, pg_admin_url: str, tmp_path: Path
) -> None:
    assert batch_rows() < CHILDREN // 2  # the tagging walks the children in several ranges
    migrate_with_rows(pg_url, "0018", FILL)
    expected = expected_configs()
    per_batch = batch_rows()
    second_range = sorted(expected)[per_batch : 2 * per_batch]
    held = next(
        sid for sid in second_range if isinstance(expected[sid], dict) and "_delegate_from" in expected[sid]
    )  # type: ignore[operator]
    first_range = sorted(expected)[:per_batch]
    release = hold_update_of(pg_url, held, table="sessions")
    with (tmp_path / "upgrade.log").open("wb") as stderr:
        upgrade = subprocess.Popen(
            alembic_command(pg_url, "upgrade", "0019"),
            cwd=REPO_ROOT,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    try:
        wait_for(lambda: update_is_held(pg_url), "the tagging to wait inside its second range")
        # The first range committed; the held one has not.
        now = configs_now(pg_url)
        assert all(now[sid] == expected[sid] for sid in first_range)
        assert now[held] == _parsed(CONFIGS[int(held[1:]) % 6])
        # The previous release keeps writing, none of it waiting on the migration.
        writer = sa.create_engine(pg_url, poolclass=sa.pool.NullPool)
        with writer.begin() as connection:
            connection.exec_driver_sql("SET LOCAL statement_timeout = '5s'")
            started = time.monotonic()
            for statement in PREVIOUS_RELEASE_WRITES:
                connection.exec_driver_sql(statement)
        writer.dispose()
        assert time.monotonic() - started < 5
    finally:
        upgrade.kill()
        upgrade.wait(timeout=30)
    wait_for(
        lambda: (
            scalar(
                pg_url,
                f"SELECT count(*) FROM pg_stat_activity WHERE application_name = '{MIGRATOR}' "
                "AND datname = current_database()",
            )
            == 0
        ),
        "the killed migrator's session to end",
    )
    release()
    assert scalar(pg_url, "SELECT version_num FROM alembic_version") == "0018"
    first_versions = scalar(
        pg_url,
        f"SELECT string_agg(xmin::text, ',' ORDER BY id) FROM sessions WHERE id <= '{first_range[-1]}'",
    )
    result = alembic(pg_url, "upgrade", "0019")
    assert result.returncode == 0, result.stderr
    assert configs_now(pg_url) == {**expected, "during": None}
    # The rerun walked the first range again and wrote none of its rows: all were done.
    assert (
        scalar(
            pg_url,
            f"SELECT string_agg(xmin::text, ',' ORDER BY id) FROM sessions WHERE id <= '{first_range[-1]}'",
        )
        == first_versions
    )
    # The same catalog as a clean upgrade's.
    with scratch_database(pg_admin_url, "hermes_t0019") as reference:
        migrate_with_rows(reference, "0018", FILL)
        alembic(reference, "upgrade", "0019")
        assert catalog(pg_url) == catalog(reference)


CONFIG_TEXTS = {
    "t1": '{"n": 1e16, "b": 1.50, "a": [1, 2 ]}',
    "t2": '{ "z" : "é\\u00e9" }\n',
    "t3": "{}",
    "t4": "{ }",
    "t5": None,
}
"""Delegate children whose ``model_config`` text jsonb would rewrite (numbers, key order,
spacing, escapes), or which hold no keys."""


def _sql_text(text: str | None) -> str:
    return "NULL" if text is None else "'" + text.replace("'", "''") + "'"


def test_the_tagging_keeps_the_config_text_and_only_adds_the_tag(pg_url: str) -> None:
    """As SQLite's ``json_set`` keeps the number text and key order, the server's tagging
    leaves every byte of the text as it was and adds the key behind the last member."""
    fill = [
        "INSERT INTO sessions (id, source, started_at) VALUES ('root', 'cli', 1.7e9)",
        *(
            "INSERT INTO sessions (id, source, started_at, parent_session_id, model_config) "
            f"VALUES ('{sid}', 'cli', 1.7e9 + 1, 'root', {_sql_text(text)})"
            for sid, text in CONFIG_TEXTS.items()
        ),
    ]
    migrate_with_rows(pg_url, "0018", fill)
    alembic(pg_url, "upgrade", "0019")
    engine = engine_for(pg_url)
    with engine.connect() as connection:
        now = dict(
            connection.exec_driver_sql("SELECT id, model_config FROM sessions WHERE id <> 'root'").all()
        )
    engine.dispose()
    assert now == {
        "t1": '{"n": 1e16, "b": 1.50, "a": [1, 2 ],"_delegate_from":"root"}',
        "t2": '{ "z" : "é\\u00e9" ,"_delegate_from":"root"}\n',
        "t3": '{"_delegate_from":"root"}',
        "t4": '{ "_delegate_from":"root"}',
        "t5": '{"_delegate_from":"root"}',
    }


def test_hidden_messages_stay_hidden_through_a_downgrade_and_come_back_with_the_upgrade(pg_url: str) -> None:
    """Revision 0018's release has no ``active`` flag: the rewound and compacted-away
    messages wait outside ``messages`` until the next upgrade puts them back, hidden."""
    with SessionDB(url=pg_url) as db:
        db.create_session("s", "cli")
        live = [db.append_message("s", "user", f"live walnut {n}") for n in range(2)]
        rewound = db.append_message("s", "user", "rewound lantern")
        compacted = db.append_message("s", "assistant", "compacted meadow")
    engine = engine_for(pg_url)
    with engine.begin() as connection:
        connection.exec_driver_sql(f"UPDATE messages SET active = 0 WHERE id = {rewound}")
        connection.exec_driver_sql(f"UPDATE messages SET active = 0, compacted = 1 WHERE id = {compacted}")
    engine.dispose()
    alembic(pg_url, "downgrade", "0018")
    assert scalar(pg_url, "SELECT string_agg(id::text, ',' ORDER BY id) FROM messages") == ",".join(
        map(str, live)
    )
    alembic(pg_url, "upgrade", "head")
    engine = engine_for(pg_url)
    with engine.connect() as connection:
        rows = connection.exec_driver_sql("SELECT id, active, compacted FROM messages ORDER BY id").all()
        assert connection.exec_driver_sql("SELECT to_regclass('hermes_hidden_messages')").scalar() is None
    engine.dispose()
    assert [tuple(row) for row in rows] == [
        (live[0], 1, 0),
        (live[1], 1, 0),
        (rewound, 0, 0),
        (compacted, 0, 1),
    ]
    with SessionDB(url=pg_url) as db:
        assert [m["content"] for m in db.get_messages("s")] == ["live walnut 0", "live walnut 1"]
        assert [int(hit["id"]) for hit in db.search_messages("lantern")] == []
