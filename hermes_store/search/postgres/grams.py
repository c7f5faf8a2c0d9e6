"""The grams a substring term implies: CJK characters and pairs for the gram index, and
the ASCII trigrams revision 0016 stores beside them."""

from __future__ import annotations

import re
from collections.abc import Sequence

from hermes_store.search.cjk import is_cjk_codepoint
from hermes_store.search.plan import MIN_TRIGRAM_TERM

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


def required_cjk_grams(term: str) -> list[str]:
    """The CJK characters and adjacent CJK pairs ``term`` contains, when ``pg_trgm`` cannot
    serve it; else ``[]``.

    ``pg_trgm`` finds a ``LIKE`` pattern through its index only when the pattern holds a
    word of at least three characters. For a term without one, every message containing
    the term contains each of its CJK characters and pairs, so requiring them from the
    GIN index over the stored ``messages.cjk_grams`` narrows the candidates through an
    index; the ``ILIKE``
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


def lift_trigrams(required_terms: Sequence[str], grams: dict[str, list[str]]) -> bool:
    """Add the ASCII trigrams of the terms without grams to the first term with grams
    (in place); whether there were any."""
    lifted = [gram for term in required_terms if not grams[term] for gram in ascii_trigrams(term)]
    if not lifted:
        return False
    first = next(term for term in required_terms if grams[term])
    grams[first] = list(dict.fromkeys(grams[first] + lifted))
    return True
