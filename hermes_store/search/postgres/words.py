"""Word search on PostgreSQL: the stored ``tsvector`` ranked within windows of the newest
message ids, widened only until the page is full (``docs/search.md``, "best first" on
PostgreSQL)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import orm

from hermes_store.db.execution import fetch_dicts, fetch_tuples
from hermes_store.schema.indexed_text import INDEXED_TEXT
from hermes_store.schema.revisions import BUCKETED_INDEXES_REVISION, WORD_PAIRS_REVISION
from hermes_store.search.filters import SearchFilters
from hermes_store.search.fts5_query import parse_word_query
from hermes_store.search.id_buckets import (
    ID_BUCKET_BITS,
    WINDOW_BOUNDS,
    bucket_arms,
    split_by_bucket,
    splits_by_bucket,
)
from hermes_store.search.order import SearchOrder
from hermes_store.search.postgres.capabilities import (
    COMPUTED_TSVECTOR,
    STORED_TSVECTOR,
    has_search_objects,
    has_unicode61_vectors,
    reaches,
)
from hermes_store.search.postgres.legacy_tsquery import tsquery_sql
from hermes_store.search.postgres.statements import (
    PAGE_COLUMNS,
    filtered_source,
    newest_id_with_search_memory,
)

HEADLINE_OPTIONS = (
    "StartSel=>>>, StopSel=<<<, MaxWords=40, MinWords=15, ShortWord=0, MaxFragments=1, FragmentDelimiter=..."
)

FIRST_WORD_WINDOW = 2048
"""Word search first ranks the matches among this many newest message ids."""
WINDOW_GROWTH = 8
WALKED_ROW_COST = 17
"""Checking one row's stored vector costs about as much as reading this many entries of a
GIN posting list (1.7 µs against 0.1 µs at a million messages): an older slice is walked
when the index would read more than this many entries for each of its rows."""
WALKED_ROW_COST_BESIDE_PAIRS = 0.5
"""The same for a slice whose candidates come from two or more word pairs: the planner
multiplies the pairs' frequencies into an estimate of a dozen rows, so it does not
intersect the candidates with the slice's ids and reads every candidate's row in the
store (3 µs each; 5,067 for ``"stoukas beamathist spind"`` at a million messages, 16 ms, to
keep 25). One pair is estimated from its statistics, and intersected like a word."""
FEW_PAIRED_CANDIDATES = 2000
"""At most this many matches predicted in the whole store: a phrase looks up every older id
at once."""


def word_hits(
    db: orm.Session,
    match: str,
    filters: SearchFilters,
    limit: int,
    offset: int,
    order: SearchOrder = "rank",
) -> list[dict[str, Any]]:
    """Word hits, best first among the newest matches, in two steps (in time order
    instead when ``order`` asks for it: :func:`_hits_by_time`).

    Ranking reads every ranked match's ``tsvector``, so ranking all matches of a common
    word would cost what the store holds. Instead the matches among the newest
    :data:`FIRST_WORD_WINDOW` ids are ranked (each vector checked, no index); when they
    are fewer than ``offset + limit``, the next older slice of ids is ranked too, sized by
    the rate of matches so far (:func:`_next_word_window`), until the slices hold enough or
    cover every message. The newest slice's vectors are checked one by one; for the older
    ones the GIN index finds the matches and the primary key bounds the slice (a
    ``BitmapAnd``) — unless the matches so far predict that the index would read more
    posting-list entries than :data:`WALKED_ROW_COST` times the slice's rows (a common
    word in a large store): then the slice is checked row by row too, at a cost that
    does not grow with the store. So a search reads the rows of its slices, not of every
    match. Then only the page's rows are read, given their snippets and joined to their
    sessions. ``docs/search.md`` ("best first" on PostgreSQL) says what
    the order means; a caller asking for more hits than exist gets every one.
    """
    params: dict[str, Any] = {}
    parsed = _word_query(db, match, params)
    if parsed is None:
        return []
    query, pairs = parsed
    vector = STORED_TSVECTOR if has_search_objects(db) else COMPUTED_TSVECTOR
    source, where = filtered_source(filters, params)
    wanted = offset + limit
    newest = newest_id_with_search_memory(db)
    if newest is None:
        return []
    if order != "rank":
        page = _hits_by_time(db, vector, query, source, where, params, order, wanted)[offset:]
        return _word_page(db, query, params, page) if page else []
    ranking = _RankedSlice(vector, query, source, where)
    statements = _slice_statements(db, ranking, pairs, params, int(newest))
    rows = _ranked_in_slices(db, statements, params, int(newest), wanted)
    rows.sort(key=lambda row: (-float(row[1]), -int(row[0])))
    page = rows[offset : offset + limit]
    if not page:
        return []
    return _word_page(db, query, params, page)


def _word_query(db: orm.Session, match: str, params: dict[str, Any]) -> tuple[str, list[str]] | None:
    """The tsquery expression of ``match`` (its values bound in ``params``) and the word
    pairs of its phrases, or ``None`` when it matches nothing. A store whose vectors
    follow FTS5's unicode61 tokens gets the parsed query; an older one the legacy form."""
    if has_unicode61_vectors(db):
        parsed = parse_word_query(match)
        if parsed is None:
            return None
        params["q"], pairs = parsed
        return "CAST(:q AS tsquery)", pairs
    legacy = tsquery_sql(match, params)
    if legacy is None:
        return None
    return legacy, []


