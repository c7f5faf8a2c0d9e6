"""Titles: sanitize_title, set/get/clear, uniqueness, lookup by title, lineage numbering."""

from __future__ import annotations

import pytest

from hermes_store import SessionDB

# --- sanitize_title ----------------------------------------------------------------------------

SANITIZE_CASES = [
    # upstream's own examples
    ("  hello\x00  world  ", "hello world"),
    ("hello\t\nworld", "hello world"),
    ("\x07\x08test\x1b", "test"),
    ("\ufeffhello", "hello"),
    ("\x00\x01\x02\u200b\ufeff", None),
    ("A" * 100, "A" * 100),
    # falsy and blank input
    (None, None),
    ("", None),
    ("   ", None),
    ("\t\r\n", None),
    # C0 controls removed (tab/LF/CR become spaces), DEL removed
    ("ab\x0bcd\x0cef\x7fgh", "abcdefgh"),
    ("line one\r\nline two", "line one line two"),
    ("\x0e\x0f\x10\x1fok", "ok"),
    # Unicode format characters removed (zero-width, bidi, word joiners, specials)
    ("zero\u200bwidth", "zerowidth"),
    ("mark\u200e\u200fs", "marks"),
    ("para\u2028sep", "parasep"),
    ("bidi\u202aover\u202eride", "bidioverride"),
    ("word\u2060join\u2066er\u2069", "wordjoiner"),
    ("obj\ufffcrepl", "objrepl"),
    ("inter\ufff9lin\ufffbear", "interlinear"),
    # every run of Unicode whitespace collapses to one space
    ("no\u00a0break", "no break"),
    ("ideo\u3000graphic", "ideo graphic"),
    ("next\u0085line", "next line"),
    ("many     spaces\t\t\there", "many spaces here"),
    # other characters pass through unchanged
    ("C1 \u0090 control stays", "C1 \u0090 control stays"),
    ("Déjà vu — 記憶 🚀!", "Déjà vu — 記憶 🚀!"),
    ("#2 (draft) [wip] {x} 50% a_b", "#2 (draft) [wip] {x} 50% a_b"),
    # the length limit applies after cleaning
    ("   " + "B" * 100 + "   ", "B" * 100),
    ("\u200b" * 10 + "C" * 100, "C" * 100),
    ("x" * 50 + " " * 30 + "y" * 49, "x" * 50 + " " + "y" * 49),
]


@pytest.mark.parametrize(("title", "expected"), SANITIZE_CASES)
def test_sanitize_title(title, expected):
    assert SessionDB.sanitize_title(title) == expected


def test_sanitize_title_too_long_message():
    with pytest.raises(ValueError, match=r"^Title too long \(101 chars, max 100\)$"):
        SessionDB.sanitize_title("A" * 101)


def test_sanitize_title_counts_code_points():
    assert SessionDB.sanitize_title("記" * 100) == "記" * 100
    with pytest.raises(ValueError, match=r"Title too long \(102 chars, max 100\)"):
        SessionDB.sanitize_title("🚀" * 102)


def test_sanitize_title_is_callable_on_an_instance(db):
    assert db.sanitize_title("  spaced  out ") == "spaced out"


# --- set / get / clear ----------------------------------------------------------------------


def test_set_and_get_title(db):
    db.create_session("t1", "cli")
    assert db.set_session_title("t1", "Refactor the parser") is True
    assert db.get_session_title("t1") == "Refactor the parser"
    assert db.get_session("t1")["title"] == "Refactor the parser"


def test_title_is_sanitised_before_storing(db):
    db.create_session("t1", "cli")
    db.set_session_title("t1", "  Fix\tthe \u200bbuild\n ")
    assert db.get_session_title("t1") == "Fix the build"


def test_set_title_on_missing_session_returns_false(db):
    assert db.set_session_title("ghost", "Anything") is False


@pytest.mark.parametrize("blank", ["", "   ", "\u200b\ufeff", None])
def test_blank_title_clears(db, blank):
    db.create_session("t1", "cli")
    db.set_session_title("t1", "Something")
    assert db.set_session_title("t1", blank) is True
    assert db.get_session_title("t1") is None


