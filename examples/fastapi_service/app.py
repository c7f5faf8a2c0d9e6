"""A small conversation service on ``AsyncSessionDB``: create, append, search, list.

Run it (``pip install 'hermes-store[examples]' uvicorn``)::

    HERMES_STORE_URL=sqlite+aiosqlite:///./state.db uvicorn app:app

Every handler awaits the store, so a request waiting for the SQLite write lock (another
process writing) never holds up the others. ``HERMES_STORE_URL`` may name any backend
(``postgresql+psycopg://…`` too); the same URL works for ``alembic`` and ``hermes-store``.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, HTTPException, Query, Request
from pydantic import BaseModel, Field

from hermes_store.aio import AsyncSessionDB


class NewSession(BaseModel):
    """Body of ``POST /sessions``."""

    id: str | None = None
    source: str = "api"
    model: str | None = None


class NewMessage(BaseModel):
    """Body of ``POST /sessions/{session_id}/messages``."""

    role: str = Field(pattern="^(system|user|assistant|tool)$")
    content: str


def create_app(url: str | None = None) -> FastAPI:
    """The service, on the store at ``url`` (default: ``$HERMES_STORE_URL`` / ``~/.hermes``)."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with AsyncSessionDB(url) as store:
            app.state.store = store
            yield

    app = FastAPI(title="hermes_store example", lifespan=lifespan)

    def store_of(request: Request) -> AsyncSessionDB:
        store: AsyncSessionDB = request.app.state.store
        return store

    @app.post("/sessions", status_code=201)
    async def create_session(body: NewSession, request: Request) -> dict[str, str]:
        session_id = body.id or uuid.uuid4().hex
        await store_of(request).create_session(session_id, body.source, model=body.model)
        return {"id": session_id}

    @app.post("/sessions/{session_id}/messages", status_code=201)
    async def append(session_id: str, body: NewMessage, request: Request) -> dict[str, int]:
        store = store_of(request)
        if await store.get_session(session_id) is None:
            raise HTTPException(status_code=404, detail=f"no session {session_id}")
        return {"id": await store.append_message(session_id, body.role, body.content)}

    @app.get("/sessions")
    async def list_sessions(
        request: Request, limit: int = Query(20, ge=1, le=200), source: str | None = None
    ) -> list[dict[str, Any]]:
        return await store_of(request).list_sessions_rich(source=source, limit=limit)

    @app.get("/sessions/{session_id}/messages")
    async def messages(session_id: str, request: Request) -> list[dict[str, Any]]:
        return await store_of(request).get_messages(session_id)

    @app.get("/search")
    async def search(request: Request, q: str, limit: int = Query(20, ge=1, le=200)) -> list[dict[str, Any]]:
        return await store_of(request).search_messages(q, limit=limit)

    return app


app = create_app(os.environ.get("HERMES_STORE_URL") or None)
