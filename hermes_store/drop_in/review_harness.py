"""Hermes' functions for background-review prompts found in a transcript.

Older Hermes builds let the background skill/memory review write its curator prompt into
the user's own session; replayed, it turns the agent into the curator. The store drops
such prompts (and the reply that followed each) when it builds a conversation; these are
the same checks under the names Hermes' tests import, tolerant of entries that are not
dicts as upstream's are.
"""

from __future__ import annotations

from typing import Any

from hermes_store.repository.conversation import is_review_harness


def _is_background_review_harness_message(message: Any) -> bool:
    """Whether ``message`` is a user or system message holding a background-review prompt."""
    return isinstance(message, dict) and is_review_harness(message)


def _strip_background_review_harness(messages: list[Any]) -> list[Any]:
    """``messages`` without background-review prompts and the assistant reply that
    directly followed each; everything else kept, in order."""
    kept: list[Any] = []
    after_prompt = False
    for message in messages:
        if _is_background_review_harness_message(message):
            after_prompt = True
            continue
        if not (after_prompt and isinstance(message, dict) and message.get("role") == "assistant"):
            kept.append(message)
        after_prompt = False
    return kept
