"""Search on PostgreSQL: ``tsvector``/GIN for words, ``pg_trgm``/``ILIKE`` for CJK and substrings.

From revision 0014 the stored vectors hold the words SQLite's unicode61 tokenizer cuts
(:mod:`hermes_store.search.unicode61`), and the same sanitised query as on SQLite is read
with FTS5's grammar into one ``tsquery`` bound as a parameter
(:mod:`hermes_store.search.fts5_query`), so word search finds what FTS5 finds. A
database at 0011–0013 still holds PostgreSQL's own ``simple`` vectors: its word queries
go through ``phraseto_tsquery`` per term (:func:`.legacy_tsquery.tsquery_sql`) until a search sees the
database at 0014 (:func:`.capabilities.has_unicode61_vectors`).

Every index covers the same text as SQLite's FTS5 tables:
``content || ' ' || tool_name || ' ' || tool_calls``. Revision 0012 stores its ``tsvector``
in ``messages.search_vector`` (GIN-indexed), so matching and ranking read the stored
vector and only the page returned pays for ``ts_headline``. Substring terms go to the
``pg_trgm`` index; short CJK terms require their adjacent CJK pairs from the GIN index
over the stored ``messages.cjk_grams``, so no search kind has to scan ``messages``. Both kinds look
at a window of the newest message ids first, so a search reads about a page's worth of
rows, not every match (``docs/search.md``, "best first" on PostgreSQL).

A database still at 0011 (this release runs on it until the deploy's upgrade, see
:data:`~hermes_store.schema.revisions.OLDEST_RUNNABLE_REVISION`) has neither object: word
search then reads 0011's expression index over the same ``to_tsvector`` and short CJK
terms are checked without the gram index — the same hits, at 0011's speed — until a
search sees the database at 0012 (:func:`.capabilities.has_search_objects`).

The package's modules, one job each: :mod:`.capabilities` (what the database's revision
offers), :mod:`.statements` (what every statement shares), :mod:`.words` and
:mod:`.legacy_tsquery` (word search), :mod:`.substrings`, :mod:`.substring_condition` and
:mod:`.grams` (substring and CJK search).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import orm

from hermes_store.search.filters import SearchFilters
from hermes_store.search.order import SearchOrder
from hermes_store.search.plan import SearchPlan
from hermes_store.search.postgres.substrings import substring_hits
from hermes_store.search.postgres.words import word_hits


def find_hits(
    db: orm.Session,
    plan: SearchPlan,
    filters: SearchFilters,
    limit: int,
    offset: int,
    order: SearchOrder = "rank",
) -> list[dict[str, Any]]:
    """The matching messages (without context) for ``plan`` on PostgreSQL, in ``order``."""
    params: dict[str, Any] = {"limit": limit, "offset": offset}
    if plan.kind == "fts" and plan.match:
        return word_hits(db, plan.match, filters, limit, offset, order)
    return substring_hits(db, plan, filters, params, order)
