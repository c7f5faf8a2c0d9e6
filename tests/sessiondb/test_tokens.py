"""update_token_counts: incremental and absolute modes, costs, billing and model rules."""

from __future__ import annotations

import pytest

TOKEN_COLUMNS = (
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "reasoning_tokens",
)


def tokens(db, session_id):
    row = db.get_session(session_id)
    return tuple(row[column] for column in TOKEN_COLUMNS)


@pytest.fixture
def sid(db):
    return db.create_session("tok", "cli")


# --- token columns -----------------------------------------------------------------------------


def test_incremental_mode_adds_every_token_column(db, sid):
    assert (
        db.update_token_counts(
            sid,
            input_tokens=100,
            output_tokens=20,
            cache_read_tokens=7,
            cache_write_tokens=3,
            reasoning_tokens=5,
        )
        is None
    )
    db.update_token_counts(
        sid, input_tokens=50, output_tokens=1, cache_read_tokens=3, cache_write_tokens=0, reasoning_tokens=10
    )
    assert tokens(db, sid) == (150, 21, 10, 3, 15)


def test_incremental_positional_arguments(db, sid):
    db.update_token_counts(sid, 11, 4)
    db.update_token_counts(sid, 9, 6)
    assert tokens(db, sid)[:2] == (20, 10)


def test_absolute_mode_sets_token_columns(db, sid):
    db.update_token_counts(sid, input_tokens=999, output_tokens=999, reasoning_tokens=999)
    db.update_token_counts(sid, input_tokens=40, output_tokens=8, cache_read_tokens=2, absolute=True)
    # Omitted counters are set to their default, 0.
    assert tokens(db, sid) == (40, 8, 2, 0, 0)


def test_absolute_mode_with_nothing_given_zeroes(db, sid):
    db.update_token_counts(sid, input_tokens=5, output_tokens=5, api_call_count=2, estimated_cost_usd=0.5)
    db.update_token_counts(sid, absolute=True)
    row = db.get_session(sid)
    assert tokens(db, sid) == (0, 0, 0, 0, 0)
    assert row["api_call_count"] == 0
    assert row["estimated_cost_usd"] == 0.0


# --- estimated cost --------------------------------------------------------------------------


def test_new_session_has_null_estimated_cost(db, sid):
    assert db.get_session(sid)["estimated_cost_usd"] is None


def test_incremental_call_without_cost_turns_null_estimate_into_zero(db, sid):
    db.update_token_counts(sid, input_tokens=1)
    assert db.get_session(sid)["estimated_cost_usd"] == 0.0


def test_incremental_estimated_cost_adds(db, sid):
    db.update_token_counts(sid, estimated_cost_usd=0.5)
    db.update_token_counts(sid, estimated_cost_usd=0.25)
    db.update_token_counts(sid, estimated_cost_usd=None)
    assert db.get_session(sid)["estimated_cost_usd"] == 0.75


def test_absolute_estimated_cost_sets(db, sid):
    db.update_token_counts(sid, estimated_cost_usd=3.0)
    db.update_token_counts(sid, estimated_cost_usd=1.5, absolute=True)
    assert db.get_session(sid)["estimated_cost_usd"] == 1.5


def test_absolute_estimated_cost_none_resets_to_zero(db, sid):
    db.update_token_counts(sid, estimated_cost_usd=2.0)
    db.update_token_counts(sid, estimated_cost_usd=None, absolute=True)
    assert db.get_session(sid)["estimated_cost_usd"] == 0.0


# --- actual cost -------------------------------------------------------------------------------


def test_actual_cost_stays_null_when_never_given(db, sid):
    db.update_token_counts(sid, input_tokens=3)
    db.update_token_counts(sid, input_tokens=3, absolute=True)
    assert db.get_session(sid)["actual_cost_usd"] is None


def test_incremental_actual_cost_adds(db, sid):
    db.update_token_counts(sid, actual_cost_usd=0.5)
    db.update_token_counts(sid, actual_cost_usd=0.125)
    assert db.get_session(sid)["actual_cost_usd"] == 0.625


def test_incremental_actual_cost_none_leaves_it_unchanged(db, sid):
    db.update_token_counts(sid, actual_cost_usd=0.5)
    db.update_token_counts(sid, input_tokens=1, actual_cost_usd=None)
    assert db.get_session(sid)["actual_cost_usd"] == 0.5


