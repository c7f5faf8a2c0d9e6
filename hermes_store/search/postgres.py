"""Search on PostgreSQL: ``tsvector``/GIN for words, ``pg_trgm``/``ILIKE`` for CJK and substrings.

From revision 0014 the stored vectors hold the words SQLite's unicode61 tokenizer cuts
(:mod:`hermes_store.search.unicode61`), and the same sanitised query as on SQLite is read
with FTS5's grammar into one ``tsquery`` bound as a parameter
(:mod:`hermes_store.search.fts5_query`), so word search finds what FTS5 finds. A
database at 0011–0013 still holds PostgreSQL's own ``simple`` vectors: its word queries
go through ``phraseto_tsquery`` per term (:func:`tsquery_sql`) until a search sees the
database at 0014 (:func:`has_unicode61_vectors`).

Every index covers the same text as SQLite's FTS5 tables:
``content || ' ' || tool_name || ' ' || tool_calls``. Revision 0012 stores its ``tsvector``
in ``messages.search_vector`` (GIN-indexed), so matching and ranking read the stored
vector and only the page returned pays for ``ts_headline``. Substring terms go to the
``pg_trgm`` index; short CJK terms require their adjacent CJK pairs from
``idx_messages_cjk_grams``, so no search kind has to scan ``messages``. Both kinds look
at a window of the newest message ids first, so a search reads about a page's worth of
rows, not every match (``docs/search.md``, "best first" on PostgreSQL).

A database still at 0011 (this release runs on it until the deploy's upgrade, see
:data:`~hermes_store.schema.revisions.OLDEST_RUNNABLE_REVISION`) has neither object: word
search then reads 0011's expression index over the same ``to_tsvector`` and short CJK
terms are checked without the gram index — the same hits, at 0011's speed — until a
search sees the database at 0012 (:func:`has_search_objects`).
"""

from __future__ import annotations

import re
import weakref
from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import orm
from sqlalchemy.pool import Pool

from hermes_store.db.execution import connection_of, fetch_tuples
from hermes_store.repository.rows import fetch_dicts
from hermes_store.schema.indexed_text import INDEXED_TEXT
from hermes_store.schema.revisions import (
    ASCII_TRIGRAMS_REVISION,
    BUCKETED_INDEXES_REVISION,
    SEARCH_OBJECTS_REVISION,
    STORED_GRAMS_REVISION,
    UNICODE61_REVISION,
    WORD_PAIRS_REVISION,
    history,
)
from hermes_store.search.cjk import is_cjk_codepoint
from hermes_store.search.engine import SearchFilters
from hermes_store.search.fts5_query import parse_word_query
from hermes_store.search.id_buckets import (
    ID_BUCKET_BITS,
    MAX_BUCKET_ARMS,
    WINDOW_BOUNDS,
    bucket_arms,
    oldest_bucket_floor,
    split_by_bucket,
    splits_by_bucket,
)
from hermes_store.search.plan import MIN_TRIGRAM_TERM, SearchPlan, has_ascii_letter, like_pattern

STORED_TSVECTOR = "m.search_vector"
"""Revision 0012's generated column: ``to_tsvector('simple', INDEXED_TEXT)``, stored."""
COMPUTED_TSVECTOR = f"to_tsvector('simple'::regconfig, {INDEXED_TEXT})"
"""The same vector computed per row: the expression revision 0011's ``idx_messages_fts`` indexes."""
CJK_GRAMS = f"hermes_cjk_grams({INDEXED_TEXT})"
"""Revision 0012's indexed expression: every CJK character and adjacent pair of the text."""
STORED_CJK_GRAMS = "m.cjk_grams"
"""Revision 0015's column: the same grams, stored (NULL for a text without CJK); from
revision 0016 also the text's lower-cased ASCII trigrams (:func:`ascii_trigrams`)."""
HEADLINE_OPTIONS = (
    "StartSel=>>>, StopSel=<<<, MaxWords=40, MinWords=15, ShortWord=0, MaxFragments=1, FragmentDelimiter=..."
)
SNIPPET_CHARS = 120

