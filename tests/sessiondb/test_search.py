"""search_messages: the query sanitiser, routing (word / trigram / LIKE), filters, result shape,
context, and the health of both FTS5 indexes."""

from __future__ import annotations

import json
import sqlite3

import pytest
from support import UPSTREAM_SANITIZER_ROWS

from hermes_store import SessionDB

HIT_KEYS = {
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


def hit_ids(hits):
    return [hit["id"] for hit in hits]


# --- the sanitiser, upstream's example table ---------------------------------------------------

SANITIZER_TABLE = UPSTREAM_SANITIZER_ROWS


@pytest.mark.parametrize(("query", "expected"), SANITIZER_TABLE)
def test_sanitizer_keeps_upstream_output(query, expected):
    assert SessionDB._sanitize_fts5_query(query) == expected


# Inputs whose upstream output FTS5 rejects (so upstream silently returned []): we
# neutralise them so that a message containing the words is found. The first four
# are the classic ones; "a-b-" and "user_id=5" are further rows of the same table whose
# upstream outputs ('"a-b"-', '"user_id"=5') are FTS5 syntax errors too.
REPAIRED_QUERIES = [
    ("foo:bar", "please set foo:bar in the config"),
    ("-foo", "pass the -foo flag"),
    ("hello - world", "hello - world, said the program"),
    ("a AND OR b", "plan a and plan b"),
    ("a-b-", "the a-b- prefix"),
    ("user_id=5", "select where user_id=5;"),
]


@pytest.mark.parametrize(("query", "content"), REPAIRED_QUERIES)
def test_repaired_queries_find_the_message(db, query, content):
    db.create_session("s", "cli")
    db.append_message("s", "user", "an unrelated line")
    target = db.append_message("s", "user", content)
    assert hit_ids(db.search_messages(query)) == [target]


@pytest.mark.parametrize("query", [q for q, _ in SANITIZER_TABLE] + [q for q, _ in REPAIRED_QUERIES])
def test_sanitised_output_is_accepted_by_fts5(query):
    sanitised = SessionDB._sanitize_fts5_query(query)
    conn = sqlite3.connect(":memory:")
    try:
        conn.execute("CREATE VIRTUAL TABLE probe USING fts5(content)")
        if sanitised:
            conn.execute("SELECT rowid FROM probe WHERE probe MATCH ?", (sanitised,)).fetchall()
    finally:
        conn.close()


# --- a shared corpus ---------------------------------------------------------------------------


@pytest.fixture
def corpus(db, make_session, raw):
    """Messages in three sessions/sources; returns {name: message id}."""
    make_session("cli-1", started=1000.0, source="cli", model="model-c")
    make_session("tg-1", started=2000.0, source="telegram", model="model-t")
    make_session("dc-1", started=3000.0, source="discord")
    ids = {
        "deploy_user": db.append_message("cli-1", "user", "How do I fix the deployment pipeline?"),
        "deploy_asst": db.append_message(
            "cli-1", "assistant", "Restart the deployment with kubectl rollout."
        ),
        "cjk_user": db.append_message("tg-1", "user", "我们讨论记忆断裂问题的解决办法"),
        "cjk_asst": db.append_message("tg-1", "assistant", "记忆断裂通常由上下文压缩引起"),
        "deploy_tg": db.append_message("tg-1", "user", "deployment finished on telegram"),
        "deploy_dc": db.append_message("dc-1", "assistant", "discord deployment notes"),
        "short_cjk": db.append_message("dc-1", "user", "断裂了吗"),
    }
    for offset, message_id in enumerate(ids.values()):
        raw.set_message_time(message_id, 5000.0 + offset)
    return ids


# --- routing -------------------------------------------------------------------------------------


def test_word_search(db, corpus):
    hits = db.search_messages("kubectl")
    assert hit_ids(hits) == [corpus["deploy_asst"]]
    assert hits[0]["snippet"].startswith("Restart the deployment with >>>kubectl<<< rollout.")


def test_word_search_is_case_insensitive(db, corpus):
    assert hit_ids(db.search_messages("KUBECTL")) == [corpus["deploy_asst"]]


def test_word_search_finds_all_matches(db, corpus):
    expected = {corpus[k] for k in ("deploy_user", "deploy_asst", "deploy_tg", "deploy_dc")}
    assert set(hit_ids(db.search_messages("deployment"))) == expected


def test_prefix_search(db, corpus):
    assert set(hit_ids(db.search_messages("deploy*"))) == {
        corpus[k] for k in ("deploy_user", "deploy_asst", "deploy_tg", "deploy_dc")
    }


def test_phrase_search(db, corpus):
    assert hit_ids(db.search_messages('"deployment pipeline"')) == [corpus["deploy_user"]]
    assert db.search_messages('"pipeline deployment"') == []


def test_boolean_operators(db, corpus):
    assert set(hit_ids(db.search_messages("kubectl OR telegram"))) == {
        corpus["deploy_asst"],
        corpus["deploy_tg"],
    }
    assert set(hit_ids(db.search_messages("deployment NOT discord NOT telegram"))) == {
        corpus["deploy_user"],
        corpus["deploy_asst"],
    }


def test_latin_substring_is_not_matched(db, corpus):
    assert db.search_messages("ployme") == []


def test_trigram_search_for_three_or_more_cjk_characters(db, corpus):
    hits = db.search_messages("记忆断裂")
    assert set(hit_ids(hits)) == {corpus["cjk_user"], corpus["cjk_asst"]}
    snippets = {hit["id"]: hit["snippet"] for hit in hits}
    assert snippets[corpus["cjk_user"]].startswith("我们讨论>>>记忆断裂<<<问题的解决办法")


def test_trigram_and_of_two_long_terms(db, corpus):
    assert hit_ids(db.search_messages("记忆断裂 上下文压缩")) == [corpus["cjk_asst"]]


def test_trigram_or(db, corpus):
    assert set(hit_ids(db.search_messages("解决办法 OR 压缩引起"))) == {
        corpus["cjk_user"],
        corpus["cjk_asst"],
    }


def test_quoted_cjk_terms_with_or(db, corpus):
    assert set(hit_ids(db.search_messages('"解决办法" OR "压缩引起"'))) == {
        corpus["cjk_user"],
        corpus["cjk_asst"],
    }


def test_like_search_for_short_cjk(db, corpus):
    hits = db.search_messages("断裂")
    # LIKE path: newest first, plain window snippets without markers.
    assert hit_ids(hits) == [corpus["short_cjk"], corpus["cjk_asst"], corpus["cjk_user"]]
    assert [hit["snippet"] for hit in hits] == [
        "断裂了吗",
        "记忆断裂通常由上下文压缩引起",
        "我们讨论记忆断裂问题的解决办法",
    ]


def test_like_snippet_is_a_window_around_the_match(db):
    db.create_session("s", "cli")
    db.append_message("s", "user", "x" * 60 + "断裂" + "y" * 100)
    (hit,) = db.search_messages("断裂")
    assert hit["snippet"] == "x" * 40 + "断裂" + "y" * 78


def test_like_snippet_when_match_is_only_in_tool_fields(db):
    db.create_session("s", "cli")
    with_text = db.append_message("s", "tool", "plain result text", tool_name="查询")
    without_text = db.append_message("s", "tool", None, tool_name="查询")
    hits = {hit["id"]: hit["snippet"] for hit in db.search_messages("查询")}
    assert hits == {with_text: "plain result text", without_text: None}


def test_like_wildcards_in_short_cjk_query_are_literal(db):
    db.create_session("s", "cli")
    literal = db.append_message("s", "user", "折扣50%_优惠")
    db.append_message("s", "user", "折扣50X优惠")
    assert hit_ids(db.search_messages("50%_优")) == [literal]


def test_multi_token_short_cjk_needs_every_token(db):
    db.create_session("s", "cli")
    both = db.append_message("s", "user", "你好，这个世界很大")
    db.append_message("s", "user", "你好朋友")
    db.append_message("s", "user", "世界和平")
    reversed_order = db.append_message("s", "assistant", "世界说你好")
    assert set(hit_ids(db.search_messages("你好 世界"))) == {both, reversed_order}


# --- empty and degenerate queries ----------------------------------------------------------------


@pytest.mark.parametrize("query", ["", "   ", "\n\t", "***", "()", '""', "AND", "OR NOT", "^", "-", ":"])
def test_queries_with_nothing_to_search_return_empty(db, corpus, query):
    assert db.search_messages(query) == []


def test_none_query_returns_empty(db, corpus):
    # Upstream treats any falsy query as empty: search_messages(None) == [].
    assert db.search_messages(None) == []


@pytest.mark.parametrize(
    ("query", "content"),
    [("。。。", "未完待续。。。下回分解"), ("〜", "10〜20個"), ("「」", "空の「」です")],
    ids=["ideographic-full-stops", "wave-dash", "corner-brackets"],
)
def test_cjk_punctuation_only_queries_are_searched_as_cjk(db, query, content):
    # U+3000–U+303F is one of upstream's CJK ranges: such a query goes
    # to the trigram index or the substring scan, which index punctuation too.
    db.create_session("s", "cli")
    db.append_message("s", "user", "plain text without it")
    target = db.append_message("s", "user", content)
    assert hit_ids(db.search_messages(query)) == [target]


def test_search_on_empty_database(db):
    assert db.search_messages("anything") == []
    assert db.search_messages("记忆断裂") == []
    assert db.search_messages("断裂") == []


# --- filters --------------------------------------------------------------------------------------

PATH_QUERIES = {"word": "deployment", "trigram": "记忆断裂", "like": "断裂"}


@pytest.fixture
def per_source(db, make_session):
    """The same three texts in a cli and a telegram session: every path has hits in both."""
    make_session("c", started=1.0, source="cli")
    make_session("t", started=2.0, source="telegram")
    ids = {}
    for sid in ("c", "t"):
        ids[sid] = [
            db.append_message(sid, "user", "deployment 记忆断裂"),
            db.append_message(sid, "assistant", "deployment 记忆断裂 again"),
        ]
    return ids


@pytest.mark.parametrize("path", PATH_QUERIES)
def test_source_filter(db, per_source, path):
    query = PATH_QUERIES[path]
    assert set(hit_ids(db.search_messages(query, source_filter=["cli"]))) == set(per_source["c"])
    assert len(db.search_messages(query, source_filter=["cli", "telegram"])) == 4
    assert db.search_messages(query, source_filter=[]) == []
    assert db.search_messages(query, source_filter=["discord"]) == []


@pytest.mark.parametrize("path", PATH_QUERIES)
def test_exclude_sources(db, per_source, path):
    query = PATH_QUERIES[path]
    assert set(hit_ids(db.search_messages(query, exclude_sources=["cli"]))) == set(per_source["t"])
    assert len(db.search_messages(query, exclude_sources=[])) == 4
    assert db.search_messages(query, source_filter=["cli"], exclude_sources=["cli"]) == []


@pytest.mark.parametrize("path", PATH_QUERIES)
def test_role_filter(db, per_source, path):
    query = PATH_QUERIES[path]
    assert set(hit_ids(db.search_messages(query, role_filter=["assistant"]))) == {
        per_source["c"][1],
        per_source["t"][1],
    }
    assert len(db.search_messages(query, role_filter=["user", "assistant"])) == 4
    assert len(db.search_messages(query, role_filter=[])) == 4
    assert db.search_messages(query, role_filter=["tool"]) == []


@pytest.mark.parametrize("path", PATH_QUERIES)
def test_filters_apply_before_limit_and_offset(db, make_session, path):
    query = PATH_QUERIES[path]
    make_session("noise", started=1.0, source="telegram")
    make_session("wanted", started=2.0, source="cli")
    for index in range(6):
        db.append_message("noise", "user", f"deployment 记忆断裂 noise {index}")
    wanted = [db.append_message("wanted", "user", f"deployment 记忆断裂 wanted {i}") for i in range(3)]
    first_page = db.search_messages(query, source_filter=["cli"], limit=2)
    second_page = db.search_messages(query, source_filter=["cli"], limit=2, offset=2)
    assert len(first_page) == 2
    assert len(second_page) == 1
    assert set(hit_ids(first_page + second_page)) == set(wanted)


@pytest.mark.parametrize("path", PATH_QUERIES)
def test_limit_and_offset_page_through_all_hits(db, make_session, path):
    make_session("s", started=1.0)
    expected = {db.append_message("s", "user", f"deployment 记忆断裂 #{i}") for i in range(25)}
    default_page = db.search_messages(PATH_QUERIES[path])
    assert len(default_page) == 20
    pages = [db.search_messages(PATH_QUERIES[path], limit=10, offset=off) for off in (0, 10, 20, 30)]
    assert [len(page) for page in pages] == [10, 10, 5, 0]
    assert {hit["id"] for page in pages for hit in page} == expected


# --- result shape ---------------------------------------------------------------------------------


@pytest.mark.parametrize("path", PATH_QUERIES)
def test_result_keys_and_values(db, make_session, raw, path):
    make_session("s", started=1234.5, source="slack", model="model-x")
    message_id = db.append_message("s", "assistant", "deployment 记忆断裂", tool_name="runner")
    raw.set_message_time(message_id, 2345.25)
    (hit,) = db.search_messages(PATH_QUERIES[path])
    assert set(hit) == HIT_KEYS
    assert (hit["id"], hit["session_id"], hit["role"], hit["timestamp"], hit["tool_name"]) == (
        message_id,
        "s",
        "assistant",
        2345.25,
        "runner",
    )
    assert (hit["source"], hit["model"], hit["session_started"]) == ("slack", "model-x", 1234.5)
    assert "content" not in hit


@pytest.mark.parametrize("path", ["word", "trigram"])
def test_fts_snippets_mark_the_match(db, make_session, path):
    make_session("s", started=1.0)
    db.append_message("s", "user", "deployment 记忆断裂")
    (hit,) = db.search_messages(PATH_QUERIES[path])
    assert ">>>" in hit["snippet"]
    assert "<<<" in hit["snippet"]


def test_word_snippet_marks_each_term(db, make_session):
    make_session("s", started=1.0)
    db.append_message("s", "user", "alpha beta gamma")
    (hit,) = db.search_messages("alpha gamma")
    assert hit["snippet"].strip() == ">>>alpha<<< beta >>>gamma<<<"


def test_word_ranking_puts_the_best_match_first(db, make_session):
    make_session("s", started=1.0)
    weak = db.append_message("s", "user", "zebra " + "filler " * 60)
    strong = db.append_message("s", "user", "zebra zebra zebra")
    assert hit_ids(db.search_messages("zebra")) == [strong, weak]


# --- what is indexed -------------------------------------------------------------------------------


def test_tool_name_is_searchable(db, make_session):
    make_session("s", started=1.0)
    message_id = db.append_message("s", "tool", None, tool_name="web_search", tool_call_id="c1")
    (hit,) = db.search_messages("web_search")
    assert hit["id"] == message_id
    assert hit["tool_name"] == "web_search"
    assert "web_search" in hit["snippet"]


def test_tool_call_arguments_are_searchable(db, make_session):
    make_session("s", started=1.0)
    call = {
        "id": "c1",
        "type": "function",
        "function": {"name": "shell", "arguments": '{"cmd": "terraform apply"}'},
    }
    message_id = db.append_message("s", "assistant", None, tool_calls=[call])
    assert hit_ids(db.search_messages("terraform")) == [message_id]


@pytest.mark.parametrize("query", ["数据库迁移", "迁移"])
def test_cjk_inside_tool_call_arguments_is_found(db, make_session, query):
    make_session("s", started=1.0)
    arguments = json.dumps({"task": "执行数据库迁移"}, ensure_ascii=False)
    call = {"id": "c1", "type": "function", "function": {"name": "run", "arguments": arguments}}
    message_id = db.append_message("s", "assistant", None, tool_calls=[call])
    assert hit_ids(db.search_messages(query)) == [message_id]


def test_raw_update_reindexes_the_message(db, make_session, raw):
    make_session("s", started=1.0)
    message_id = db.append_message("s", "user", "original wording")
    raw.execute("UPDATE messages SET content = 'rewritten 重写的内容' WHERE id = ?", (message_id,))
    assert db.search_messages("original") == []
    assert hit_ids(db.search_messages("rewritten")) == [message_id]
    assert hit_ids(db.search_messages("重写的内容")) == [message_id]


# --- context ------------------------------------------------------------------------------------


def test_context_of_the_first_message(db, make_session):
    make_session("s", started=1.0)
    db.append_message("s", "user", "needle at start")
    db.append_message("s", "assistant", "reply one")
    db.append_message("s", "user", "later turn")
    (hit,) = db.search_messages("needle")
    assert hit["context"] == [
        {"role": "user", "content": "needle at start"},
        {"role": "assistant", "content": "reply one"},
    ]


def test_context_in_the_middle(db, make_session):
    make_session("s", started=1.0)
    db.append_message("s", "user", "before")
    db.append_message("s", "assistant", "the needle is here")
    db.append_message("s", "user", "after")
    db.append_message("s", "assistant", "much later")
    (hit,) = db.search_messages("needle")
    assert hit["context"] == [
        {"role": "user", "content": "before"},
        {"role": "assistant", "content": "the needle is here"},
        {"role": "user", "content": "after"},
    ]


def test_context_of_the_last_and_only_messages(db, make_session):
    make_session("s", started=1.0)
    make_session("solo", started=2.0)
    db.append_message("s", "user", "question")
    db.append_message("s", "assistant", "final needle")
    db.append_message("solo", "user", "lonely needle")
    hits = {hit["session_id"]: hit["context"] for hit in db.search_messages("needle")}
    assert hits["s"] == [
        {"role": "user", "content": "question"},
        {"role": "assistant", "content": "final needle"},
    ]
    assert hits["solo"] == [{"role": "user", "content": "lonely needle"}]


def test_context_stays_within_the_session(db, make_session):
    make_session("a", started=1.0)
    make_session("b", started=2.0)
    db.append_message("a", "user", "a first")
    db.append_message("b", "user", "b interleaved")
    db.append_message("a", "assistant", "a needle")
    db.append_message("b", "user", "b interleaved again")
    db.append_message("a", "user", "a last")
    (hit,) = db.search_messages("needle")
    assert [entry["content"] for entry in hit["context"]] == ["a first", "a needle", "a last"]


def test_context_follows_insertion_order(db, make_session, raw):
    make_session("s", started=1.0)
    first = db.append_message("s", "user", "earlier")
    middle = db.append_message("s", "assistant", "needle")
    last = db.append_message("s", "user", "later")
    raw.set_message_time(first, 300.0)
    raw.set_message_time(middle, 200.0)
    raw.set_message_time(last, 100.0)
    (hit,) = db.search_messages("needle")
    assert [entry["content"] for entry in hit["context"]] == ["earlier", "needle", "later"]


def test_context_content_is_cut_to_200_characters(db, make_session):
    make_session("s", started=1.0)
    long_before = "b" * 250
    db.append_message("s", "user", long_before)
    db.append_message("s", "assistant", "needle " + "n" * 300)
    db.append_message("s", "user", "記" * 201)
    (hit,) = db.search_messages("needle")
    assert [entry["content"] for entry in hit["context"]] == [
        "b" * 200,
        ("needle " + "n" * 300)[:200],
        "記" * 200,
    ]


def test_context_renders_multimodal_and_non_text_content(db, make_session):
    make_session("s", started=1.0)
    db.append_message(
        "s",
        "user",
        [
            {"type": "text", "text": "look at"},
            {"type": "image_url", "image_url": {"url": "x"}},
            {"type": "text", "text": "this"},
        ],
    )
    db.append_message("s", "assistant", "needle reply")
    db.append_message("s", "user", [{"type": "image_url", "image_url": {"url": "y"}}])
    db.append_message("s", "assistant", "second needle")
    db.append_message("s", "user", {"kind": "structured"})
    db.append_message("s", "user", None)
    db.append_message("s", "assistant", "third needle")
    contexts = {hit["id"]: hit["context"] for hit in db.search_messages("needle")}
    assert contexts[2] == [
        {"role": "user", "content": "look at this"},
        {"role": "assistant", "content": "needle reply"},
        {"role": "user", "content": "[multimodal content]"},
    ]
    assert contexts[4][2] == {"role": "user", "content": ""}
    assert contexts[7][0] == {"role": "user", "content": ""}


@pytest.mark.parametrize("path", PATH_QUERIES)
def test_every_path_adds_context(db, make_session, path):
    make_session("s", started=1.0)
    db.append_message("s", "user", "opening line")
    db.append_message("s", "assistant", "deployment 记忆断裂")
    (hit,) = db.search_messages(PATH_QUERIES[path])
    assert hit["context"] == [
        {"role": "user", "content": "opening line"},
        {"role": "assistant", "content": "deployment 记忆断裂"},
    ]


# --- index health -----------------------------------------------------------------------------------


def test_fts_integrity_after_every_kind_of_write(db, make_session, raw):
    make_session("a", started=1.0)
    make_session("b", started=2.0)
    make_session("c", started=3.0)
    for index in range(5):
        db.append_message("a", "user", f"message {index} 记忆断裂", tool_name="t", tool_calls=[{"n": index}])
        db.append_message("b", "assistant", [{"type": "text", "text": f"part {index}"}])
        db.append_message("c", "user", None)
    raw.fts_integrity_check()
    db.replace_messages("a", [{"role": "user", "content": "replacement text"}])
    raw.fts_integrity_check()
    db.clear_messages("b")
    raw.fts_integrity_check()
    db.delete_session("c")
    raw.fts_integrity_check()
    db.append_message("a", "assistant", "after everything")
    raw.fts_integrity_check()
    assert hit_ids(db.search_messages("replacement")) == [16]
    assert db.search_messages("part") == []
    assert db.search_messages("记忆断裂") == []


def test_both_indexes_hold_exactly_the_live_messages(db, make_session, raw):
    make_session("a", started=1.0)
    kept = db.append_message("a", "user", "kept words")
    dropped = db.append_message("a", "user", "dropped words")
    db.replace_messages("a", [{"role": "user", "content": "kept words"}])
    live = raw.rows("SELECT id FROM messages ORDER BY id")
    for table in ("messages_fts", "messages_fts_trigram"):
        assert raw.rows(f"SELECT rowid FROM {table} ORDER BY rowid") == live
    assert kept not in [row[0] for row in live]
    assert dropped not in [row[0] for row in live]


def test_indexed_text_is_content_tool_name_and_tool_calls(db, make_session, raw):
    make_session("a", started=1.0)
    message_id = db.append_message("a", "assistant", "body", tool_name="tool_x", tool_calls=[{"k": "v"}])
    bare = db.append_message("a", "assistant", None)
    for table in ("messages_fts", "messages_fts_trigram"):
        assert (
            raw.one(f"SELECT content FROM {table} WHERE rowid = ?", (message_id,))
            == 'body tool_x [{"k": "v"}]'
        )
        assert raw.one(f"SELECT content FROM {table} WHERE rowid = ?", (bare,)) == "  "


# --- mixed scripts, symbols and emoji (docs/search.md) ------------------------------------------

ISSUE_14_MESSAGES = [
    "怎么用docker部署这个服务",
    "docker 部署 失败了",
    "用 Python 写一个脚本",
    "Python脚本的部署",
    "达成100%完成率",
    "launch 🚀 tonight",
    # Near misses: every token is there, but not as one substring.
    "docker 部 署",
    "Pyth on 脚 本",
    "达成100完成率",
    "rocket launch tonight",
]


@pytest.mark.parametrize(
    ("query", "found"),
    [
        ("docker 部署", ["怎么用docker部署这个服务", "docker 部署 失败了"]),
        ("部署 docker", ["怎么用docker部署这个服务", "docker 部署 失败了"]),
        ("Python 脚本", ["用 Python 写一个脚本", "Python脚本的部署"]),
        ("python 部署", ["Python脚本的部署"]),
        ("100% 完成", ["达成100%完成率"]),
        ("🚀", ["launch 🚀 tonight"]),
        ("DOCKER部署", ["怎么用docker部署这个服务"]),
        ("部署 NOT docker", ["Python脚本的部署"]),
        ("🚀 OR 脚本", ["用 Python 写一个脚本", "Python脚本的部署", "launch 🚀 tonight"]),
        ('"docker 部署"', ["docker 部署 失败了"]),
    ],
)
def test_mixed_queries_find_every_message_holding_every_term(db, query, found):
    db.create_session("s", "cli")
    ids = {db.append_message("s", "user", text): text for text in ISSUE_14_MESSAGES}
    hits = db.search_messages(query, limit=50)
    assert sorted(ids[hit["id"]] for hit in hits) == sorted(found)
    # Newest first on the substring path, on both backends.
    assert hit_ids(hits) == sorted(hit_ids(hits), reverse=True)


def test_mixed_query_filters_apply_before_the_page(db):
    db.create_session("a", "cli")
    db.create_session("b", "telegram")
    for index in range(5):
        db.append_message("a", "user", f"docker部署 {index}")
        db.append_message("b", "assistant", f"docker 部署 {index}")
    assert len(db.search_messages("部署 docker", source_filter=["telegram"], limit=3)) == 3
    excluded = db.search_messages("部署 docker", exclude_sources=["telegram"])
    assert {hit["source"] for hit in excluded} == {"cli"}
    assert {hit["role"] for hit in db.search_messages("部署 docker", role_filter=["user"])} == {"user"}
    assert db.search_messages("部署 docker", source_filter=[]) == []


def _query_plan(store: SessionDB, query: str) -> str:
    from hermes_store.search.engine import SearchFilters
    from hermes_store.search.plan import plan_search
    from hermes_store.search.sqlite import statement

    built = statement(plan_search(query), SearchFilters(), 20, 0)
    assert built is not None
    sql, params = built
    return " | ".join(row[3] for row in store._conn.execute("EXPLAIN QUERY PLAN " + sql, params))


def test_a_mixed_query_narrows_by_its_indexable_term(db, backend):
    """Never a scan of every message when one term has 3+ characters (docs/search.md)."""
    if backend != "sqlite":
        pytest.skip("reads SQLite's query plan")
    for query in ("部署 docker", "Python 脚本", "100% 完成", "🚀 deploy", "你好世 OR 世界啊 x"):
        plan = _query_plan(db, query)
        assert "messages_fts_trigram VIRTUAL TABLE INDEX" in plan, query
        assert "SEARCH m USING INTEGER PRIMARY KEY" in plan, query
        assert "SCAN m " not in plan + " ", query


def test_a_query_of_short_terms_only_checks_every_message(db, backend):
    if backend != "sqlite":
        pytest.skip("reads SQLite's query plan")
    plan = _query_plan(db, "世界 你好")
    assert "SCAN m " in plan + " "
    assert "fts" not in plan


@pytest.mark.parametrize(
    ("query", "found"),
    [
        ("打折5%优惠", "a"),  # no ASCII letter: LIKE wildcards in the term stay literal
        ("打折5_优惠", "b"),
        ("服务器", "a b c"),
        ("记忆 NOT 服务器", "d"),  # an excluded term: NULL tool columns count as "not found"
        ("记忆 NOT 打折", ""),
    ],
)
def test_substring_terms_without_ascii_letters_match_literally(db, query, found):
    db.create_session("s", "cli")
    ids = {
        "a": db.append_message("s", "user", "服务器 打折5%优惠 today"),
        "b": db.append_message("s", "user", "服务器 打折5_优惠 today"),
        "c": db.append_message("s", "tool", None, tool_name="服务器", tool_calls=[{"id": "x"}]),
    }
    ids["d"] = db.append_message("s", "user", "打折50优惠 记忆")  # what an unescaped 5% or 5_ would match
    expected = sorted(ids[key] for key in found.split())
    assert sorted(hit_ids(db.search_messages(query))) == expected
