"""search_messages at schema 17: ``sort`` by message time, hiding rewound messages, and the
sanitiser's newer rules (``:`` stripped, input cut to 2,048 characters), on every search
path and both backends."""

from __future__ import annotations

import time

import pytest

from hermes_store import SessionDB
from hermes_store.search.sanitize import MAX_FTS5_QUERY_CHARS

# Every message below holds all of these, so each query finds each of them.
TEXT = "kestrel nest 记忆断裂 note"

# One query per search path: word, phrase, prefix, CJK narrowed by trigrams, CJK of short
# terms only (checked message by message).
PATHS = {
    "word": "kestrel",
    "phrase": '"kestrel nest"',
    "prefix": "kestr*",
    "cjk_trigram": "记忆断裂",
    "cjk_short": "记忆",
}


def hit_ids(hits: list[dict]) -> list[int]:
    return [hit["id"] for hit in hits]


@pytest.fixture
def shuffled_times(db: SessionDB, raw) -> dict[str, int]:
    """Three matching messages whose timestamps do not follow their ids, and one that does
    not match: ``{"early", "middle", "late"}`` to message ids."""
    db.create_session("s", "cli")
    middle = db.append_message("s", "user", f"{TEXT} one")
    early = db.append_message("s", "assistant", f"{TEXT} two")
    db.append_message("s", "user", "unrelated words only")
    late = db.append_message("s", "assistant", f"{TEXT} three")
    raw.set_message_time(middle, 2000.0)
    raw.set_message_time(early, 1000.0)
    raw.set_message_time(late, 3000.0)
    return {"early": early, "middle": middle, "late": late}


@pytest.mark.parametrize("query", PATHS.values(), ids=PATHS.keys())
def test_newest_orders_by_timestamp_descending(db, shuffled_times, query):
    hits = db.search_messages(query, sort="newest")

    assert hit_ids(hits) == [shuffled_times[k] for k in ("late", "middle", "early")]
    assert [hit["timestamp"] for hit in hits] == [3000.0, 2000.0, 1000.0]


@pytest.mark.parametrize("query", PATHS.values(), ids=PATHS.keys())
def test_oldest_orders_by_timestamp_ascending(db, shuffled_times, query):
    hits = db.search_messages(query, sort="oldest")

    assert hit_ids(hits) == [shuffled_times[k] for k in ("early", "middle", "late")]


@pytest.mark.parametrize("query", PATHS.values(), ids=PATHS.keys())
def test_time_order_pages_with_limit_and_offset(db, shuffled_times, query):
    pages = [db.search_messages(query, sort="oldest", limit=1, offset=n) for n in range(4)]

    assert [hit_ids(page) for page in pages] == [
        [shuffled_times["early"]],
        [shuffled_times["middle"]],
        [shuffled_times["late"]],
        [],
    ]


@pytest.mark.parametrize("query", PATHS.values(), ids=PATHS.keys())
def test_time_order_applies_filters_first(db, shuffled_times, query):
    hits = db.search_messages(query, sort="newest", role_filter=["assistant"])

    assert hit_ids(hits) == [shuffled_times["late"], shuffled_times["early"]]


@pytest.mark.parametrize("query", PATHS.values(), ids=PATHS.keys())
@pytest.mark.parametrize("sort", ["newest", "oldest"])
def test_time_order_gives_each_hit_its_snippet(db, shuffled_times, query, sort):
    by_relevance = {hit["id"]: hit["snippet"] for hit in db.search_messages(query)}
    by_time = db.search_messages(query, sort=sort)

    assert {hit["id"]: hit["snippet"] for hit in by_time} == by_relevance
    assert all(hit["snippet"] for hit in by_time)


@pytest.mark.parametrize(
    ("sort", "first"),
    [
        ("NEWEST", "late"),
        (" newest ", "late"),
        ("Newest\n", "late"),
        ("OLDEST", "early"),
        ("\toldest", "early"),
    ],
)
def test_sort_is_read_case_insensitively_and_trimmed(db, shuffled_times, sort, first):
    hits = db.search_messages(PATHS["cjk_short"], sort=sort)

    assert hit_ids(hits)[0] == shuffled_times[first]


@pytest.mark.parametrize("sort", [None, "", "relevance", "new", "newest-first", 5, ["newest"]])
def test_any_other_sort_keeps_relevance_order(db, shuffled_times, sort):
    """Substring hits by relevance are newest id first, whatever the timestamps."""
    hits = db.search_messages(PATHS["cjk_short"], sort=sort)

    assert hit_ids(hits) == sorted(shuffled_times.values(), reverse=True)


def test_equal_timestamps_fall_back_to_relevance_on_words(db, raw):
    db.create_session("s", "cli")
    weak = db.append_message("s", "user", "kestrel " + " ".join(f"filler{n}" for n in range(40)))
    strong = db.append_message("s", "user", "kestrel kestrel kestrel")
    for message_id in (weak, strong):
        raw.set_message_time(message_id, 500.0)

    assert hit_ids(db.search_messages("kestrel")) == [strong, weak]
    assert hit_ids(db.search_messages("kestrel", sort="newest")) == [strong, weak]
    assert hit_ids(db.search_messages("kestrel", sort="oldest")) == [strong, weak]


@pytest.mark.parametrize("query", ["记忆断裂", "记忆"], ids=["cjk_trigram", "cjk_short"])
def test_equal_timestamps_fall_back_to_newest_id_on_substrings(db, raw, query):
    db.create_session("s", "cli")
    first = db.append_message("s", "user", TEXT)
    second = db.append_message("s", "user", TEXT)
    for message_id in (first, second):
        raw.set_message_time(message_id, 500.0)

    assert hit_ids(db.search_messages(query, sort="newest")) == [second, first]
    assert hit_ids(db.search_messages(query, sort="oldest")) == [second, first]