@dataclass(frozen=True)
class _RankedSlice:
    """What every ranking statement of one word search shares: the vector it ranks, the
    tsquery, the filtered source and its extra conditions."""

    vector: str
    query: str
    source: str
    where: str

    def statement(
        self, matched: str, newest_slice: bool, narrowed_by: str = "", bounds: str = WINDOW_BOUNDS
    ) -> str:
        """The best ``:wanted`` matches of one slice of ids, testing ``matched`` (the vector
        in an indexed or unindexed form) after the ``narrowed_by`` conditions."""
        # The tsquery is written out where it is used (not read from a CTE) so the planner
        # folds it to a constant and estimates its matches from the GIN statistics. The
        # newest slice needs no upper bound (nothing is newer); one would make the key look
        # selective, and the planner would walk it rather than use a computed vector's index.
        if newest_slice:
            bounds = "m.id > :floor"
        return f"""
            SELECT m.id, ts_rank({self.vector}, {self.query}) AS score
            FROM {self.source}
            WHERE {narrowed_by}{matched} @@ {self.query} AND {bounds} {self.where}
            ORDER BY score DESC, m.id DESC
            LIMIT :wanted
        """


@dataclass(frozen=True)
class _SliceStatements:
    """The statements a ranked word search chooses among, slice by slice, and what the
    choice of the next older slice weighs."""

    checked: str
    """The newest slice: every row's vector checked, no index."""
    looked_up: str
    """An older slice whose matches an index finds, in one statement."""
    walked: str
    """An older slice checked row by row, like the newest."""
    looked_up_between: Callable[[str], str]
    """The lookup of an older slice within the given bounds (one arm of an id bucket)."""
    by_pairs: bool
    """Whether the lookups find their candidates in the word-pair index."""
    by_bucket: bool
    """Whether an older slice's lookup is split by id bucket."""
    row_cost: float | None
    """What a walked row costs in posting-list entries; ``None``: never walk."""


def _slice_statements(
    db: orm.Session, ranking: _RankedSlice, pairs: Sequence[str], params: dict[str, Any], newest: int
) -> _SliceStatements:
    """The statements of each kind of slice, and how the next older slice is weighed."""
    vector = ranking.vector
    # The newest window's vectors are checked one by one (a COALESCE no index is built
    # on): 2,048 rows cost 1-5 ms, where the planner, misled by GIN's estimates, would
    # expand a prefix through the index (``drea*``: 75,456 entries, 67 ms at a million
    # messages) to intersect it with the window. Older slices are looked up in the index:
    # checking 14,336 rows' vectors costs 27 ms, more than most lookups (measured with a
    # phrase's slices checked up to 65,536 ids: the costliest phrase took 120-160 ms,
    # against 92-97 ms looked up). A computed vector (a store before revision 0012) would
    # cost a to_tsvector per row instead: it keeps its index.
    unindexed = f"COALESCE({vector}, ''::tsvector)" if vector == STORED_TSVECTOR else vector
    checked = ranking.statement(unindexed, True)
    by_pairs = bool(pairs) and vector == STORED_TSVECTOR and reaches(db, WORD_PAIRS_REVISION)
    # A phrase's older slices find their candidates in the word-pair index (revision
    # 0017) and only check the vector on them: its words' posting lists would hand back
    # every message holding the words, side by side or not.
    looked_up_by, narrowed_by = (
        (unindexed, _word_pairs_condition(pairs, params) + " AND ") if by_pairs else (vector, "")
    )
    looked_up = ranking.statement(looked_up_by, False, narrowed_by)
    by_bucket = (
        vector == STORED_TSVECTOR and splits_by_bucket(newest) and reaches(db, BUCKETED_INDEXES_REVISION)
    )
    walked = ranking.statement(unindexed, False)
    # A walked row costs this many posting-list entries; a computed vector is never walked
    # (each row would pay a to_tsvector).
    row_cost: float | None = None
    if vector == STORED_TSVECTOR:
        row_cost = WALKED_ROW_COST_BESIDE_PAIRS if by_pairs and len(pairs) > 1 else WALKED_ROW_COST
    return _SliceStatements(
        checked=checked,
        looked_up=looked_up,
        walked=walked,
        looked_up_between=lambda bounds: ranking.statement(looked_up_by, False, narrowed_by, bounds),
        by_pairs=by_pairs,
        by_bucket=by_bucket,
        row_cost=row_cost,
    )