# Pools of databases seen at a revision: a schema only moves forward under a running
# service, so once seen there it is never read again (one query per search until then).
_POOLS_AT: dict[str, weakref.WeakSet[Pool]] = {}


def _reaches(db: orm.Session, revision: str) -> bool:
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
    return _reaches(db, SEARCH_OBJECTS_REVISION)


def has_unicode61_vectors(db: orm.Session) -> bool:
    """Whether ``db``'s stored vectors hold unicode61 words (revision 0014 or later)."""
    return _reaches(db, UNICODE61_REVISION)


def cjk_grams_source(db: orm.Session) -> str | None:
    """What a gram condition reads in ``db``'s database: revision 0015's stored column,
    0012's indexed expression, or nothing (a database at 0011 has neither)."""
    if _reaches(db, STORED_GRAMS_REVISION):
        return STORED_CJK_GRAMS
    return CJK_GRAMS if has_search_objects(db) else None


def grams_hold_ascii_trigrams(db: orm.Session) -> bool:
    """Whether ``db``'s stored grams hold the ASCII trigrams of CJK messages (revision 0016)."""
    return _reaches(db, ASCII_TRIGRAMS_REVISION)


_TOKEN = re.compile(r'"[^"]*"\*?|\S+')
_OPERATORS = ("AND", "OR", "NOT")


def tsquery_sql(match: str, params: dict[str, Any]) -> str | None:
    """Translate a sanitised FTS5 query into a tsquery SQL expression over bound terms.

    Precedence follows FTS5: ``NOT`` (binary "and not") binds tighter than ``AND``
    (explicit or implicit), which binds tighter than ``OR``. Returns ``None`` when no
    term remains.
    """
    alternatives: list[str] = []
    clause: list[str] = []
    pending_not = False
    for token in _TOKEN.findall(match):
        if token in _OPERATORS:
            if token == "OR":
                if clause:
                    alternatives.append("(" + " && ".join(clause) + ")")
                clause = []
                pending_not = False
            elif token == "NOT":
                pending_not = True
            continue
        term = _term_sql(token, params)
        if term is None:
            continue
        clause.append(f"!!{term}" if pending_not else term)
        pending_not = False
    if clause:
        alternatives.append("(" + " && ".join(clause) + ")")
    if not alternatives:
        return None
    return "(" + " || ".join(alternatives) + ")"


def _term_sql(token: str, params: dict[str, Any]) -> str | None:
    prefix = token.endswith("*")
    body = token.rstrip("*")
    if body.startswith('"') and body.endswith('"') and len(body) >= 2:
        body = body[1:-1].replace('""', '"')
    if not body.strip():
        return None
    name = f"t{len(params)}"
    params[name] = body
    if prefix and re.fullmatch(r"\w+", body):
        return f"to_tsquery('simple'::regconfig, quote_literal(lower(:{name})) || ':*')"
    return f"phraseto_tsquery('simple'::regconfig, :{name})"


def _filters(filters: SearchFilters, params: dict[str, Any]) -> tuple[str, str]:
    """The ``FROM`` clause the filters need and their conditions.

    ``sessions`` is joined while finding matches only when a source filter needs it:
    hashing tens of thousands of sessions for every search costs more than the search.
    The rows of the returned page are joined to their sessions afterwards.
    """
    where, extra = filters.sql()
    params.update(extra)
    needs_sessions = filters.sources is not None or bool(filters.exclude_sources)
    source = "messages m JOIN sessions s ON s.id = m.session_id" if needs_sessions else "messages m"
    return source, where


_PAGE_COLUMNS = (
    "m.id, m.session_id, m.role, {snippet} AS snippet, m.timestamp, m.tool_name, "
    "s.source, s.model, s.started_at AS session_started"
)


