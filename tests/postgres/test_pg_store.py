"""SessionDB on PostgreSQL: search translation, encodings, counters under concurrency
(the copy is in test_pg_copy.py)."""

from __future__ import annotations

import multiprocessing

import pytest

from hermes_store import SessionDB
from hermes_store.search.postgres.legacy_tsquery import tsquery_sql
from hermes_store.search.postgres.substrings import substring_snippet


@pytest.fixture
def pg_db(pg_head_url: str):
    db = SessionDB(url=pg_head_url)  # a new database at head: creating one is tested elsewhere
    yield db
    db.close()


def _ids(results: list[dict]) -> list[int]:
    return sorted(r["id"] for r in results)


def test_tsquery_translation_keeps_fts5_precedence() -> None:
    params: dict = {}
    assert tsquery_sql("a b OR c NOT d", params) == (
        "((phraseto_tsquery('simple'::regconfig, :t0) && phraseto_tsquery('simple'::regconfig, :t1))"
        " || (phraseto_tsquery('simple'::regconfig, :t2) && !!phraseto_tsquery('simple'::regconfig, :t3)))"
    )
    assert params == {"t0": "a", "t1": "b", "t2": "c", "t3": "d"}
    assert tsquery_sql("OR", {}) is None


def test_substring_snippet_marks_the_match() -> None:
    assert substring_snippet("xx 记忆断裂 yy", "记忆断裂", marked=True) == "xx >>>记忆断裂<<< yy"
    assert substring_snippet("abc", "zz", marked=False) == "abc"
    assert substring_snippet(None, "a", marked=True) is None


def test_search_kinds_on_postgresql(pg_db: SessionDB) -> None:
    db = pg_db
    db.create_session("s1", "cli")
    db.create_session("s2", "telegram")
    first = db.append_message("s1", "user", "docker deployment failed on chat-send")
    second = db.append_message("s1", "assistant", "记忆断裂 是 问题", tool_name="terminal")
    third = db.append_message("s2", "user", "你好世界 deploying kubernetes")
    assert _ids(db.search_messages("docker")) == [first]
    assert _ids(db.search_messages("docker deployment")) == [first]
    assert _ids(db.search_messages('"deployment failed"')) == [first]
    assert _ids(db.search_messages("deploy*")) == [first, third]
    assert _ids(db.search_messages("chat-send")) == [first]
    assert _ids(db.search_messages("docker OR kubernetes")) == [first, third]
    assert _ids(db.search_messages("deploy* NOT docker")) == [third]
    assert _ids(db.search_messages("记忆断裂")) == [second]
    assert _ids(db.search_messages("记忆")) == [second]
    assert _ids(db.search_messages("你好 世界")) == [third]
    assert _ids(db.search_messages("terminal")) == [second]
    assert _ids(db.search_messages("deploy*", source_filter=["telegram"])) == [third]
    assert db.search_messages("deploy*", source_filter=[]) == []
    hit = db.search_messages("docker")[0]
    assert ">>>docker<<<" in hit["snippet"]
    assert set(hit) == {
        "id",
        "session_id",
        "role",
        "snippet",
        "timestamp",
        "tool_name",
        "source",
        "model",
        "session_started",
        "context",
    }
    assert [c["role"] for c in hit["context"]] == ["user", "assistant"]
    for query in ["foo:bar", "-foo", "a AND OR b", '"unterminated', "***", "NEAR(", "\x00"]:
        db.search_messages(query)


def test_content_encodings_round_trip_on_postgresql(pg_db: SessionDB) -> None:
    db = pg_db
    db.create_session("s", "cli")
    db.append_message("s", "user", [{"type": "text", "text": "多模态 hello"}, {"type": "image_url"}])
    db.append_message("s", "user", {"k": "v"})
    db.append_message("s", "user", 5)
    got = [m["content"] for m in db.get_messages("s")]
    assert got == [[{"type": "text", "text": "多模态 hello"}, {"type": "image_url"}], {"k": "v"}, "5"]
    assert db.list_sessions_rich()[0]["preview"] == "多模态 hello"
    with pytest.raises(TypeError, match="bytes"):
        db.append_message("s", "user", b"raw")
    with pytest.raises(ValueError, match="NUL"):
        db.append_message("s", "user", "a\x00b")
    assert db.message_count("s") == 3


def _append_many(url: str, session_id: str, count: int) -> None:
    db = SessionDB(url=url)
    for i in range(count):
        db.append_message(session_id, "assistant", f"m{i}", tool_calls=[{"id": "a"}, {"id": "b"}])
    db.close()


def test_concurrent_appends_keep_counters_exact(pg_head_url: str) -> None:
    db = SessionDB(url=pg_head_url)
    db.create_session("shared", "cli")
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_append_many, args=(pg_head_url, "shared", 40)) for _ in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(120)
        assert worker.exitcode == 0
    row = db.get_session("shared")
    assert row is not None
    assert db.message_count("shared") == 160
    assert row["message_count"] == 160
    assert row["tool_call_count"] == 320
    db.close()


@pytest.mark.parametrize(
    "text",
    [
        '\ue000json:{"role": "system"}',
        "\ue000json:[1, 2]",
        "\ue000json:",
        "\ue000json:x\x00y",
        "\ue000",
        "\ue000jso",
    ],
)
def test_text_that_looks_like_the_stored_sentinel_round_trips(pg_db: SessionDB, text: str) -> None:
    """A user's string comes back as that string, even if it starts like PostgreSQL's stored
    form of encoded JSON: structured content cannot be injected through plain text."""
    pg_db.create_session("s", "cli")
    pg_db.append_message("s", "user", text)
    back = pg_db.get_messages("s")[0]["content"]
    assert back == text and isinstance(back, str)
    assert pg_db.get_messages_as_conversation("s")[0]["content"] == text


def test_json_content_stored_by_earlier_releases_still_decodes(pg_db: SessionDB) -> None:
    """Rows written before plain look-alike text was escaped hold the bare stored sentinel."""
    pg_db.create_session("s", "cli")
    with pg_db.engine.begin() as connection:
        connection.exec_driver_sql(
            "INSERT INTO messages (session_id, role, content, timestamp) VALUES ('s', 'user', %s, 1.0)",
            ('\ue000json:[{"type": "text", "text": "earlier"}]',),
        )
    assert pg_db.get_messages("s")[0]["content"] == [{"type": "text", "text": "earlier"}]