def test_get_title_of_missing_or_untitled_session(db):
    db.create_session("untitled", "cli")
    assert db.get_session_title("untitled") is None
    assert db.get_session_title("missing") is None


def test_too_long_title_raises_and_keeps_old_title(db):
    db.create_session("t1", "cli")
    db.set_session_title("t1", "Short")
    with pytest.raises(ValueError, match="Title too long"):
        db.set_session_title("t1", "z" * 150)
    assert db.get_session_title("t1") == "Short"


def test_duplicate_title_raises_value_error_naming_the_owner(db):
    db.create_session("first", "cli")
    db.create_session("second", "cli")
    db.set_session_title("first", "Weekly report")
    with pytest.raises(ValueError, match=r"^Title 'Weekly report' is already in use by session first$"):
        db.set_session_title("second", "Weekly report")
    assert db.get_session_title("second") is None


def test_duplicate_check_uses_the_sanitised_title(db):
    db.create_session("first", "cli")
    db.create_session("second", "cli")
    db.set_session_title("first", "Weekly report")
    with pytest.raises(ValueError, match="already in use"):
        db.set_session_title("second", "  Weekly\t\treport ")


def test_duplicate_title_raises_even_for_a_missing_session(db):
    db.create_session("owner", "cli")
    db.set_session_title("owner", "Taken")
    with pytest.raises(ValueError, match="already in use by session owner"):
        db.set_session_title("nobody", "Taken")


def test_titles_are_unique_case_sensitively(db):
    db.create_session("a", "cli")
    db.create_session("b", "cli")
    db.set_session_title("a", "My Project")
    assert db.set_session_title("b", "my PROJECT") is True
    assert db.get_session_title("b") == "my PROJECT"


def test_a_session_may_keep_its_own_title(db):
    db.create_session("a", "cli")
    db.set_session_title("a", "Mine")
    assert db.set_session_title("a", "Mine") is True
    assert db.get_session_title("a") == "Mine"


def test_title_freed_by_clearing_can_be_reused(db):
    db.create_session("a", "cli")
    db.create_session("b", "cli")
    db.set_session_title("a", "Hand-me-down")
    db.set_session_title("a", "")
    assert db.set_session_title("b", "Hand-me-down") is True


def test_many_sessions_may_be_untitled(db):
    for index in range(3):
        db.create_session(f"s{index}", "cli")
        db.set_session_title(f"s{index}", None)
    assert [db.get_session_title(f"s{i}") for i in range(3)] == [None, None, None]


# --- get_session_by_title ----------------------------------------------------------------------


def test_get_session_by_title_returns_the_full_row(db):
    db.create_session("bt", "telegram", model="m-1")
    db.set_session_title("bt", "Grocery list")
    row = db.get_session_by_title("Grocery list")
    assert row["id"] == "bt"
    assert row["source"] == "telegram"
    assert len(row) == 41  # upstream's 41 session columns at schema 17


def test_get_session_by_title_is_exact_and_case_sensitive(db):
    db.create_session("bt", "cli")
    db.set_session_title("bt", "Grocery list")
    assert db.get_session_by_title("grocery list") is None
    assert db.get_session_by_title("Grocery") is None
    assert db.get_session_by_title(" Grocery list ") is None
    assert db.get_session_by_title("Nothing") is None


# --- resolve_session_by_title ------------------------------------------------------------------


@pytest.fixture
def titled(db, make_session):
    def _titled(session_id, title, started):
        make_session(session_id, started=started)
        db.set_session_title(session_id, title)
        return session_id

    return _titled


def test_resolve_title_exact_only(db, titled):
    titled("s1", "Budget", 100.0)
    assert db.resolve_session_by_title("Budget") == "s1"


def test_resolve_title_missing(db, titled):
    titled("s1", "Budget", 100.0)
    assert db.resolve_session_by_title("Holiday") is None


def test_resolve_title_prefers_latest_numbered_variant_over_exact(db, titled):
    titled("s1", "Budget", 100.0)
    titled("s2", "Budget #2", 200.0)
    titled("s3", "Budget #3", 300.0)
    assert db.resolve_session_by_title("Budget") == "s3"


