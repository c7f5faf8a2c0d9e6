"""Substring and CJK search on PostgreSQL: newest hits first, from windows of message ids
that the ``pg_trgm`` and CJK gram indexes (or a walk of the newest rows) answer."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from sqlalchemy import orm

from hermes_store.db.execution import fetch_dicts
from hermes_store.schema.revisions import BUCKETED_INDEXES_REVISION
from hermes_store.search.cjk import is_cjk_codepoint
from hermes_store.search.filters import SearchFilters
from hermes_store.search.id_buckets import (
    ID_BUCKET_BITS,
    MAX_BUCKET_ARMS,
    WINDOW_BOUNDS,
    bucket_arms,
    oldest_bucket_floor,
    split_by_bucket,
    splits_by_bucket,
)
from hermes_store.search.order import SearchOrder
from hermes_store.search.plan import SearchPlan
from hermes_store.search.postgres.capabilities import (
    STORED_CJK_GRAMS,
    cjk_grams_source,
    grams_hold_ascii_trigrams,
    reaches,
)
from hermes_store.search.postgres.grams import cjk_grams_of, lift_trigrams, required_cjk_grams
from hermes_store.search.postgres.statements import (
    PAGE_COLUMNS,
    filtered_source,
    newest_id_with_search_memory,
)
from hermes_store.search.postgres.substring_condition import substring_condition

SNIPPET_CHARS = 120

WALKED_SUBSTRING_WINDOW = 2048
"""A substring search one index key would answer first walks this many newest ids row by row."""
STORED_GRAMS_CHECKED = f"COALESCE({STORED_CJK_GRAMS}, '{{}}'::text[])"
"""The stored grams in a form no index serves: tested on each row a walk reads."""
FIRST_SUBSTRING_WINDOW = 8192
"""Substring search first looks among this many newest message ids (see :func:`substring_hits`)."""
SECOND_SUBSTRING_WINDOW = 8 * FIRST_SUBSTRING_WINDOW
"""The next window of a search its CJK grams narrow, when the first predicts it fills the page."""


def substring_hits(
    db: orm.Session,
    plan: SearchPlan,
    filters: SearchFilters,
    params: dict[str, Any],
    order: SearchOrder = "rank",
) -> list[dict[str, Any]]:
    """Like/trigram hits, newest first: the newest window of ids, then the rest (in time
    order instead when ``order`` asks for it: see :data:`SUBSTRING_ORDER_BY`).

    Hits are ordered by id, so the newest window of :data:`FIRST_SUBSTRING_WINDOW` ids is
    searched first; when it holds fewer than ``offset + limit`` hits, every older message
    is searched for the rest. A frequent term is answered from the newest rows (the
    indexes would hand back tens of thousands of candidates); a rare one from the
    candidates the indexes find. Each query bounds the primary key, so the planner can
    combine it with the trigram and gram indexes (a ``BitmapAnd``) or walk the key
    backwards, whichever reads less. The planner often misjudges how many candidates
    ``pg_trgm`` returns, and then reads every candidate's row for each window (filtering
    the id after), so more windows of the same query would only repeat that work.

    A search the CJK gram index narrows runs its bounded windows differently: their gram
    condition and id range leave few candidates (a few hundred in the newest window at a
    million messages), so every other term is checked on them rather than looked up in
    ``pg_trgm`` (one lookup of a common word costs 30-50 ms there). And when the newest
    window's hits predict that :data:`SECOND_SUBSTRING_WINDOW` more ids hold the rest of
    the page, those are searched before everything older: ``the 记忆`` has 18 hits in the
    newest window, and the rest of the store would check all 21,711 messages holding
    记忆 (143 ms) to find the other two. Before any of that, a search one index key
    would answer may walk the newest rows (:func:`_newest_hits`).
    """
    newest = newest_id_with_search_memory(db)
    if newest is None:
        return []
    grams = _gram_use(db, plan, int(newest))
    condition, terms = substring_condition(
        plan,
        params,
        grams_source=grams.source,
        ascii_trigrams_in_grams=grams.with_trigrams,
        grams_of=grams.grams_of,
    )
    if not terms:
        return []
    source, where = filtered_source(filters, params)
    if order != "rank":
        # Every hit is read, looked up in the indexes by the form of the condition that
        # reads the whole store (a message's timestamp need not follow its id, so no
        # window of ids holds the first hits in time).
        need = params["offset"] + params["limit"]
        bounds = {"floor": 0, "ceiling": int(newest), "need": need}
        ordered_by = SUBSTRING_ORDER_BY[order]
        found = _substring_page(db, source, condition, where, {**params, **bounds}, None, ordered_by)
        return _with_snippets(found[params["offset"] :], plan, terms[0])
    windows = _windows_of(db, plan, params, grams, source, condition, where)
    hits = _newest_hits(windows, plan, params, grams, int(newest))
    return _with_snippets(hits[params["offset"] : windows.wanted], plan, terms[0])


class _GramUse(NamedTuple):
    """How a substring search uses the CJK gram index."""

    source: str | None
    """The stored grams column or the indexed expression; ``None``: no gram condition."""
    bucketed: bool
    """Whether the stored grams are keyed by id bucket in a store that reaches enough buckets."""
    grams_of: Callable[[str], list[str]]
    """What gives a term's grams."""
    narrowed: bool
    """Whether some required term is looked up by its grams."""
    with_trigrams: bool
    """Whether the stored grams hold ASCII trigrams too (revision 0016)."""