def find_hits(
    db: orm.Session, plan: SearchPlan, filters: SearchFilters, limit: int, offset: int
) -> list[dict[str, Any]]:
    """The matching messages (without context) for ``plan`` on PostgreSQL."""
    params: dict[str, Any] = {"limit": limit, "offset": offset}
    if plan.kind == "fts" and plan.match:
        return _word_hits(db, plan.match, filters, limit, offset)
    return _substring_hits(db, plan, filters, params)


SEARCH_WORK_MEM = "32MB"
"""``work_mem`` of a search's transaction. With the server's default (4 MB) the bitmap of a
common trigram (251,159 rows of a million for ``word``) turns lossy, and intersecting it
with the CJK gram index's bitmap then rechecks every candidate row of the lossy pages —
reading them and recomputing the gram function: 4–7 s for ``word 这个`` and ``roth 如果``
at a million messages, against 130 ms with exact bitmaps (16 MB was enough there; the
bitmaps grow with the store). It is a limit per plan node of this one transaction, not
memory held."""


def _newest_id_with_search_memory(db: orm.Session) -> Any:
    """The newest message id; the same round trip gives the search's transaction
    :data:`SEARCH_WORK_MEM` and no parallel workers (``set_config(…, true)``: until the
    transaction ends). A search's statements read a few thousand rows at most; starting
    workers for one cost 35 ms at ten million messages (a lookup of all older ids that
    found one candidate in 0.2 ms took 38 ms, most of it the workers' start)."""
    sql = (
        "SELECT max(id), set_config('work_mem', :work_mem, true),"
        " set_config('max_parallel_workers_per_gather', '0', true) FROM messages"
    )
    return fetch_tuples(db, sql, {"work_mem": SEARCH_WORK_MEM})[0][0]


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