def test_resolve_title_latest_variant_is_by_start_time_not_number(db, titled):
    titled("s1", "Budget", 100.0)
    titled("s3", "Budget #3", 200.0)
    titled("s2", "Budget #2", 300.0)
    assert db.resolve_session_by_title("Budget") == "s2"


def test_resolve_title_variant_without_exact(db, titled):
    titled("s2", "Budget #2", 200.0)
    assert db.resolve_session_by_title("Budget") == "s2"


def test_resolve_title_any_suffix_counts_as_variant(db, titled):
    titled("s1", "foo", 100.0)
    titled("s2", "foo #draft", 200.0)
    assert db.resolve_session_by_title("foo") == "s2"


def test_resolve_title_variant_match_ignores_ascii_case(db, titled):
    titled("s1", "My Project", 100.0)
    titled("s2", "my project #2", 200.0)
    assert db.resolve_session_by_title("My Project") == "s2"


def test_resolve_title_like_wildcards_are_literal(db, titled):
    titled("s1", "a_b", 100.0)
    titled("s2", "axb #2", 200.0)
    titled("s3", "50%", 300.0)
    titled("s4", "500 #2", 400.0)
    assert db.resolve_session_by_title("a_b") == "s1"
    assert db.resolve_session_by_title("50%") == "s3"


def test_resolve_title_needs_space_hash_suffix(db, titled):
    titled("s1", "Budget", 100.0)
    titled("s2", "Budget#2", 200.0)
    titled("s3", "Budgets #2", 300.0)
    assert db.resolve_session_by_title("Budget") == "s1"


# --- get_next_title_in_lineage -----------------------------------------------------------------


def test_next_title_when_base_unused(db):
    assert db.get_next_title_in_lineage("fresh idea") == "fresh idea"


def test_next_title_after_original(db, titled):
    titled("s1", "my project", 100.0)
    assert db.get_next_title_in_lineage("my project") == "my project #2"


def test_next_title_after_numbered_variants(db, titled):
    titled("s1", "my project", 100.0)
    titled("s2", "my project #2", 200.0)
    titled("s3", "my project #3", 300.0)
    assert db.get_next_title_in_lineage("my project") == "my project #4"


def test_next_title_skips_to_the_highest_number(db, titled):
    titled("s1", "notes", 100.0)
    titled("s7", "notes #7", 200.0)
    assert db.get_next_title_in_lineage("notes") == "notes #8"


def test_next_title_from_a_numbered_input(db, titled):
    titled("s1", "my project", 100.0)
    titled("s2", "my project #2", 200.0)
    assert db.get_next_title_in_lineage("my project #2") == "my project #3"


def test_next_title_variants_without_original(db, titled):
    titled("s2", "draft #2", 200.0)
    titled("s3", "draft #3", 300.0)
    assert db.get_next_title_in_lineage("draft") == "draft #4"


def test_next_title_keeps_the_callers_casing(db, titled):
    titled("s1", "my project", 100.0)
    titled("s2", "my project #2", 200.0)
    assert db.get_next_title_in_lineage("MY PROJECT") == "MY PROJECT #3"


def test_next_title_strips_only_the_last_number(db, titled):
    titled("s1", "a #1", 100.0)
    assert db.get_next_title_in_lineage("a #1 #2") == "a #1 #2"
    # "a #1" itself reads as base "a", number 1.
    assert db.get_next_title_in_lineage("a #1") == "a #2"


def test_next_title_non_numeric_suffix_counts_as_one(db, titled):
    titled("s1", "plan #beta", 100.0)
    assert db.get_next_title_in_lineage("plan") == "plan #2"


def test_next_title_like_wildcards_are_literal(db, titled):
    titled("s1", "axb", 100.0)
    titled("s2", "axb #5", 200.0)
    assert db.get_next_title_in_lineage("a_b") == "a_b"


def test_next_title_has_no_length_check(db, titled):
    long_title = "L" * 100
    titled("s1", long_title, 100.0)
    assert db.get_next_title_in_lineage(long_title) == long_title + " #2"