def _gram_use(db: orm.Session, plan: SearchPlan, newest: int) -> _GramUse:
    """How the gram index serves ``plan`` in a store whose newest message id is ``newest``."""
    grams_source = cjk_grams_source(db)
    # With the stored grams keyed by id bucket (revision 0018) in a store that reaches
    # enough buckets, a CJK term pg_trgm could serve is looked up by its grams too: the
    # gram index reads a window's buckets, pg_trgm's posting list the whole store.
    bucketed = (
        grams_source == STORED_CJK_GRAMS
        and splits_by_bucket(newest)
        and reaches(db, BUCKETED_INDEXES_REVISION)
    )
    grams_of = cjk_grams_of if bucketed else required_cjk_grams
    narrowed = grams_source is not None and any(
        grams_of(term) for group in plan.groups for term in group.required
    )
    # Asked only when a gram condition is written: a database not yet at 0016 costs a
    # look at its revision per search, which other substring searches need not pay.
    with_trigrams = narrowed and grams_source == STORED_CJK_GRAMS and grams_hold_ascii_trigrams(db)
    return _GramUse(grams_source, bucketed, grams_of, narrowed, with_trigrams)


@dataclass
class _Windows:
    """The windows of ids one substring search reads, newest first, and the hits they held."""

    db: orm.Session
    source: str
    where: str
    condition: str
    params: dict[str, Any]
    checked: str
    """The bounded windows' form of a narrowed search's condition (else ``condition``)."""
    checked_params: dict[str, Any]
    by_bucket: bool
    """Whether a window the gram index answers names its id buckets (revision 0018)."""
    wanted: int
    hits: list[dict[str, Any]] = field(default_factory=list)

    def read(self, ceiling: int, floor: int, bounded_form: bool) -> int:
        """Add the hits among the ids in ``(floor, ceiling]`` (the condition in its bounded
        windows' form or not), as many as the page still needs; returns ``floor``."""
        sql_condition, sql_params = (
            (self.checked, self.checked_params) if bounded_form else (self.condition, self.params)
        )
        arms = bucket_arms(floor, ceiling) if self.by_bucket and bounded_form else None
        return self.read_with(sql_condition, sql_params, ceiling, floor, arms)

    def read_with(
        self,
        condition: str,
        params: dict[str, Any],
        ceiling: int,
        floor: int,
        arms: list[tuple[int, int, int]] | None = None,
    ) -> int:
        """Add the hits of ``condition`` among the ids in ``(floor, ceiling]``; returns ``floor``."""
        bounds = {"floor": floor, "ceiling": ceiling, "need": self.wanted - len(self.hits)}
        self.hits += _substring_page(self.db, self.source, condition, self.where, {**params, **bounds}, arms)
        return floor


