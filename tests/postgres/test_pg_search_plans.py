"""Every search kind on PostgreSQL is served by an index, never a sequential scan of ``messages``.

A store of 30,000 messages is loaded in one ``INSERT … SELECT generate_series`` into a
schema at head (the search-vector trigger fills each row's vector), then ``ANALYZE``d:
big enough that the planner weighs indexes against scans. (Upgrading a loaded 0011 store
instead took three times as long per xdist worker; upgrades over rows are the migration
tests' job.) Each
search records the statements it sends; each statement is run again under
``EXPLAIN (FORMAT JSON)`` with the same parameters, and its plan must not hold a
``Seq Scan`` on ``messages``. The searches also have to return the rows planted for
them, so an index that silently found nothing would fail too.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from pg_server import SharedDatabase

from hermes_store import SessionDB, create_engine, upgrade

MESSAGES = 30_000
SESSIONS = 1_500

LOAD = (
    f"""INSERT INTO sessions (id, source, started_at, message_count, tool_call_count,
        input_tokens, output_tokens)
    SELECT 's' || g, (ARRAY['cli', 'telegram', 'discord', 'slack', 'tui'])[1 + g % 5],
           1.7e9 + g, 0, 0, 0, 0
    FROM generate_series(0, {SESSIONS - 1}) AS g""",
    # Latin prose of pseudo-words; every tenth message CJK prose from U+4E00–U+4F8F (which
    # holds none of the planted CJK terms); a few planted words and terms.
    f"""INSERT INTO messages (session_id, role, content, timestamp, tool_name)
    SELECT 's' || (g % {SESSIONS}),
           (ARRAY['user', 'assistant', 'tool', 'assistant'])[1 + g % 4],
           CASE WHEN g % 10 = 0
                THEN (SELECT string_agg(chr(19968 + ((g * 31 + k * 17) % 400)), '')
                      FROM generate_series(1, 30) AS k)
                ELSE (SELECT string_agg('w' || ((g * 7 + k * 13) % 5000), ' ')
                      FROM generate_series(1, 25) AS k)
           END
           || CASE WHEN g % 997 = 0 THEN ' zebrafinch 数据库服务器 记忆' ELSE '' END
           || CASE WHEN g % 1499 = 0 THEN ' quokka deploys fast' ELSE '' END,
           1.7e9 + g,
           CASE WHEN g % 4 = 2 THEN 'terminal' END
    FROM generate_series(1, {MESSAGES}) AS g""",
    "ANALYZE sessions",
)

ZEBRA = MESSAGES // 997  # messages holding ' zebrafinch 数据库服务器 记忆'
QUOKKA = MESSAGES // 1499
WORD_INDEX = "idx_messages_search_vector_bucket"  # revision 0018: words keyed by id bucket too


def _load(url: str) -> None:
    upgrade(url)
    engine = create_engine(url)
    with engine.begin() as connection:
        for statement in LOAD:
            connection.execute(sa.text(statement))
    # As autovacuum leaves a store that grew: GIN keeps its entry counts, which the
    # planner reads, in its metapage, and only VACUUM refreshes them. Counted when the
    # indexes were built on an empty table, they make the two-column indexes of
    # revision 0018 look a hundred times costlier than they are.
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
        connection.execute(sa.text("VACUUM ANALYZE messages"))
    engine.dispose()


# Built once per test run (about 13 s) and shared by the xdist workers, which only read it:
# xdist spreads this module's tests over workers, and a fixture of a worker's own would be
# built in each of them.
@pytest.fixture(scope="session")
def big_store(shared_pg_database: SharedDatabase) -> Iterator[SessionDB]:
    db = SessionDB(url=shared_pg_database("plans", _load))
    yield db
    db.close()


class Recorder:
    """Collects the statements and parameters a SessionDB call sends."""

    def __init__(self, engine: sa.Engine) -> None:
        self.engine = engine
        self.statements: list[tuple[str, Any]] = []
        sa.event.listen(engine, "before_cursor_execute", self._record)

    def _record(self, _conn: Any, _cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        if statement.lstrip().upper().startswith(("SELECT", "WITH")) and "messages" in statement:
            self.statements.append((statement, parameters))

    def close(self) -> None:
        sa.event.remove(self.engine, "before_cursor_execute", self._record)


def _plan_nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", []):
        yield from _plan_nodes(child)


def explain_all(db: SessionDB, call: Any) -> tuple[Any, list[list[dict[str, Any]]]]:
    """Run ``call()``; return its result and the plan nodes of every statement it sent."""
    recorder = Recorder(db.engine)
    try:
        result = call()
    finally:
        recorder.close()
    plans = []
    raw = db.engine.raw_connection()
    try:
        cursor = raw.cursor()
        for statement, parameters in recorder.statements:
            cursor.execute("EXPLAIN (FORMAT JSON) " + statement, parameters)
            document = cursor.fetchone()[0]
            plans.append(list(_plan_nodes(document[0]["Plan"])))
        raw.rollback()
    finally:
        raw.close()
    return result, plans


def index_conditions(plans: list[list[dict[str, Any]]]) -> str:
    """Every index and recheck condition of the plans, as one text."""
    return " ".join(
        str(node.get(key, "")) for nodes in plans for node in nodes for key in ("Index Cond", "Recheck Cond")
    )


def assert_no_message_scan(plans: list[list[dict[str, Any]]], *indexes: str) -> None:
    """No plan scans ``messages`` sequentially; every named index appears in some plan.

    ``"a|b"`` names alternatives: one of them must appear.
    """
    assert plans, "the call sent no SELECT on messages"
    used: set[str] = set()
    for nodes in plans:
        for node in nodes:
            if node.get("Relation Name") == "messages":
                assert node["Node Type"] != "Seq Scan", f"sequential scan of messages: {nodes}"
            if "Index Name" in node:
                used.add(node["Index Name"])
    missing = [wanted for wanted in indexes if not used & set(wanted.split("|"))]
    assert not missing, f"indexes {missing} unused; used {used}"


@pytest.mark.parametrize(
    ("query", "hits", "index"),
    [
        ("zebrafinch", ZEBRA, WORD_INDEX),
        ("quokka deploys", QUOKKA, WORD_INDEX),
        ('"deploys fast"', QUOKKA, "idx_messages_word_pairs_bucket"),  # a phrase: its adjacent pairs
        ("zebra*", ZEBRA, WORD_INDEX),
        ("zebrafinch OR quokka", ZEBRA + QUOKKA - MESSAGES // (997 * 1499), WORD_INDEX),
        ("zebrafinch NOT quokka", ZEBRA, WORD_INDEX),
        ("数据库", ZEBRA, "idx_messages_trgm"),  # 3-character CJK: trigram
        ("记忆", ZEBRA, "idx_messages_cjk_grams_bucket"),  # 2-character CJK: too short for trigrams
        ("忆", ZEBRA, "idx_messages_cjk_grams_bucket"),  # 1 character
        # several terms, one short: either index narrows enough; the planner picks
        ("服务器 记忆", ZEBRA, "idx_messages_trgm|idx_messages_cjk_grams_bucket"),
    ],
)
def test_search_kind_uses_an_index(big_store: SessionDB, query: str, hits: int, index: str) -> None:
    results, plans = explain_all(big_store, lambda: big_store.search_messages(query, limit=200))
    assert len(results) == hits
    assert_no_message_scan(plans, index, "idx_messages_session_id")  # the latter: context lookup
    assert all(len(hit["context"]) >= 1 for hit in results)


@pytest.mark.parametrize("query", ["zebrafinch", "记忆", "数据库"])
def test_source_and_role_filters_keep_the_index(big_store: SessionDB, query: str) -> None:
    everything = big_store.search_messages(query, limit=200)
    results, plans = explain_all(
        big_store,
        lambda: big_store.search_messages(query, source_filter=["telegram"], role_filter=["user"], limit=200),
    )
    expected = {h["id"] for h in everything if h["source"] == "telegram" and h["role"] == "user"}
    assert {h["id"] for h in results} == expected
    assert_no_message_scan(plans)
    excluded, plans = explain_all(
        big_store, lambda: big_store.search_messages(query, exclude_sources=["cli", "tui"], limit=200)
    )
    assert {h["id"] for h in excluded} == {h["id"] for h in everything if h["source"] not in ("cli", "tui")}
    assert_no_message_scan(plans)


def test_ranking_and_snippets_read_the_stored_vector(big_store: SessionDB) -> None:
    """Matching and ranking use ``search_vector``; ``ts_headline`` runs for the page only."""
    recorder = Recorder(big_store.engine)
    try:
        page = big_store.search_messages("zebrafinch", limit=5)
    finally:
        recorder.close()
    assert len(page) == 5 and all(">>>zebrafinch<<<" in hit["snippet"] for hit in page)
    statements = [sql for sql, _ in recorder.statements]
    ranked = [sql for sql in statements if "ts_rank" in sql]
    headline = [sql for sql in statements if "ts_headline" in sql]
    # The newest window's vectors are checked one by one (COALESCE: no index serves it).
    assert ranked and all("ts_rank(m.search_vector" in sql for sql in ranked)
    assert "COALESCE(m.search_vector, ''::tsvector) @@" in ranked[0]
    assert all("m.search_vector @@" in sql for sql in ranked[1:])
    assert all("to_tsvector" not in sql for sql in statements)
    assert all("LIMIT" in sql and "m.id > " in sql for sql in ranked)  # a bounded window of ids
    # Headlines run once, for the page's ids only, after ranking.
    assert len(headline) == 1 and "ANY(" in headline[0] and "ts_rank" not in headline[0]
    assert statements.index(headline[0]) > statements.index(ranked[-1])


def test_upgrade_kept_every_row_and_filled_the_stored_vector(big_store: SessionDB) -> None:
    with big_store.engine.connect() as connection:
        counts = connection.exec_driver_sql(
            "SELECT count(*), count(*) FILTER (WHERE search_vector = to_tsvector('simple', "
            "COALESCE(content, '') || ' ' || COALESCE(tool_name, '') || ' ' || COALESCE(tool_calls, ''))) "
            "FROM messages"
        ).one()
    assert tuple(counts) == (MESSAGES, MESSAGES)


@pytest.mark.parametrize("query", ["zebrafinch", "记忆", "zebrafinch 记忆"])
def test_a_search_raises_work_mem_for_its_own_transaction_only(big_store: SessionDB, query: str) -> None:
    """Exact bitmaps need more than the default 4 MB at scale (``SEARCH_WORK_MEM``); the
    setting must end with the search's transaction, never stay on a pooled connection."""
    from hermes_store.search.postgres.statements import SEARCH_WORK_MEM

    seen: list[str] = []
    searched_on: list[Any] = []

    def record(conn: Any, _cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        if "set_config('work_mem'" in statement:
            seen.append(conn.exec_driver_sql("SHOW work_mem").scalar())
            searched_on.append(conn.connection.dbapi_connection)

    sa.event.listen(big_store.engine, "after_cursor_execute", record)
    try:
        assert big_store.search_messages(query, limit=5)
    finally:
        sa.event.remove(big_store.engine, "after_cursor_execute", record)
    assert seen == [SEARCH_WORK_MEM]
    # Every pooled connection, the one the search ran on among them, is back to the default.
    held = [big_store.engine.connect() for _ in range(big_store.engine.pool.checkedin())]
    try:
        assert searched_on[0] in [connection.connection.dbapi_connection for connection in held]
        assert all(c.exec_driver_sql("SHOW work_mem").scalar() != SEARCH_WORK_MEM for c in held)
    finally:
        for connection in held:
            connection.close()


@pytest.mark.parametrize("query", ["记忆", "zebrafinch 记忆", "w17 忆"])
def test_gram_conditions_read_the_stored_grams_not_the_function(big_store: SessionDB, query: str) -> None:
    """From revision 0015 a gram condition reads ``messages.cjk_grams``: a recheck (which
    ``pg_trgm``'s lossy matches force on every candidate) then reads an array instead of
    running ``hermes_cjk_grams`` over the text again."""
    results, plans = explain_all(big_store, lambda: big_store.search_messages(query, limit=200))
    assert results
    conditions = [
        str(node.get(key, ""))
        for nodes in plans
        for node in nodes
        for key in ("Recheck Cond", "Filter", "Index Cond")
    ]
    assert any("cjk_grams @>" in condition for condition in conditions), conditions
    assert not any("hermes_cjk_grams" in condition for condition in conditions), conditions


def test_stored_grams_are_the_gram_function_of_every_message(big_store: SessionDB) -> None:
    with big_store.engine.connect() as connection:
        wrong, with_grams = connection.exec_driver_sql(
            "SELECT count(*) FILTER (WHERE cjk_grams IS DISTINCT FROM NULLIF(hermes_search_grams("
            "COALESCE(content, '') || ' ' || COALESCE(tool_name, '') || ' ' || COALESCE(tool_calls, '')), "
            "'{}'::text[])), count(cjk_grams) FROM messages"
        ).one()
    # CJK text: every tenth message, and those carrying the planted terms.
    holding_cjk = {g for g in range(1, MESSAGES + 1) if g % 10 == 0 or g % 997 == 0}
    assert (wrong, with_grams) == (0, len(holding_cjk))


@pytest.mark.parametrize("query", ["zebrafinch 记忆", "ZEBRA 记忆", "finch 忆"])
def test_a_latin_term_beside_a_cjk_term_is_looked_up_in_the_stored_grams(
    big_store: SessionDB, query: str
) -> None:
    """From revision 0016 the Latin term's ASCII trigrams join the gram containment: the
    candidates come from the CJK messages' grams alone, never from ``pg_trgm``'s index of
    every message, and the hits are the ones the text holds."""
    results, plans = explain_all(big_store, lambda: big_store.search_messages(query, limit=200))
    latin, cjk = query.split()
    assert len(results) == ZEBRA
    assert all(latin.lower() in hit["snippet"].lower() and cjk in hit["snippet"] for hit in results)
    assert_no_message_scan(plans, "idx_messages_cjk_grams_bucket")
    used = {node.get("Index Name") for nodes in plans for node in nodes}
    assert "idx_messages_trgm" not in used, used
    conditions = index_conditions(plans)
    assert "cjk_grams @>" in conditions


@pytest.mark.parametrize("query", ['"deploys fast"', '"quokka deploys fast"', '"quokka deploys fa"*'])
def test_a_phrase_is_looked_up_in_the_word_pair_index(big_store: SessionDB, query: str) -> None:
    """From revision 0017 a phrase's older slices find their candidates by its adjacent word
    pairs (``hermes_word_pairs``), not by its words' posting lists, and only check the
    stored vector on them; a phrase ending in a prefix uses the pairs before it."""
    results, plans = explain_all(big_store, lambda: big_store.search_messages(query, limit=200))
    assert len(results) == QUOKKA
    assert_no_message_scan(plans, "idx_messages_word_pairs_bucket")
    used = {node.get("Index Name") for nodes in plans for node in nodes}
    assert WORD_INDEX not in used, used
    conditions = index_conditions(plans)
    assert "hermes_word_pairs(search_vector) @>" in conditions
