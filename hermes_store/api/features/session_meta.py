"""Changing a session's model, model configuration and billing route mid-session."""

from __future__ import annotations

from typing import ClassVar

from hermes_store.api.features.base import FacadeBase
from hermes_store.domain.validation import optional_str, require_str
from hermes_store.repository import session_meta


class SessionMetaMethods(FacadeBase):
    """Overwrite what a model switch changes (token accounting only fills NULLs)."""

    _ASYNC_READS: ClassVar[tuple[str, ...]] = ()
    _ASYNC_WRITES: ClassVar[tuple[str, ...]] = (
        "update_session_meta",
        "update_session_model",
        "update_session_billing_route",
    )

    def update_session_meta(
        self, session_id: str, model_config_json: str | None, model: str | None = None
    ) -> None:
        """Store ``model_config_json`` exactly as given (already JSON text; ``None``
        clears it) and, unless ``None``, ``model``. A missing session is not an error."""
        require_str("session_id", session_id)
        optional_str("model_config_json", model_config_json)
        optional_str("model", model)
        self._write(
            lambda db: session_meta.set_model_config(db, session_id, model_config_json, model),
            "updating a session's model configuration",
        )

    def update_session_model(self, session_id: str, model: str | None) -> None:
        """Store the model the session now uses (``None`` clears it)."""
        require_str("session_id", session_id)
        optional_str("model", model)
        self._write(lambda db: session_meta.set_model(db, session_id, model), "updating a session's model")

    def update_session_billing_route(
        self,
        session_id: str,
        *,
        provider: str | None,
        base_url: str | None,
        billing_mode: str | None = None,
    ) -> None:
        """Store the provider and base URL now billed (overwriting), the billing mode
        unless ``None``, and clear the cached system prompt so that it is rebuilt with
        the new model's header."""
        require_str("session_id", session_id)
        optional_str("provider", provider)
        optional_str("base_url", base_url)
        optional_str("billing_mode", billing_mode)
        self._write(
            lambda db: session_meta.set_billing_route(db, session_id, provider, base_url, billing_mode),
            "updating a session's billing route",
        )