def _windows_of(
    db: orm.Session,
    plan: SearchPlan,
    params: dict[str, Any],
    grams: _GramUse,
    source: str,
    condition: str,
    where: str,
) -> _Windows:
    """The windows of a relevance-ordered search, none read yet."""
    checked, checked_params = condition, params
    if grams.narrowed:
        checked, checked_params = _checked_form(
            plan, params, grams.source, grams.with_trigrams, grams.grams_of
        )
    wanted = params["offset"] + params["limit"]
    by_bucket = grams.narrowed and grams.bucketed
    return _Windows(db, source, where, condition, params, checked, checked_params, by_bucket, wanted)


def _newest_hits(
    windows: _Windows, plan: SearchPlan, params: dict[str, Any], grams: _GramUse, newest: int
) -> list[dict[str, Any]]:
    """The first ``windows.wanted`` hits, newest first: a walk of the newest ids when one
    index key would answer, the rest of the first window, then older and wider ones.

    A search that one index key would answer (:func:`_looked_up_by_one_key`) first walks
    the newest :data:`WALKED_SUBSTRING_WINDOW` ids by the primary key, newest first,
    testing each row's stored grams (no index) until the page is full: GIN hands over a
    key's whole posting list whatever the window (37,157 entries, 4.7 ms of a 6.4 ms
    window for 如果 at a million messages; ten times that at ten million), while the walk
    costs about 2.6 µs a row whatever the store holds and stops at the page's last hit
    (907 rows, 2.3 ms). A rarer term, which the walk does not fill, then costs the walk
    plus the gram index's short posting lists. Only a containment of one gram is walked:
    GIN intersects several (``them 那个`` asks for 那个, ``the`` and ``hem``) by skipping
    through their posting lists, 143 candidates in 0.5 ms over the whole store, where a
    walk that rarely fills costs 4 ms.
    """
    wanted = windows.wanted
    floor = newest
    if grams.source == STORED_CJK_GRAMS and _looked_up_by_one_key(plan, grams.with_trigrams):
        walked, walked_params = _checked_form(
            plan, params, STORED_GRAMS_CHECKED, grams.with_trigrams, cjk_grams_of
        )
        floor = windows.read_with(walked, walked_params, newest, max(floor - WALKED_SUBSTRING_WINDOW, 0))
    rest_of_first = FIRST_SUBSTRING_WINDOW - (newest - floor)
    if len(windows.hits) < wanted and floor > 0 and rest_of_first > 0:
        # The rest of the first window (all of it when nothing was walked).
        floor = windows.read(floor, max(floor - rest_of_first, 0), grams.narrowed)
    if grams.narrowed and floor > 0 and _next_window_fills(len(windows.hits), wanted):
        floor = windows.read(floor, max(floor - SECOND_SUBSTRING_WINDOW, 0), True)
    # Older ids a bucket, then two, four and eight at a time: each window reads the
    # candidates of its own buckets, and stops the search once the page is full. The
    # first takes two when less than half a bucket lies below the windows so far.
    buckets = 1 if floor & ((1 << ID_BUCKET_BITS) - 1) >= 1 << (ID_BUCKET_BITS - 1) else 2
    while windows.by_bucket and len(windows.hits) < wanted and floor > 0 and buckets <= MAX_BUCKET_ARMS:
        floor = windows.read(floor, oldest_bucket_floor(floor, buckets), True)
        buckets *= 2
    if len(windows.hits) < wanted and floor > 0:
        windows.read(floor, 0, False)
    return windows.hits


SUBSTRING_ORDER_BY: dict[SearchOrder, str] = {
    "rank": "m.id DESC",
    "newest": "m.timestamp DESC, m.id DESC",
    "oldest": "m.timestamp ASC, m.id DESC",
}
"""Each order's ``ORDER BY`` on the substring path: newest id first, or by timestamp with
that order for ties (as on SQLite)."""