def test_absolute_actual_cost_sets_and_none_keeps(db, sid):
    db.update_token_counts(sid, actual_cost_usd=4.0)
    db.update_token_counts(sid, actual_cost_usd=0.25, absolute=True)
    assert db.get_session(sid)["actual_cost_usd"] == 0.25
    db.update_token_counts(sid, actual_cost_usd=None, absolute=True)
    assert db.get_session(sid)["actual_cost_usd"] == 0.25


# --- latest non-null: cost status / source / pricing ---------------------------------------------


@pytest.mark.parametrize("absolute", [False, True])
def test_cost_status_source_pricing_take_latest_non_null(db, sid, absolute):
    db.update_token_counts(
        sid, cost_status="estimated", cost_source="snapshot", pricing_version="v1", absolute=absolute
    )
    db.update_token_counts(sid, cost_status="actual", absolute=absolute)
    db.update_token_counts(sid, cost_source="provider_api", pricing_version=None, absolute=absolute)
    db.update_token_counts(sid, absolute=absolute)
    row = db.get_session(sid)
    assert (row["cost_status"], row["cost_source"], row["pricing_version"]) == (
        "actual",
        "provider_api",
        "v1",
    )


# --- first non-null wins: model and billing ----------------------------------------------------


@pytest.mark.parametrize("absolute", [False, True])
def test_model_and_billing_first_non_null_wins(db, sid, absolute):
    db.update_token_counts(sid, absolute=absolute)
    row = db.get_session(sid)
    assert (row["model"], row["billing_provider"]) == (None, None)
    db.update_token_counts(
        sid,
        model="model-a",
        billing_provider="openrouter",
        billing_base_url="https://one.example/v1",
        billing_mode="official",
        absolute=absolute,
    )
    db.update_token_counts(
        sid,
        model="model-b",
        billing_provider="anthropic",
        billing_base_url="https://two.example/v1",
        billing_mode="custom",
        absolute=absolute,
    )
    row = db.get_session(sid)
    assert (row["model"], row["billing_provider"], row["billing_base_url"], row["billing_mode"]) == (
        "model-a",
        "openrouter",
        "https://one.example/v1",
        "official",
    )


def test_model_given_at_creation_is_never_overwritten(db):
    db.create_session("with-model", "cli", model="created-model")
    db.update_token_counts("with-model", model="reported-model")
    assert db.get_session("with-model")["model"] == "created-model"


def test_billing_fields_fill_in_one_at_a_time(db, sid):
    db.update_token_counts(sid, billing_provider="p1")
    db.update_token_counts(sid, billing_provider="p2", billing_mode="m2")
    row = db.get_session(sid)
    assert (row["billing_provider"], row["billing_mode"], row["billing_base_url"]) == ("p1", "m2", None)


# --- api_call_count ----------------------------------------------------------------------------


def test_api_call_count_incremental_and_absolute(db, sid):
    db.update_token_counts(sid, api_call_count=2)
    db.update_token_counts(sid, api_call_count=3)
    assert db.get_session(sid)["api_call_count"] == 5
    db.update_token_counts(sid, api_call_count=1)
    db.update_token_counts(sid)
    assert db.get_session(sid)["api_call_count"] == 6
    db.update_token_counts(sid, api_call_count=9, absolute=True)
    assert db.get_session(sid)["api_call_count"] == 9
    db.update_token_counts(sid, input_tokens=1, absolute=True)
    assert db.get_session(sid)["api_call_count"] == 0


# --- isolation ---------------------------------------------------------------------------------


def test_updates_touch_only_the_named_session(db, sid):
    db.create_session("other", "cli")
    db.update_token_counts(sid, input_tokens=10, estimated_cost_usd=0.5, model="m")
    other = db.get_session("other")
    assert (other["input_tokens"], other["estimated_cost_usd"], other["model"]) == (0, None, None)


def test_message_counters_are_not_touched(db, sid):
    db.append_message(sid, "user", "hi")
    db.update_token_counts(sid, input_tokens=10, absolute=True)
    row = db.get_session(sid)
    assert (row["message_count"], row["tool_call_count"]) == (1, 0)