def _ranked_in_slices(
    db: orm.Session, statements: _SliceStatements, params: dict[str, Any], newest: int, wanted: int
) -> list[tuple[Any, ...]]:
    """The best ``wanted`` matches of each slice of ids, newest slice first, as ``(id,
    score)``, until the slices hold ``wanted`` or cover every message (unsorted).

    Each window is the slice of ids older than the last; a row's score does not depend on
    the other rows, so ranking the slices' best and merging them ranks their union.
    """
    rows: list[tuple[Any, ...]] = []
    sql, ceiling, window = statements.checked, newest, FIRST_WORD_WINDOW
    by_arm: dict[str, Any] = {}
    while True:
        floor = ceiling - window
        rows += fetch_tuples(
            db, sql, {**params, **by_arm, "floor": floor, "ceiling": ceiling, "wanted": wanted}
        )
        if len(rows) >= wanted or floor <= 0:
            return rows
        window, walk = _older_slice(
            newest, floor, len(rows), wanted, statements.row_cost, statements.by_pairs, statements.by_bucket
        )
        sql, ceiling = (statements.walked if walk else statements.looked_up), floor
        arms = bucket_arms(max(ceiling - window, 0), ceiling) if statements.by_bucket and not walk else None
        if arms:
            # The slice's lookup, one arm per id bucket (revision 0018): each reads its
            # own bucket's posting-list entries, not the whole store's.
            sql, by_arm = split_by_bucket(
                arms,
                statements.looked_up_between,
                "id, score",
                "ORDER BY score DESC, id DESC LIMIT :wanted",
            )


def _hits_by_time(
    db: orm.Session,
    vector: str,
    query: str,
    source: str,
    where: str,
    params: dict[str, Any],
    order: SearchOrder,
    wanted: int,
) -> list[tuple[Any, ...]]:
    """The first ``wanted`` matches in time ``order`` (``newest``/``oldest``), best rank
    first among equal timestamps, as ``(id, score)``.

    Time order is the order of ``timestamp``, which no index beside the words' holds, so
    every match is read (the GIN index names them): the cost grows with the matches, as
    on SQLite. The id windows of relevance order cannot stand in for it: a message's
    timestamp need not follow its id (a caller may give one; compaction keeps the
    originals'). Only the matches in the first ``wanted`` timestamps (ties kept) are
    ranked, so ``ts_rank`` reads a page's vectors, not every match's.
    """
    direction = "DESC" if order == "newest" else "ASC"
    sql = f"""
        WITH first_hits AS (
            SELECT m.id FROM {source}
            WHERE {vector} @@ {query} {where}
            ORDER BY m.timestamp {direction}
            FETCH FIRST (:wanted) ROWS WITH TIES
        )
        SELECT m.id, ts_rank({vector}, {query}) AS score, m.timestamp
        FROM first_hits JOIN messages m ON m.id = first_hits.id
    """
    rows = fetch_tuples(db, sql, {**params, "wanted": wanted})
    sign = -1 if order == "newest" else 1
    rows.sort(key=lambda row: (sign * float(row[2]), -float(row[1]), -int(row[0])))
    return [(row[0], row[1]) for row in rows[:wanted]]


