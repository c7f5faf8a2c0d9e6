"""The FastAPI example service (``examples/fastapi_service/app.py``) through ASGI + httpx.

It runs the app's lifespan (which opens and closes its ``AsyncSessionDB``) and then
creates a session, appends, searches and lists over HTTP, on a real SQLite file.
"""

from __future__ import annotations

import asyncio
import importlib.util
from pathlib import Path
from types import ModuleType

import httpx
from support import REPO_ROOT

from hermes_store import SessionDB


def _example() -> ModuleType:
    path = REPO_ROOT / "examples" / "fastapi_service" / "app.py"
    spec = importlib.util.spec_from_file_location("hermes_store_fastapi_example", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_create_append_search_and_list_over_http(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'service.db'}"
    app = _example().create_app(url)

    async def scenario() -> None:
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://service") as client:
                created = await client.post("/sessions", json={"id": "demo", "model": "m1"})
                assert created.status_code == 201 and created.json() == {"id": "demo"}
                generated = await client.post("/sessions", json={})
                assert len(generated.json()["id"]) == 32

                appends = await asyncio.gather(
                    *(
                        client.post(
                            "/sessions/demo/messages", json={"role": "user", "content": f"deploy step {n}"}
                        )
                        for n in range(10)
                    )
                )
                assert sorted(r.json()["id"] for r in appends) == list(range(1, 11))
                missing = await client.post("/sessions/nope/messages", json={"role": "user", "content": "x"})
                assert missing.status_code == 404
                invalid = await client.post("/sessions/demo/messages", json={"role": "robot", "content": "x"})
                assert invalid.status_code == 422

                hits = (await client.get("/search", params={"q": "deploy", "limit": 50})).json()
                assert len(hits) == 10 and {h["session_id"] for h in hits} == {"demo"}
                listed = (await client.get("/sessions")).json()
                assert {s["id"] for s in listed} == {"demo", generated.json()["id"]}
                demo = next(s for s in listed if s["id"] == "demo")
                assert demo["message_count"] == 10 and demo["model"] == "m1"
                transcript = (await client.get("/sessions/demo/messages")).json()
                assert sorted(m["content"] for m in transcript) == sorted(
                    f"deploy step {n}" for n in range(10)
                )

    asyncio.run(scenario())
    with SessionDB(tmp_path / "service.db") as db:  # what the service wrote is the library's format
        assert db.message_count("demo") == 10