# --- rewound and archived messages -------------------------------------------------------------

# (active, compacted) of each message, by what it means.
STATES = {"live": (1, 0), "archived": (0, 1), "rewound": (0, 0), "restored": (1, 1)}


@pytest.fixture
def every_state(db: SessionDB, raw) -> dict[str, int]:
    """One matching message in each state, set by a plain UPDATE of the two flags."""
    db.create_session("s", "cli")
    ids = {}
    for name, (active, compacted) in STATES.items():
        ids[name] = db.append_message("s", "user", f"{TEXT} {name}")
        raw.execute(
            "UPDATE messages SET active = ?, compacted = ? WHERE id = ?", (active, compacted, ids[name])
        )
    return ids


@pytest.mark.parametrize("query", PATHS.values(), ids=PATHS.keys())
@pytest.mark.parametrize("sort", [None, "newest", "oldest"])
def test_rewound_messages_are_hidden_by_default(db, every_state, query, sort):
    found = set(hit_ids(db.search_messages(query, sort=sort)))

    assert found == {every_state["live"], every_state["archived"], every_state["restored"]}


@pytest.mark.parametrize("query", PATHS.values(), ids=PATHS.keys())
@pytest.mark.parametrize("sort", [None, "newest"])
def test_include_inactive_finds_every_message(db, every_state, query, sort):
    found = set(hit_ids(db.search_messages(query, sort=sort, include_inactive=True)))

    assert found == set(every_state.values())


@pytest.mark.parametrize("query", PATHS.values(), ids=PATHS.keys())
def test_hidden_messages_do_not_take_places_on_the_page(db, every_state, query):
    """The filter applies before ``limit``: a page of three holds the three visible hits."""
    hits = db.search_messages(query, limit=3)

    assert len(hits) == 3
    assert every_state["rewound"] not in hit_ids(hits)


def test_rewound_message_is_still_context_of_a_hit(db, raw):
    """Only hits are filtered; the messages around a hit are shown as stored."""
    db.create_session("s", "cli")
    before = db.append_message("s", "user", "kestrel question")
    hit = db.append_message("s", "assistant", "the answer is pelican")
    raw.execute("UPDATE messages SET active = 0, compacted = 0 WHERE id = ?", (before,))

    (found,) = db.search_messages("pelican")

    assert found["id"] == hit
    assert [entry["content"] for entry in found["context"]] == ["kestrel question", "the answer is pelican"]
    assert db.search_messages("kestrel") == []


def test_include_inactive_combines_with_filters(db, raw):
    db.create_session("c", "cli")
    db.create_session("t", "telegram")
    cli = db.append_message("c", "user", "kestrel from cli")
    telegram = db.append_message("t", "user", "kestrel from telegram")
    for message_id in (cli, telegram):
        raw.execute("UPDATE messages SET active = 0, compacted = 0 WHERE id = ?", (message_id,))

    assert db.search_messages("kestrel", source_filter=["telegram"]) == []
    assert hit_ids(db.search_messages("kestrel", source_filter=["telegram"], include_inactive=True)) == [
        telegram
    ]
    assert hit_ids(db.search_messages("kestrel", exclude_sources=["telegram"], include_inactive=True)) == [
        cli
    ]


# --- the sanitiser's newer rules -----------------------------------------------------------------


def test_colon_query_finds_the_words(db):
    db.create_session("s", "cli")
    target = db.append_message("s", "user", "TODO fix the deployment script")
    db.append_message("s", "user", "TODO later")

    assert hit_ids(db.search_messages("TODO: fix")) == [target]
    assert hit_ids(db.search_messages("error:timeout")) == []


def test_colon_between_words_means_both_words(db):
    db.create_session("s", "cli")
    apart = db.append_message("s", "user", "bar first, then foo")
    together = db.append_message("s", "user", "set foo:bar in the config")
    db.append_message("s", "user", "only foo here")

    assert set(hit_ids(db.search_messages("foo:bar"))) == {apart, together}


def test_colon_separates_substring_terms(db):
    db.create_session("s", "cli")
    target = db.append_message("s", "user", "TODO 修复 the parser")
    db.append_message("s", "user", "TODO later")
    quoted = db.append_message("s", "user", "see 部署:docker here")

    assert hit_ids(db.search_messages("TODO: 修复")) == [target]
    assert hit_ids(db.search_messages("修复:TODO")) == [target]
    # Inside a quoted phrase the colon is part of the text to find.
    assert hit_ids(db.search_messages('"部署:docker"')) == [quoted]


def test_query_is_cut_to_its_first_2048_characters(db):
    db.create_session("s", "cli")
    alone = db.append_message("s", "user", "kestrel")
    beside = db.append_message("s", "user", "kestrel pelican")
    padding = " " * (MAX_FTS5_QUERY_CHARS - len("kestrel "))

    # Past the cut, "pelican" is not part of the query; before it, it is.
    assert set(hit_ids(db.search_messages("kestrel " + padding + "pelican"))) == {alone, beside}
    assert hit_ids(db.search_messages("kestrel pelican" + padding)) == [beside]


@pytest.mark.parametrize(
    "query",
    ['"' * 50_000 + " bounded" * 10_000, "bounded" * 2000, "记忆 " + "x" * 10_000],
    ids=["quotes", "words", "cjk"],
)
def test_very_long_queries_are_answered_quickly(db, query):
    db.create_session("s", "cli")
    db.append_message("s", "user", "bounded sanitizer target")

    started = time.perf_counter()
    hits = db.search_messages(query)

    assert isinstance(hits, list)
    assert time.perf_counter() - started < 1.0
