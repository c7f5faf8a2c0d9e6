"""Revision 0017: an index of adjacent word pairs for phrase search; rows and hits kept, online.

Through the real ``alembic`` command on a database at 0016 holding phrases whose words
often stand apart: the upgrade builds ``idx_messages_word_pairs`` (valid) over
``hermes_word_pairs(search_vector)``; every phrase query finds the same messages before
and after, the messages older than the newest slice now through the index; a message
written afterwards is indexed and found; the downgrade removes the index and the function
and keeps every row, and the searches still find the same messages.
"""

from __future__ import annotations

import pytest
from pg_catalog import alembic, catalog, migrate_with_rows, scalar, search_hits

from hermes_store import SessionDB
from hermes_store.search.postgres.words import FIRST_WORD_WINDOW

pytestmark = pytest.mark.postgres

ROWS = 3_000
"""More than ``FIRST_WORD_WINDOW``: a phrase search looks older slices up in the pair index."""

FILL = (
    "INSERT INTO sessions (id, source, started_at, message_count, tool_call_count, input_tokens, "
    f"output_tokens) VALUES ('s', 'cli', 1.7e9, {ROWS}, 0, 0, 0)",
    # The same words side by side in some messages, apart in the others.
    "INSERT INTO messages (session_id, role, content, tool_name, timestamp) "
    "SELECT 's', 'user', CASE mod(i, 5) "
    "WHEN 0 THEN 'does does it work ' || i "
    "WHEN 1 THEN 'does it work, does ' || i "
    "WHEN 2 THEN 'the Café Crème at my.app_config.ts ' || i "
    "WHEN 3 THEN 'any does ' || i || ' work it does' "
    "ELSE 'work it, any ' || i || ' does' END, "
    "CASE WHEN mod(i, 7) = 0 THEN 'terminal' END, "
    f"1.7e9 + i FROM generate_series(1, {ROWS}) AS i",
)
QUERIES = (
    '"does does"',
    '"does it"',
    '"it work does"',
    '"any does"',
    '"cafe creme"',
    "my.app_config.ts",
    '"does it" NOT "does does"',
    '"work it" OR "any does"',
    '"does it wo"*',
    '"does terminal"',
)
ROWS_DIGEST = "SELECT md5(string_agg(content || coalesce(tool_name, ''), '|' ORDER BY id)) FROM messages"
PAIR_INDEX_VALID = (
    "SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
    "WHERE c.relname = 'idx_messages_word_pairs'"
)


def _hits(url: str) -> dict[str, list[int]]:
    return search_hits(url, QUERIES, limit=ROWS + 1)


def test_upgrade_builds_the_pair_index_and_every_phrase_keeps_its_hits(pg_url: str) -> None:
    migrate_with_rows(pg_url, "0016", FILL)
    assert ROWS > FIRST_WORD_WINDOW  # older slices are looked up in the index
    before = _hits(pg_url)
    assert len(before['"does does"']) == ROWS // 5
    assert len(before['"does it"']) == 2 * ROWS // 5
    assert len(before['"cafe creme"']) == ROWS // 5
    # Content ending in "does" (i % 5 in 3, 4), then the tool name.
    assert before['"does terminal"'] == [i for i in range(1, ROWS + 1) if i % 5 in (3, 4) and i % 7 == 0]
    result = alembic(pg_url, "upgrade", "0017")
    assert result.returncode == 0, result.stderr
    assert scalar(pg_url, PAIR_INDEX_VALID) is True
    assert _hits(pg_url) == before

    assert alembic(pg_url, "upgrade", "head").returncode == 0  # this release serves from 0019
    db = SessionDB(url=pg_url)
    try:
        db.create_session("later", "cli")
        written = db.append_message("later", "user", "then any does it")
        assert written in {int(hit["id"]) for hit in db.search_messages('"any does it"', limit=ROWS)}
    finally:
        db.close()


def test_downgrade_removes_the_index_and_the_function_keeping_rows_and_hits(pg_url: str) -> None:
    migrate_with_rows(pg_url, "0016", FILL)
    at_0016 = catalog(pg_url)
    digest = scalar(pg_url, ROWS_DIGEST)
    assert alembic(pg_url, "upgrade", "0017").returncode == 0
    hits = _hits(pg_url)
    result = alembic(pg_url, "downgrade", "0016")
    assert result.returncode == 0, result.stderr
    assert catalog(pg_url) == at_0016
    assert scalar(pg_url, ROWS_DIGEST) == digest
    assert scalar(pg_url, PAIR_INDEX_VALID) is None
    assert scalar(pg_url, "SELECT count(*) FROM pg_proc WHERE proname = 'hermes_word_pairs'") == 0
    assert _hits(pg_url) == hits
