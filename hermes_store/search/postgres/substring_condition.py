"""The SQL condition of a PostgreSQL substring search: which terms an index looks up
(``pg_trgm``, the CJK gram index) and which are only checked on the candidates."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hermes_store.schema.indexed_text import INDEXED_TEXT
from hermes_store.search.plan import SearchPlan, TermGroup, has_ascii_letter, like_pattern
from hermes_store.search.postgres.capabilities import STORED_CJK_GRAMS
from hermes_store.search.postgres.grams import lift_trigrams, required_cjk_grams

STRONG_TRIGRAM_TERM = 5
"""Shorter terms (``the``) are rarely selective in ``pg_trgm``, whose estimates for them
are far too low; beside a longer term or a CJK gram condition they are only checked."""


def substring_condition(
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
    column or the indexed expression, see :func:`.capabilities.cjk_grams_source`) adds the gram-index
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
    term's grams (:func:`.grams.required_cjk_grams` unless given; a walk of the newest rows
    passes :func:`.grams.cjk_grams_of`, which gives a term ``pg_trgm`` serves its grams too).
    """
    if plan.kind not in ("like", "trigram"):
        return "", []
    terms = _TermConditions(params, grams_source, checked_beside_grams)
    groups = [
        _group_condition(terms, group, grams_of or required_cjk_grams, ascii_trigrams_in_grams)
        for group in plan.groups
    ]
    return "(" + " OR ".join(f"({group})" for group in groups) + ")", list(plan.like_terms)


# The same text, in a form no index is built on: a term tested this way is checked on the
# candidates other conditions found, never looked up itself.
_UNINDEXED_TEXT = f"({INDEXED_TEXT} || '')"


class _TermConditions:
    """The conditions of one substring condition's terms, their values bound in ``params``
    once per term (patterns ``p0``, ``p1``…, grams ``g…``)."""

    def __init__(self, params: dict[str, Any], grams_source: str | None, checked_beside_grams: bool) -> None:
        self.params = params
        self.grams_source = grams_source
        self.checked_beside_grams = checked_beside_grams
        self.names: dict[str, str] = {}

    def test(self, term: str, indexed: bool = True, regex_indexed: bool = True) -> str:
        """Whether the text holds ``term``; ``indexed``/``regex_indexed`` say whether its
        ``ILIKE`` and its regular expression are written so that ``pg_trgm`` may serve them."""
        names, params = self.names, self.params
        if term not in names:
            names[term] = f"p{len(names)}"
            params[names[term]] = like_pattern(term)
            if has_ascii_letter(term):
                params[names[term] + "r"] = _ascii_insensitive_regex(term)
        name = names[term]
        text = INDEXED_TEXT if indexed else _UNINDEXED_TEXT
        if not has_ascii_letter(term):
            return f"{text} LIKE :{name} ESCAPE '\\'"
        regex_text = INDEXED_TEXT if regex_indexed else _UNINDEXED_TEXT
        if not indexed:
            # The regular expression alone decides; an ILIKE no index serves would only
            # repeat the test (about a quarter of a 65,536-id window's time at 1M).
            return f"{regex_text} ~ :{name}r"
        return f"({text} ILIKE :{name} ESCAPE '\\' AND {regex_text} ~ :{name}r)"

    def required(
        self, term: str, grams: list[str], checked_only: bool, beside_grams: bool, lifted: bool
    ) -> str:
        """The condition of a required ``term``: its gram containment beside its check when
        it has ``grams``, else its test (looked up or, ``checked_only``, only checked)."""
        if not grams:
            whole = beside_grams and (self.checked_beside_grams or lifted)
            return self.test(term, indexed=not checked_only, regex_indexed=not whole)
        params = self.params
        gram_names = [f"g{len(params)}_{i}" for i in range(len(grams))]
        params.update(zip(gram_names, grams, strict=True))
        wanted = ", ".join(f"CAST(:{n} AS text)" for n in gram_names)
        # The grams find the candidates; pg_trgm has no trigram of a short CJK term to offer.
        return f"({self.grams_source} @> ARRAY[{wanted}] AND {self.test(term, indexed=False)})"


def _group_condition(
    terms: _TermConditions,
    group: TermGroup,
    grams_of: Callable[[str], list[str]],
    ascii_trigrams_in_grams: bool,
) -> str:
    """One group's condition: every required term, none of the excluded ones."""
    grams = {term: grams_of(term) if terms.grams_source else [] for term in group.required}
    # Beside a gram condition pg_trgm's estimate of any ILIKE is far too low (1 row for
    # 38,421 candidates of ``chung``), and the planner would then read every candidate
    # instead of intersecting the two indexes: only the regular expression, whose
    # estimate is sane, is left for pg_trgm. Beside a long term, a short one is only
    # checked.
    beside_grams = any(grams.values())
    lifted = beside_grams and ascii_trigrams_in_grams and lift_trigrams(group.required, grams)
    beside_long = any(len(term) >= STRONG_TRIGRAM_TERM for term in group.required)
    conditions = [
        terms.required(
            term,
            grams[term],
            beside_grams or (beside_long and len(term) < STRONG_TRIGRAM_TERM),
            beside_grams,
            lifted,
        )
        for term in group.required
    ]
    return " AND ".join(conditions + [f"NOT {terms.test(term)}" for term in group.excluded])


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
