"""A session's model, model configuration and billing route, changed mid-session.

Unlike token accounting, which only fills what is still NULL, these overwrite: they
record the user's latest choice. Functions take the caller's connection and never commit.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import update

from hermes_store.db.execution import Bind, run
from hermes_store.schema.models import Session


def _set(db: Bind, session_id: str, values: dict[str, Any]) -> None:
    run(db, update(Session).where(Session.id == session_id).values(**values))


def set_model_config(db: Bind, session_id: str, model_config: str | None, model: str | None) -> None:
    """Store ``model_config`` as given (``None`` clears it) and ``model`` unless ``None``."""
    values: dict[str, Any] = {"model_config": model_config}
    if model is not None:
        values["model"] = model
    _set(db, session_id, values)


def set_model(db: Bind, session_id: str, model: str | None) -> None:
    """Store ``model`` (``None`` clears it)."""
    _set(db, session_id, {"model": model})


def set_billing_route(
    db: Bind, session_id: str, provider: str | None, base_url: str | None, billing_mode: str | None
) -> None:
    """Store the billing provider and base URL, the mode unless ``None``, and clear the
    cached system prompt, whose header names the previous model and provider."""
    values: dict[str, Any] = {
        "billing_provider": provider,
        "billing_base_url": base_url,
        "system_prompt": None,
    }
    if billing_mode is not None:
        values["billing_mode"] = billing_mode
    _set(db, session_id, values)
