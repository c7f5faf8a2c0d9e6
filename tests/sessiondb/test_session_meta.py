"""update_session_meta, update_session_model, update_session_billing_route, and how they
meet update_token_counts (which only fills what is still NULL)."""

from __future__ import annotations

import json

import pytest

from hermes_store import SessionDB


def columns(db, session_id, *names):
    row = db.get_session(session_id)
    return tuple(row[name] for name in names)


# --- update_session_meta -----------------------------------------------------------------------


def test_meta_is_stored_verbatim(db, make_session):
    make_session("s", started=1.0, model="gpt-4", model_config={"old": True})
    text = '{"cwd":"/new/path",  "provider": "openai", "name": "日本"}'
    db.update_session_meta("s", text)
    assert columns(db, "s", "model_config", "model") == (text, "gpt-4")
    assert json.loads(db.get_session("s")["model_config"])["provider"] == "openai"


def test_meta_sets_the_model_only_when_given(db, make_session):
    make_session("s", started=1.0, model="gpt-3.5")
    db.update_session_meta("s", json.dumps({"cwd": "."}), model="gpt-4o")
    assert columns(db, "s", "model") == ("gpt-4o",)
    db.update_session_meta("s", json.dumps({"cwd": ".."}), model=None)
    assert columns(db, "s", "model", "model_config") == ("gpt-4o", '{"cwd": ".."}')


def test_meta_none_clears_the_config(db, make_session):
    make_session("s", started=1.0, model_config={"a": 1})
    db.update_session_meta("s", None)
    assert columns(db, "s", "model_config") == (None,)


def test_meta_of_an_unknown_session_is_not_an_error(db):
    db.update_session_meta("ghost", json.dumps({"cwd": "."}), model="m")
    assert db.get_session("ghost") is None


def test_meta_must_already_be_json_text(db, make_session):
    make_session("s", started=1.0, model_config={"a": 1})
    with pytest.raises(TypeError, match="model_config_json"):
        db.update_session_meta("s", {"cwd": "."})  # type: ignore[arg-type]
    assert columns(db, "s", "model_config") == ('{"a": 1}',)


# --- update_session_model ----------------------------------------------------------------------


def test_model_is_overwritten_and_none_clears_it(db, make_session):
    make_session("s", started=1.0, model="old", system_prompt="You are old")
    db.update_session_model("s", "new")
    assert columns(db, "s", "model", "system_prompt") == ("new", "You are old")
    db.update_session_model("s", None)
    assert columns(db, "s", "model") == (None,)
    db.update_session_model("ghost", "m")
    assert db.get_session("ghost") is None


def test_token_accounting_does_not_undo_a_model_switch(db, make_session):
    make_session("s", started=1.0, model="first")
    db.update_session_model("s", "second")
    db.update_token_counts("s", input_tokens=1, model="first")
    assert columns(db, "s", "model", "input_tokens") == ("second", 1)


# --- update_session_billing_route --------------------------------------------------------------


def test_billing_route_overwrites_and_clears_the_cached_prompt(db, make_session):
    make_session("s", started=1.0, system_prompt="Model: old")
    db.update_token_counts("s", billing_provider="p1", billing_base_url="https://one", billing_mode="api")
    db.update_session_billing_route("s", provider="p2", base_url="https://two")
    assert columns(db, "s", "billing_provider", "billing_base_url", "billing_mode", "system_prompt") == (
        "p2",
        "https://two",
        "api",
        None,
    )
    db.update_session_billing_route("s", provider="p3", base_url=None, billing_mode="subscription")
    assert columns(db, "s", "billing_provider", "billing_base_url", "billing_mode") == (
        "p3",
        None,
        "subscription",
    )
    # Token accounting only fills NULLs: the route chosen last stays.
    db.update_token_counts("s", billing_provider="p1", billing_base_url="https://one", billing_mode="api")
    assert columns(db, "s", "billing_provider", "billing_base_url", "billing_mode") == (
        "p3",
        "https://one",
        "subscription",
    )


def test_billing_route_arguments_are_keywords(db, make_session):
    make_session("s", started=1.0)
    with pytest.raises(TypeError):
        db.update_session_billing_route("s", "p", "https://x")  # type: ignore[misc]
    db.update_session_billing_route("ghost", provider="p", base_url="u")
    assert db.get_session("ghost") is None


# --- update_token_counts -----------------------------------------------------------------------


def test_token_counts_create_a_missing_session_and_fill_only_a_null_model(db, make_session):
    db.update_token_counts("late", input_tokens=3, model="m1")
    assert columns(db, "late", "source", "model", "input_tokens") == ("unknown", "m1", 3)
    db.update_token_counts("late", input_tokens=2, model="m2")
    assert columns(db, "late", "model", "input_tokens") == ("m1", 5)
    make_session("named", started=1.0)
    db.update_token_counts("named", model="m3")
    assert columns(db, "named", "source", "model") == ("cli", "m3")


def test_token_counts_for_a_missing_session_are_one_transaction(db, backend):
    if not isinstance(db, SessionDB):
        pytest.skip("counts the sync store's write transactions")
    before = db._write_count
    db.update_token_counts("late", input_tokens=3, model="m")
    assert db._write_count == before + 1
