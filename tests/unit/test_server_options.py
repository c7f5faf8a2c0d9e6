"""Pool and timeout options for PostgreSQL engines: URL query, keywords, defaults, bad values."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from hermes_store.db.server_errors import is_server_unreachable, translate_server_error
from hermes_store.db.server_options import (
    DEFAULTS,
    NETWORK_DEFAULTS,
    duration_s,
    split_options,
    statement_timeout_s,
)

URL = sa.make_url("postgresql+psycopg://app@db/hermes")


def test_defaults_apply_when_nothing_is_given() -> None:
    url, kwargs = split_options(URL, {})
    assert url == URL
    assert {k: kwargs[k] for k in ("pool_size", "max_overflow", "pool_pre_ping", "pool_recycle")} == {
        "pool_size": 5,
        "max_overflow": 10,
        "pool_pre_ping": True,
        "pool_recycle": 1800,
    }
    assert kwargs["connect_args"]["options"] == "-c jit=off -c statement_timeout=60s -c lock_timeout=10s"
    assert set(DEFAULTS) >= {"statement_timeout", "lock_timeout"}


def test_url_query_is_read_and_removed_and_keywords_win() -> None:
    url, kwargs = split_options(
        URL.update_query_dict(
            {"pool_size": "20", "pool_pre_ping": "off", "lock_timeout": "2s", "sslmode": "require"}
        ),
        {"lock_timeout": 500, "echo": True, "connect_args": {"options": "-c search_path=app"}},
    )
    assert dict(url.query) == {"sslmode": "require"}  # libpq's own options stay in the URL
    assert (kwargs["pool_size"], kwargs["pool_pre_ping"], kwargs["echo"]) == (20, False, True)
    assert kwargs["connect_args"]["options"] == (
        "-c jit=off -c search_path=app -c statement_timeout=60s -c lock_timeout=500"
    )


def test_timeouts_in_the_callers_options_win_over_the_url_and_defaults_and_keywords_over_them() -> None:
    """What PostgreSQL applies is the last ``-c`` of a setting: the store's, appended last,
    must carry the caller's value, and the reply watchdog must wait for that value."""
    theirs = {"connect_args": {"options": "-c search_path=app -c statement_timeout=5s --lock_timeout=250"}}
    _, kwargs = split_options(URL.update_query_dict({"statement_timeout": "30s"}), theirs)
    options = kwargs["connect_args"]["options"]
    assert options.endswith("-c statement_timeout=5s -c lock_timeout=250"), options
    assert statement_timeout_s(URL.update_query_dict({"statement_timeout": "30s"}), theirs) == 5.0
    both = {**theirs, "statement_timeout": "7s"}
    options = split_options(URL, both)[1]["connect_args"]["options"]
    assert options.endswith("-c statement_timeout=7s -c lock_timeout=250"), options
    assert statement_timeout_s(URL, both) == 7.0


def test_network_defaults_go_to_libpq_and_the_url_and_keywords_override_them() -> None:
    _, kwargs = split_options(URL, {})
    assert {name: kwargs["connect_args"][name] for name in NETWORK_DEFAULTS} == {
        "connect_timeout": 5,
        "keepalives": 1,
        "keepalives_idle": 5,
        "keepalives_interval": 2,
        "keepalives_count": 3,
        "tcp_user_timeout": 10000,
    }
    url, kwargs = split_options(
        URL.update_query_dict({"connect_timeout": "3", "keepalives_idle": "30"}),
        {"keepalives_idle": 60, "connect_args": {"keepalives_count": 9}},
    )
    assert dict(url.query) == {}  # read here, never passed twice to the driver
    args = kwargs["connect_args"]
    assert (args["connect_timeout"], args["keepalives_idle"], args["keepalives_count"]) == (3, 60, 9)
    assert "connect_timeout" not in kwargs  # a libpq parameter, not a create_engine argument


def test_network_options_are_libpq_parameters_only() -> None:
    _, kwargs = split_options(sa.make_url("postgresql+asyncpg://app@db/hermes"), {})
    assert not set(NETWORK_DEFAULTS) & set(kwargs["connect_args"])
    with pytest.raises(ValueError, match="keepalives_idle"):
        split_options(URL, {"keepalives_idle": "soon"})


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("60s", 60.0), ("500ms", 0.5), ("2min", 120.0), ("1500", 1.5), ("0", 0.0), ("1h", 3600.0)],
)
def test_durations_read_as_postgresql_reads_them(text: str, seconds: float) -> None:
    assert duration_s(text) == pytest.approx(seconds)


def test_the_statement_timeout_an_engine_gets() -> None:
    assert statement_timeout_s(URL, {}) == 60.0
    in_query = URL.update_query_dict({"statement_timeout": "5s"})
    assert statement_timeout_s(in_query, {}) == 5.0
    assert statement_timeout_s(in_query, {"statement_timeout": 0}) == 0.0


def test_a_pool_class_without_sizing_drops_the_sizing_arguments() -> None:
    _, kwargs = split_options(URL, {"poolclass": sa.pool.NullPool, "pool_timeout": "5"})
    assert "pool_size" not in kwargs and "max_overflow" not in kwargs and "pool_timeout" not in kwargs
    assert kwargs["poolclass"] is sa.pool.NullPool and kwargs["pool_recycle"] == 1800


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("pool_size", "many"),
        ("pool_size", -1),
        ("pool_pre_ping", "sometimes"),
        ("statement_timeout", "soon"),
        ("lock_timeout", -5),
        ("lock_timeout", "1s; DROP TABLE x"),
    ],
)
def test_bad_values_are_refused_naming_the_option(name: str, value: object) -> None:
    with pytest.raises(ValueError, match=name):
        split_options(URL, {name: value})


def test_sqlite_errors_are_not_server_errors() -> None:
    import sqlite3

    error = sqlite3.OperationalError("database is locked")
    assert not is_server_unreachable(error)
    assert translate_server_error(error, "reading") is None