WORD_PAIRS = f"hermes_word_pairs({STORED_TSVECTOR})"
"""Revision 0017's indexed expression: the hashes of a stored vector's adjacent word pairs."""
MAX_LOOKED_UP_PAIRS = 8
"""A long phrase asks the index for this many of its pairs, spread over it: each key of a
GIN containment is read, and a few pairs already leave few candidates to check."""


def _word_pairs_condition(pairs: Sequence[str], params: dict[str, Any]) -> str:
    """The containment that finds the messages holding every one of ``pairs`` (at most
    :data:`MAX_LOOKED_UP_PAIRS` of them) in ``idx_messages_word_pairs``; the values are
    bound, and ``hashtext`` of a bound value folds to a constant when the plan is made."""
    if len(pairs) > MAX_LOOKED_UP_PAIRS:
        step = (len(pairs) - 1) / (MAX_LOOKED_UP_PAIRS - 1)
        pairs = [pairs[round(i * step)] for i in range(MAX_LOOKED_UP_PAIRS)]
    names = [f"w{i}" for i in range(len(pairs))]
    params.update(zip(names, pairs, strict=True))
    hashes = ", ".join(f"hashtext(CAST(:{name} AS text))" for name in names)
    return f"{WORD_PAIRS} @> ARRAY[{hashes}]"


def _older_slice(
    newest: int,
    floor: int,
    found: int,
    wanted: int,
    row_cost: float | None,
    by_pairs: bool,
    by_bucket: bool = False,
) -> tuple[int, bool]:
    """The next older slice of a word search whose slices so far (the ids above ``floor``)
    held ``found`` of the ``wanted`` matches: how many ids it takes, and whether it is
    walked (each row's vector checked) rather than looked up in an index.

    GIN reads a key's whole posting list whatever the slice: at the match rate so far,
    about ``found / covered`` of every id the store holds — or, when the lookup names its
    id buckets (``by_bucket``, revision 0018), of every id in the buckets the slice
    crosses. A slice with fewer rows than that, each weighed at ``row_cost`` entries
    (``None``: never walk), costs less walked, and does not grow with the store. A phrase
    predicted to have at most :data:`FEW_PAIRED_CANDIDATES` matches in the store takes
    every older id at once: its pairs' candidates are read once, where widening slices
    would each pay for a bitmap of their keys (917,504 ids, 63 ms, for one candidate at
    ten million messages).
    """
    covered = newest - floor
    in_store = found * newest // covered
    few = by_pairs and in_store <= FEW_PAIRED_CANDIDATES
    window = floor if few else _next_word_window(covered, found, wanted)
    arms = bucket_arms(max(floor - window, 0), floor) if by_bucket else None
    read = min(newest, len(arms) << ID_BUCKET_BITS) if arms else newest
    return window, row_cost is not None and window * row_cost < found * read // covered


def _next_word_window(covered: int, found: int, wanted: int) -> int:
    """How many older ids the next word window takes, after ``covered`` ids held ``found``
    of the ``wanted`` matches.

    The ids covered grow to where the rate so far predicts ``wanted`` matches, with half as
    much again to spare, at least twofold and at most :data:`WINDOW_GROWTH`-fold: a phrase
    of common words rarely side by side (``"any does"``: 7 matches among the newest 131,072
    ids at a million messages) then reads the newest 561,000 ids, not the whole store.
    """
    predicted = covered * wanted * 3 // (2 * found) if found else covered * WINDOW_GROWTH
    return min(max(predicted, 2 * covered), WINDOW_GROWTH * covered) - covered


def _word_page(
    db: orm.Session, query: str, params: dict[str, Any], page: list[tuple[Any, ...]]
) -> list[dict[str, Any]]:
    order = {int(row[0]): index for index, row in enumerate(page)}
    headline = f"ts_headline('simple'::regconfig, {INDEXED_TEXT}, {query}, :headline)"
    sql = f"""
        SELECT {PAGE_COLUMNS.format(snippet=headline)}
        FROM messages m JOIN sessions s ON s.id = m.session_id
        WHERE m.id = ANY(CAST(:page_ids AS bigint[]))
    """
    rows = fetch_dicts(db, sql, {**params, "page_ids": list(order), "headline": HEADLINE_OPTIONS})
    return sorted(rows, key=lambda row: order[int(row["id"])])