def _with_snippets(page: list[dict[str, Any]], plan: SearchPlan, first_term: str) -> list[dict[str, Any]]:
    """``page`` with each hit's content (read as ``snippet``) cut to its snippet."""
    for hit in page:
        hit["snippet"] = substring_snippet(hit["snippet"], first_term, marked=plan.kind == "trigram")
    return page


def _checked_form(
    plan: SearchPlan,
    params: dict[str, Any],
    grams_source: str | None,
    with_trigrams: bool,
    grams_of: Callable[[str], list[str]] | None = None,
) -> tuple[str, dict[str, Any]]:
    """The plan's condition with every term checked beside its gram condition, and its own
    copy of ``params`` (see :func:`.substring_condition.substring_condition`)."""
    own_params = dict(params)
    condition, _ = substring_condition(
        plan,
        own_params,
        grams_source=grams_source,
        checked_beside_grams=True,
        ascii_trigrams_in_grams=with_trigrams,
        grams_of=grams_of,
    )
    return condition, own_params


def _looked_up_by_one_key(plan: SearchPlan, with_trigrams: bool) -> bool:
    """Whether each group is looked up by one index key: a gram containment of exactly one
    gram (the ASCII trigrams lifted into it counted, see :func:`.grams.lift_trigrams`), or a
    lone three-character CJK term (one ``pg_trgm`` trigram)."""
    for group in plan.groups:
        grams = {term: required_cjk_grams(term) for term in group.required}
        if not any(grams.values()):
            (term, *others) = group.required or ("",)
            if others or len(term) != 3 or not all(is_cjk_codepoint(ord(char)) for char in term):
                return False
            continue
        if with_trigrams:
            lift_trigrams(group.required, grams)
        if len({gram for term_grams in grams.values() for gram in term_grams}) != 1:
            return False
    return True


def _next_window_fills(found: int, wanted: int) -> bool:
    """Whether the second window, at the first window's hit rate, holds the rest of the page."""
    return (
        0 < found < wanted and found * (SECOND_SUBSTRING_WINDOW // FIRST_SUBSTRING_WINDOW) >= wanted - found
    )


def _substring_page(
    db: orm.Session,
    source: str,
    condition: str,
    where: str,
    params: dict[str, Any],
    arms: list[tuple[int, int, int]] | None = None,
    ordered_by: str = SUBSTRING_ORDER_BY["rank"],
) -> list[dict[str, Any]]:
    def newest_hits(bounds: str) -> str:
        return f"""
        SELECT m.id FROM {source}
        WHERE {condition} AND {bounds} {where}
        ORDER BY {ordered_by}
        LIMIT :need"""

    found = newest_hits(WINDOW_BOUNDS)
    if arms:
        found, by_arm = split_by_bucket(arms, newest_hits, "id", "ORDER BY id DESC LIMIT :need")
        params = {**params, **by_arm}
    sql = f"""
    WITH hits AS ({found})
    SELECT {PAGE_COLUMNS.format(snippet="m.content")}
    FROM hits JOIN messages m ON m.id = hits.id JOIN sessions s ON s.id = m.session_id
    ORDER BY {ordered_by}
    """
    return fetch_dicts(db, sql, params, content_keys=("snippet",))


def substring_snippet(content: Any, term: str, marked: bool) -> str | None:
    """A 120-character window of ``content`` around ``term`` (case-insensitive).

    ``marked`` wraps the match in ``>>>``/``<<<`` as FTS5's trigram snippet does; the
    plain LIKE path leaves it unmarked, as on SQLite.
    """
    if not isinstance(content, str):
        return None
    position = content.lower().find(term.lower())
    if position < 0:
        return content[:SNIPPET_CHARS]
    start = max(0, position - 40)
    window = content[start : start + SNIPPET_CHARS]
    if not marked:
        return window
    local = position - start
    end = local + len(term)
    return window[:local] + ">>>" + window[local:end] + "<<<" + window[end:]