def _word_hits(
    db: orm.Session, match: str, filters: SearchFilters, limit: int, offset: int
) -> list[dict[str, Any]]:
    """Word hits, best first among the newest matches, in two steps.

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
    pairs: list[str] = []
    if has_unicode61_vectors(db):
        parsed = parse_word_query(match)
        if parsed is None:
            return []
        params["q"], pairs = parsed
        query = "CAST(:q AS tsquery)"
    else:
        legacy = tsquery_sql(match, params)
        if legacy is None:
            return []
        query = legacy
    vector = STORED_TSVECTOR if has_search_objects(db) else COMPUTED_TSVECTOR
    source, where = _filters(filters, params)
    wanted = offset + limit
    newest = _newest_id_with_search_memory(db)
    if newest is None:
        return []

    def ranked(matched: str, newest_slice: bool, narrowed_by: str = "", bounds: str = WINDOW_BOUNDS) -> str:
        # The tsquery is written out where it is used (not read from a CTE) so the planner
        # folds it to a constant and estimates its matches from the GIN statistics. The
        # newest slice needs no upper bound (nothing is newer); one would make the key look
        # selective, and the planner would walk it rather than use a computed vector's index.
        if newest_slice:
            bounds = "m.id > :floor"
        return f"""
            SELECT m.id, ts_rank({vector}, {query}) AS score
            FROM {source}
            WHERE {narrowed_by}{matched} @@ {query} AND {bounds} {where}
            ORDER BY score DESC, m.id DESC
            LIMIT :wanted
        """

    # The newest window's vectors are checked one by one (a COALESCE no index is built
    # on): 2,048 rows cost 1-5 ms, where the planner, misled by GIN's estimates, would
    # expand a prefix through the index (``drea*``: 75,456 entries, 67 ms at a million
    # messages) to intersect it with the window. Older slices are looked up in the index:
    # checking 14,336 rows' vectors costs 27 ms, more than most lookups (measured with a
    # phrase's slices checked up to 65,536 ids: the costliest phrase took 120-160 ms,
    # against 92-97 ms looked up). A computed vector (a store before revision 0012) would
    # cost a to_tsvector per row instead: it keeps its index.
    unindexed = f"COALESCE({vector}, ''::tsvector)" if vector == STORED_TSVECTOR else vector
    checked = ranked(unindexed, True)
    looked_up_by_pairs = bool(pairs) and vector == STORED_TSVECTOR and _reaches(db, WORD_PAIRS_REVISION)
    # A phrase's older slices find their candidates in the word-pair index (revision
    # 0017) and only check the vector on them: its words' posting lists would hand back
    # every message holding the words, side by side or not.
    looked_up_by, narrowed_by = (
        (unindexed, _word_pairs_condition(pairs, params) + " AND ") if looked_up_by_pairs else (vector, "")
    )
    looked_up = ranked(looked_up_by, False, narrowed_by)
    by_bucket = (
        vector == STORED_TSVECTOR
        and splits_by_bucket(int(newest))
        and _reaches(db, BUCKETED_INDEXES_REVISION)
    )
    walked = ranked(unindexed, False)
    # A walked row costs this many posting-list entries; a computed vector is never walked
    # (each row would pay a to_tsvector).
    row_cost: float | None = None
    if vector == STORED_TSVECTOR:
        row_cost = WALKED_ROW_COST_BESIDE_PAIRS if looked_up_by_pairs and len(pairs) > 1 else WALKED_ROW_COST
    # Each window is the slice of ids older than the last; a row's score does not depend
    # on the other rows, so ranking the slices' best and merging them ranks their union.
    rows: list[tuple[Any, ...]] = []
    sql, ceiling, window = checked, int(newest), FIRST_WORD_WINDOW
    by_arm: dict[str, Any] = {}
    while True:
        floor = ceiling - window
        rows += fetch_tuples(
            db, sql, {**params, **by_arm, "floor": floor, "ceiling": ceiling, "wanted": wanted}
        )
        if len(rows) >= wanted or floor <= 0:
            break
        window, walk = _older_slice(
            int(newest), floor, len(rows), wanted, row_cost, looked_up_by_pairs, by_bucket
        )
        sql, ceiling = (walked if walk else looked_up), floor
        arms = bucket_arms(max(ceiling - window, 0), ceiling) if by_bucket and not walk else None
        if arms:
            # The slice's lookup, one arm per id bucket (revision 0018): each reads its
            # own bucket's posting-list entries, not the whole store's.
            sql, by_arm = split_by_bucket(
                arms,
                lambda bounds: ranked(looked_up_by, False, narrowed_by, bounds),
                "id, score",
                "ORDER BY score DESC, id DESC LIMIT :wanted",
            )
    rows.sort(key=lambda row: (-float(row[1]), -int(row[0])))
    page = rows[offset : offset + limit]
    if not page:
        return []
    return _word_page(db, query, params, page)


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
        SELECT {_PAGE_COLUMNS.format(snippet=headline)}
        FROM messages m JOIN sessions s ON s.id = m.session_id
        WHERE m.id = ANY(CAST(:page_ids AS bigint[]))
    """
    rows = fetch_dicts(db, sql, {**params, "page_ids": list(order), "headline": HEADLINE_OPTIONS})
    return sorted(rows, key=lambda row: order[int(row["id"])])


WALKED_SUBSTRING_WINDOW = 2048
"""A substring search one index key would answer first walks this many newest ids row by row."""
STORED_GRAMS_CHECKED = f"COALESCE({STORED_CJK_GRAMS}, '{{}}'::text[])"
"""The stored grams in a form no index serves: tested on each row a walk reads."""
FIRST_SUBSTRING_WINDOW = 8192
"""Substring search first looks among this many newest message ids (see :func:`_substring_hits`)."""
SECOND_SUBSTRING_WINDOW = 8 * FIRST_SUBSTRING_WINDOW
"""The next window of a search its CJK grams narrow, when the first predicts it fills the page."""


