"""What a PostgreSQL database's revision offers search, and the expressions that read it.

A database serving this release may still be at an older revision until the deploy's
upgrade reaches it (:data:`~hermes_store.schema.revisions.OLDEST_RUNNABLE_REVISION`), so
each search asks which search objects exist before it writes a statement that uses them.
"""

from __future__ import annotations

import weakref

from sqlalchemy import orm
from sqlalchemy.pool import Pool

from hermes_store.db.execution import connection_of, fetch_tuples
from hermes_store.schema.indexed_text import INDEXED_TEXT
from hermes_store.schema.revisions import (
    ASCII_TRIGRAMS_REVISION,
    SEARCH_OBJECTS_REVISION,
    STORED_GRAMS_REVISION,
    UNICODE61_REVISION,
    history,
)

STORED_TSVECTOR = "m.search_vector"
"""Revision 0012's generated column: ``to_tsvector('simple', INDEXED_TEXT)``, stored."""
COMPUTED_TSVECTOR = f"to_tsvector('simple'::regconfig, {INDEXED_TEXT})"
"""The same vector computed per row: the expression revision 0011's ``idx_messages_fts`` indexes."""
CJK_GRAMS = f"hermes_cjk_grams({INDEXED_TEXT})"
"""Revision 0012's indexed expression: every CJK character and adjacent pair of the text."""
STORED_CJK_GRAMS = "m.cjk_grams"
"""Revision 0015's column: the same grams, stored (NULL for a text without CJK); from
revision 0016 also the text's lower-cased ASCII trigrams (:func:`.grams.ascii_trigrams`)."""


# Pools of databases seen at a revision: a schema only moves forward under a running
# service, so once seen there it is never read again (one query per search until then).
_POOLS_AT: dict[str, weakref.WeakSet[Pool]] = {}


def reaches(db: orm.Session, revision: str) -> bool:
    pool = connection_of(db).engine.pool
    seen = _POOLS_AT.setdefault(revision, weakref.WeakSet())
    if pool in seen:
        return True
    rows = fetch_tuples(db, "SELECT version_num FROM alembic_version", {})
    if not history().reaches(rows[0][0] if rows else None, revision):
        return False
    seen.add(pool)
    return True


def has_search_objects(db: orm.Session) -> bool:
    """Whether revision 0012's search objects exist in ``db``'s database (else it is at 0011)."""
    return reaches(db, SEARCH_OBJECTS_REVISION)


def has_unicode61_vectors(db: orm.Session) -> bool:
    """Whether ``db``'s stored vectors hold unicode61 words (revision 0014 or later)."""
    return reaches(db, UNICODE61_REVISION)


def cjk_grams_source(db: orm.Session) -> str | None:
    """What a gram condition reads in ``db``'s database: revision 0015's stored column,
    0012's indexed expression, or nothing (a database at 0011 has neither)."""
    if reaches(db, STORED_GRAMS_REVISION):
        return STORED_CJK_GRAMS
    return CJK_GRAMS if has_search_objects(db) else None


def grams_hold_ascii_trigrams(db: orm.Session) -> bool:
    """Whether ``db``'s stored grams hold the ASCII trigrams of CJK messages (revision 0016)."""
    return reaches(db, ASCII_TRIGRAMS_REVISION)
