"""Many Hermes profiles in one PostgreSQL database, each in a schema of its own.

A profile is named in the URL's query (``?profile=work``) or by the ``profile=`` keyword of
the stores and engines; its store lives in schema ``hermes_<name>`` (``-`` becomes ``_``).
The name stays in the engine's URL, so every engine made again from it (the asyncio
store's worker engine, a copy, a printed ``hermes-store --url … upgrade``) keeps the
profile; it is taken out of the parameters the driver gets when a connection is made.

Statements find the profile's tables through ``search_path``: the profile's schema, then
``public``, where PostgreSQL's extensions the store uses (``pg_trgm``, ``btree_gin``)
usually live. ``public`` may also hold another store (the one without a profile), whose
tables an unqualified name would reach while the profile's schema lacks them. So nothing
that asks whether a table exists looks along the search path on a profile: it looks in
the profile's schema only (:func:`store_schema`, :func:`table_names`), and the schema is
created and migrated, under the migrators' lock, before any store statement runs on it.
"""

from __future__ import annotations

import re
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import URL, Connection, Engine

PROFILE_OPTION = "profile"
"""The URL query option that names the profile (``?profile=work``)."""
SCHEMA_PREFIX = "hermes_"
MAX_NAME_LENGTH = 56
"""PostgreSQL cuts identifiers at 63 bytes; ``hermes_`` takes 7 of them."""
_NAME = re.compile(r"[a-z0-9_]+")


def profile_schema(name: str) -> str:
    """The schema of profile ``name``: ``hermes_<name>`` with ``-`` as ``_``.

    A name is lower-case letters, digits, ``_`` and ``-``, at most
    :data:`MAX_NAME_LENGTH` characters; anything else raises ``ValueError`` naming it.
    """
    normal = name.replace("-", "_")
    if not _NAME.fullmatch(normal) or len(normal) > MAX_NAME_LENGTH:
        raise ValueError(
            f"profile {name!r} is not a profile name: use lower-case letters, digits, '_' or '-' "
            f"(at most {MAX_NAME_LENGTH} characters)"
        )
    return SCHEMA_PREFIX + normal


def with_profile(url: URL, keyword: str | None) -> URL:
    """``url`` with its profile checked and written in normal form (``-`` as ``_``).

    ``keyword`` (the ``profile=`` argument) goes into the URL; a URL that names another
    profile raises ``ValueError``. A profile on anything but PostgreSQL raises
    ``ValueError`` too: a SQLite store is one file per profile already.
    """
    named = url.query.get(PROFILE_OPTION)
    if isinstance(named, tuple):
        raise ValueError(f"the URL names more than one profile: {', '.join(named)}")
    if keyword is not None and named is not None and profile_schema(keyword) != profile_schema(named):
        raise ValueError(f"profile={keyword!r} differs from the URL's profile {named!r}; give one of them")
    name = keyword if keyword is not None else named
    if name is None:
        return url
    if url.get_backend_name() != "postgresql":
        raise ValueError(
            f"profile {name!r}: profiles are schemas of a PostgreSQL database; a SQLite store is "
            "one file per profile (HERMES_HOME/state.db)"
        )
    return url.update_query_dict({PROFILE_OPTION: profile_schema(name).removeprefix(SCHEMA_PREFIX)})


def schema_of_url(url: URL) -> str | None:
    """The schema the URL's profile lives in (``None``: no profile, the search path's)."""
    name = url.query.get(PROFILE_OPTION)
    return profile_schema(name) if isinstance(name, str) else None


def store_schema(bind: Engine | Connection) -> str | None:
    """The schema of ``bind``'s profile, or ``None`` when it has none."""
    return schema_of_url(bind.engine.url)


def search_path_option(schema: str) -> str:
    """The server setting that makes ``schema`` the first on the search path, ``public``
    (the extensions' usual home) after it."""
    return f"-c search_path={schema},public"


def install(engine: Engine) -> None:
    """Keep the profile out of the driver's connect parameters (``engine``: a sync engine,
    or an asyncio engine's ``sync_engine``)."""

    @sa.event.listens_for(engine, "do_connect")
    def _connect(_dialect: Any, _record: Any, _cargs: Any, cparams: dict[str, Any]) -> None:
        cparams.pop(PROFILE_OPTION, None)


def table_names(bind: Engine | Connection) -> set[str]:
    """The tables of the store behind ``bind``: in its profile's schema only, else those
    the search path shows."""
    return set(sa.inspect(bind).get_table_names(schema=store_schema(bind)))


def qualified(bind: Engine | Connection, table: str) -> str:
    """``table`` named in the profile's schema (as it is when ``bind`` has no profile)."""
    schema = store_schema(bind)
    return f'"{schema}".{table}' if schema else table