def _substring_hits(
    db: orm.Session, plan: SearchPlan, filters: SearchFilters, params: dict[str, Any]
) -> list[dict[str, Any]]:
    """Like/trigram hits, newest first: the newest window of ids, then the rest.

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
    记忆 (143 ms) to find the other two.

    Before any of that, a search that one index key would answer
    (:func:`_looked_up_by_one_key`) walks the newest :data:`WALKED_SUBSTRING_WINDOW` ids by
    the primary key, newest first, testing each row's stored grams (no index) until the
    page is full: GIN hands over a key's whole posting list whatever the window (37,157
    entries, 4.7 ms of a 6.4 ms window for 如果 at a million messages; ten times that at
    ten million), while the walk
    costs about 2.6 µs a row whatever the store holds and stops at the page's last hit
    (907 rows, 2.3 ms). A rarer term, which the walk does not fill, then costs the walk
    plus the gram index's short posting lists. Only a containment of one gram is walked:
    GIN intersects several (``them 那个`` asks for 那个, ``the`` and ``hem``) by skipping
    through their posting lists, 143 candidates in 0.5 ms over the whole store, where a
    walk that rarely fills costs 4 ms.
    """
    newest = _newest_id_with_search_memory(db)
    if newest is None:
        return []
    grams_source = cjk_grams_source(db)
    # With the stored grams keyed by id bucket (revision 0018) in a store that reaches
    # enough buckets, a CJK term pg_trgm could serve is looked up by its grams too: the
    # gram index reads a window's buckets, pg_trgm's posting list the whole store.
    bucketed = (
        grams_source == STORED_CJK_GRAMS
        and splits_by_bucket(int(newest))
        and _reaches(db, BUCKETED_INDEXES_REVISION)
    )
    grams_of = cjk_grams_of if bucketed else required_cjk_grams
    narrowed = grams_source is not None and any(
        grams_of(term) for group in plan.groups for term in group.required
    )
    # Asked only when a gram condition is written: a database not yet at 0016 costs a
    # look at its revision per search, which other substring searches need not pay.
    with_trigrams = narrowed and grams_source == STORED_CJK_GRAMS and grams_hold_ascii_trigrams(db)
    condition, terms = _substring_condition(
        plan, params, grams_source=grams_source, ascii_trigrams_in_grams=with_trigrams, grams_of=grams_of
    )
    if not terms:
        return []
    source, where = _filters(filters, params)
    # The bounded windows' form of a narrowed search (the others use ``condition`` only).
    checked, checked_params = condition, params
    if narrowed:
        checked, checked_params = _checked_form(plan, params, grams_source, with_trigrams, grams_of)
    wanted = params["offset"] + params["limit"]
    # A window the gram index answers names its id buckets (revision 0018).
    by_bucket = narrowed and bucketed

    def window(ceiling: int, floor: int, bounded_form: bool) -> tuple[list[dict[str, Any]], int]:
        sql_condition, sql_params = (checked, checked_params) if bounded_form else (condition, params)
        bounds = {"floor": floor, "ceiling": ceiling, "need": wanted - len(hits)}
        arms = bucket_arms(floor, ceiling) if by_bucket and bounded_form else None
        page = _substring_page(db, source, sql_condition, where, {**sql_params, **bounds}, arms)
        return page, floor

    hits: list[dict[str, Any]] = []
    floor = int(newest)
    if grams_source == STORED_CJK_GRAMS and _looked_up_by_one_key(plan, with_trigrams):
        walked, walked_params = _checked_form(plan, params, STORED_GRAMS_CHECKED, with_trigrams, cjk_grams_of)
        floor = max(floor - WALKED_SUBSTRING_WINDOW, 0)
        bounds = {"floor": floor, "ceiling": int(newest), "need": wanted}
        hits += _substring_page(db, source, walked, where, {**walked_params, **bounds})
    rest_of_first = FIRST_SUBSTRING_WINDOW - (int(newest) - floor)
    if len(hits) < wanted and floor > 0 and rest_of_first > 0:
        # The rest of the first window (all of it when nothing was walked).
        found, floor = window(floor, max(floor - rest_of_first, 0), narrowed)
        hits += found
    if narrowed and floor > 0 and _next_window_fills(len(hits), wanted):
        found, floor = window(floor, max(floor - SECOND_SUBSTRING_WINDOW, 0), True)
        hits += found
    # Older ids a bucket, then two, four and eight at a time: each window reads the
    # candidates of its own buckets, and stops the search once the page is full. The
    # first takes two when less than half a bucket lies below the windows so far.
    buckets = 1 if floor & ((1 << ID_BUCKET_BITS) - 1) >= 1 << (ID_BUCKET_BITS - 1) else 2
    while by_bucket and len(hits) < wanted and floor > 0 and buckets <= MAX_BUCKET_ARMS:
        found, floor = window(floor, oldest_bucket_floor(floor, buckets), True)
        hits += found
        buckets *= 2
    if len(hits) < wanted and floor > 0:
        found, floor = window(floor, 0, False)
        hits += found
    page = hits[params["offset"] : wanted]
    for hit in page:
        hit["snippet"] = substring_snippet(hit["snippet"], terms[0], marked=plan.kind == "trigram")
    return page


def _checked_form(
    plan: SearchPlan,
    params: dict[str, Any],
    grams_source: str | None,
    with_trigrams: bool,
    grams_of: Callable[[str], list[str]] | None = None,
) -> tuple[str, dict[str, Any]]:
    """The plan's condition with every term checked beside its gram condition, and its own
    copy of ``params`` (see :func:`_substring_condition`)."""
    own_params = dict(params)
    condition, _ = _substring_condition(
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
    gram (the ASCII trigrams lifted into it counted, see :func:`_lift_trigrams`), or a
    lone three-character CJK term (one ``pg_trgm`` trigram)."""
    for group in plan.groups:
        grams = {term: required_cjk_grams(term) for term in group.required}
        if not any(grams.values()):
            (term, *others) = group.required or ("",)
            if others or len(term) != 3 or not all(is_cjk_codepoint(ord(char)) for char in term):
                return False
            continue
        if with_trigrams:
            _lift_trigrams(group.required, grams)
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
) -> list[dict[str, Any]]:
    def newest_hits(bounds: str) -> str:
        return f"""
        SELECT m.id FROM {source}
        WHERE {condition} AND {bounds} {where}
        ORDER BY m.id DESC
        LIMIT :need"""

    found = newest_hits(WINDOW_BOUNDS)
    if arms:
        found, by_arm = split_by_bucket(arms, newest_hits, "id", "ORDER BY id DESC LIMIT :need")
        params = {**params, **by_arm}
    sql = f"""
    WITH hits AS ({found})
    SELECT {_PAGE_COLUMNS.format(snippet="m.content")}
    FROM hits JOIN messages m ON m.id = hits.id JOIN sessions s ON s.id = m.session_id
    ORDER BY m.id DESC
    """
    return fetch_dicts(db, sql, params, content_keys=("snippet",))


STRONG_TRIGRAM_TERM = 5
"""Shorter terms (``the``) are rarely selective in ``pg_trgm``, whose estimates for them
are far too low; beside a longer term or a CJK gram condition they are only checked."""


def _substring_condition(
    plan: SearchPlan,
    params: dict[str, Any],
    grams_source: str | None = STORED_CJK_GRAMS,
    *,
    checked_beside_grams: bool = False,
    ascii_trigrams_in_grams: bool = False,
    grams_of: Callable[[str], list[str]] | None = None,
) -> tuple[str, list[str]]:
    """The conditions of a substring plan (any group: all required terms, no excluded
    one), and its required terms in order.

    A term is matched exactly, lower-casing ASCII letters only, as SQLite's ``LIKE``
    does: a term without ASCII letters is a plain ``LIKE``; one with ASCII letters is an
    ``ILIKE`` (which folds more, and which a ``pg_trgm`` index on the indexed text can
    answer for 3+ characters) confirmed by a regular expression with ``[xX]`` for each
    letter, run only on the rows the ``ILIKE`` lets through. ``grams_source`` (the stored
    column or the indexed expression, see :func:`cjk_grams_source`) adds the gram-index
    condition to required short CJK terms; ``None`` leaves it out (a database without
    either, or a query over a handful of rows, where it would only cost time). In a group with a term of
    :data:`STRONG_TRIGRAM_TERM`+ characters, shorter terms are written so that no index
    serves them (the planner would otherwise intersect a bitmap of most of the table); in
    a group with a gram condition, every other term's ``ILIKE`` is, leaving only its
    regular expression to ``pg_trgm`` — or nothing, with ``checked_beside_grams`` (for a
    window of ids whose gram candidates are few: the whole term is checked on them).
    With ``ascii_trigrams_in_grams`` (stored grams from revision 0016) the other terms'
    ASCII trigrams join the group's gram condition instead, and every term is only
    checked: one containment within the CJK messages finds the candidates, and
    ``pg_trgm`` (which indexes every message) is not read at all. ``grams_of`` gives a
    term's grams (:func:`required_cjk_grams` unless given; a walk of the newest rows
    passes :func:`cjk_grams_of`, which gives a term ``pg_trgm`` serves its grams too).
    """
    if plan.kind not in ("like", "trigram"):
        return "", []
    grams_of = grams_of or required_cjk_grams
    names: dict[str, str] = {}
    # The same text, in a form no index is built on: a term tested this way is checked on
    # the candidates other conditions found, never looked up itself.
    unindexed = f"({INDEXED_TEXT} || '')"

    def test(term: str, indexed: bool = True, regex_indexed: bool = True) -> str:
        if term not in names:
            names[term] = f"p{len(names)}"
            params[names[term]] = like_pattern(term)
            if has_ascii_letter(term):
                params[names[term] + "r"] = _ascii_insensitive_regex(term)
        name = names[term]
        text = INDEXED_TEXT if indexed else unindexed
        if not has_ascii_letter(term):
            return f"{text} LIKE :{name} ESCAPE '\\'"
        regex_text = INDEXED_TEXT if regex_indexed else unindexed
        if not indexed:
            # The regular expression alone decides; an ILIKE no index serves would only
            # repeat the test (about a quarter of a 65,536-id window's time at 1M).
            return f"{regex_text} ~ :{name}r"
        return f"({text} ILIKE :{name} ESCAPE '\\' AND {regex_text} ~ :{name}r)"

    def required(term: str, grams: list[str], checked_only: bool, beside_grams: bool, lifted: bool) -> str:
        if not grams:
            whole = beside_grams and (checked_beside_grams or lifted)
            return test(term, indexed=not checked_only, regex_indexed=not whole)
        gram_names = [f"g{len(params)}_{i}" for i in range(len(grams))]
        params.update(zip(gram_names, grams, strict=True))
        wanted = ", ".join(f"CAST(:{n} AS text)" for n in gram_names)
        # The grams find the candidates; pg_trgm has no trigram of a short CJK term to offer.
        return f"({grams_source} @> ARRAY[{wanted}] AND {test(term, indexed=False)})"

    groups = []
    for group in plan.groups:
        grams = {term: grams_of(term) if grams_source else [] for term in group.required}
        # Beside a gram condition pg_trgm's estimate of any ILIKE is far too low (1 row for
        # 38,421 candidates of ``chung``), and the planner would then read every candidate
        # instead of intersecting the two indexes: only the regular expression, whose
        # estimate is sane, is left for pg_trgm. Beside a long term, a short one is only
        # checked.
        beside_grams = any(grams.values())
        lifted = beside_grams and ascii_trigrams_in_grams and _lift_trigrams(group.required, grams)
        beside_long = any(len(term) >= STRONG_TRIGRAM_TERM for term in group.required)
        conditions = [
            required(
                term,
                grams[term],
                beside_grams or (beside_long and len(term) < STRONG_TRIGRAM_TERM),
                beside_grams,
                lifted,
            )
            for term in group.required
        ]
        groups.append(" AND ".join(conditions + [f"NOT {test(term)}" for term in group.excluded]))
    return "(" + " OR ".join(f"({group})" for group in groups) + ")", list(plan.like_terms)


def _lift_trigrams(required_terms: Sequence[str], grams: dict[str, list[str]]) -> bool:
    """Add the ASCII trigrams of the terms without grams to the first term with grams
    (in place); whether there were any."""
    lifted = [gram for term in required_terms if not grams[term] for gram in ascii_trigrams(term)]
    if not lifted:
        return False
    first = next(term for term in required_terms if grams[term])
    grams[first] = list(dict.fromkeys(grams[first] + lifted))
    return True


_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
_ASCII_RUN = re.compile(r"[a-z0-9]{3,}")
MAX_LIFTED_TRIGRAMS = 8
"""A long term's trigrams are thinned to this many, spread over it: each key of a GIN
containment is read, and a few trigrams already leave few candidates to check."""


def ascii_trigrams(term: str) -> list[str]:
    """The three-character windows of ``term``'s runs of ASCII letters and digits, ASCII
    letters lower-cased: what revision 0016 stores for a text holding CJK (``them`` gives
    ``the`` and ``hem``). A text containing ``term`` (ASCII letters in either case)
    contains each of them; at most :data:`MAX_LIFTED_TRIGRAMS`, spread over the term."""
    lowered = term.translate(_ASCII_LOWER)
    found = list(
        dict.fromkeys(run[i : i + 3] for run in _ASCII_RUN.findall(lowered) for i in range(len(run) - 2))
    )
    if len(found) <= MAX_LIFTED_TRIGRAMS:
        return found
    step = (len(found) - 1) / (MAX_LIFTED_TRIGRAMS - 1)
    return [found[round(i * step)] for i in range(MAX_LIFTED_TRIGRAMS)]


def _ascii_insensitive_regex(term: str) -> str:
    """A POSIX regular expression matching ``term`` literally, ASCII letters in either case."""
    out = []
    for char in term:
        if char.isascii() and char.isalpha():
            out.append(f"[{char.lower()}{char.upper()}]")
        elif char.isascii() and not char.isalnum():
            out.append("\\" + char)
        else:
            out.append(char)
    return "".join(out)


def required_cjk_grams(term: str) -> list[str]:
    """The CJK characters and adjacent CJK pairs ``term`` contains, when ``pg_trgm`` cannot
    serve it; else ``[]``.

    ``pg_trgm`` finds a ``LIKE`` pattern through its index only when the pattern holds a
    word of at least three characters. For a term without one, every message containing
    the term contains each of its CJK characters and pairs, so requiring them from
    ``idx_messages_cjk_grams`` narrows the candidates through an index; the ``ILIKE``
    beside it still decides the match.
    """
    return [] if _has_trigram_word(term) else cjk_grams_of(term)


def cjk_grams_of(term: str) -> list[str]:
    """The CJK characters and adjacent CJK pairs of ``term`` (its pairs only, for a run of
    two or more): what the stored grams of every message containing ``term`` hold."""
    grams: list[str] = []
    run = ""
    for char in term + " ":
        if is_cjk_codepoint(ord(char)):
            run += char
            continue
        # A run's adjacent pairs imply its characters: only a lone character is asked for
        # itself. Fewer elements also keep the planner's estimate of the containment (a
        # product over the elements) near the truth, so it bounds the id window too.
        width = 2 if len(run) >= 2 else 1
        grams.extend(run[i : i + width] for i in range(len(run) - width + 1))
        run = ""
    return list(dict.fromkeys(grams))


def _has_trigram_word(term: str) -> bool:
    length = 0
    for char in term:
        length = length + 1 if char.isalnum() else 0
        if length >= MIN_TRIGRAM_TERM:
            return True
    return False


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
