"""``sessions``, ``show``, ``search`` and ``lineage`` against the seeded store."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from click.testing import Result

from hermes_store.api.session_db import SessionDB

Invoke = Callable[..., Result]


def _ids(result: Result) -> list[str]:
    return [row["id"] for row in json.loads(result.output)]


# --- sessions ---------------------------------------------------------------------------


def test_sessions_table(invoke: Invoke) -> None:
    output = invoke("sessions").output
    header = output.splitlines()[0].split()
    assert header[:3] == ["ID", "Title", "Preview"]
    assert "alpha-deploy" in output and "Deploy pipeline" in output
    assert "What is in this picture?" in output  # multimodal preview from the text part
    assert "alpha-deploy-sub" not in output  # delegates are hidden by default


def test_sessions_json_matches_the_library(invoke: Invoke, seeded_db: Path) -> None:
    rows = json.loads(invoke("sessions", "--json").output)
    with SessionDB(seeded_db) as db:
        expected = db.list_sessions_rich()
    assert rows == json.loads(json.dumps(expected))
    assert {"id", "preview", "title", "source", "model", "message_count", "last_active"} <= set(rows[0])


def test_sessions_filters(invoke: Invoke) -> None:
    assert _ids(invoke("sessions", "--source", "telegram", "--json")) == ["gamma-photo"]
    no_cli = _ids(invoke("sessions", "--exclude-source", "cli", "--exclude-source", "tui", "--json"))
    assert no_cli == ["gamma-photo"]
    with_children = _ids(invoke("sessions", "--children", "--json"))
    assert {"alpha-deploy-sub", "beta-refactor"} <= set(with_children)


def test_sessions_paging(invoke: Invoke) -> None:
    every = _ids(invoke("sessions", "--children", "--json"))
    first = _ids(invoke("sessions", "--children", "--limit", "3", "--json"))
    second = _ids(invoke("sessions", "--children", "--limit", "3", "--page", "2", "--json"))
    by_offset = _ids(invoke("sessions", "--children", "--limit", "3", "--offset", "3", "--json"))
    assert first + second == every[:6]
    assert second == by_offset
    assert "next page: --page 2" in invoke("sessions", "--limit", "2").output


def test_sessions_sorted_by_activity(invoke: Invoke) -> None:
    assert _ids(invoke("sessions", "--sort", "active", "--json"))[0] == "gamma-photo"


# --- show ----------------------------------------------------------------------------------


def test_show_renders_roles_tool_calls_and_folded_reasoning(invoke: Invoke) -> None:
    output = invoke("show", "alpha-deploy").output
    assert "Deploy pipeline" in output
    for role in ("user", "assistant", "tool · terminal"):
        assert role in output
    assert '→ terminal({"command": "docker compose up -d"})' in output
    assert "reasoning folded" in output
    assert "The user wants a deployment" not in output
    assert "8 more lines" in output and "container 20" not in output


def test_show_full_and_reasoning(invoke: Invoke) -> None:
    output = invoke("show", "alpha-deploy", "--full", "--reasoning").output
    assert "The user wants a deployment" in output
    assert "container 20: started" in output


def test_show_by_title_and_prefix(invoke: Invoke) -> None:
    by_id = invoke("show", "--json", "epsilon-plan").output
    assert invoke("show", "--json", "Holiday plan").output == by_id
    assert invoke("show", "--json", "gamma").output == invoke("show", "--json", "gamma-photo").output
    ambiguous = invoke("show", "beta", status=1)
    assert "matches several sessions" in ambiguous.output


def test_show_json_is_the_openai_replay(invoke: Invoke, seeded_db: Path) -> None:
    replay = json.loads(invoke("show", "beta-refactor-2", "--json", "--ancestors").output)
    with SessionDB(seeded_db) as db:
        assert replay == db.get_messages_as_conversation("beta-refactor-2", include_ancestors=True)
    first = {key: value for key, value in replay[0].items() if key != "timestamp"}
    assert first == {"role": "user", "content": "Refactor the search module to use the trigram index"}
    assert len(replay) == 4


def test_show_ancestors_renders_the_chain(invoke: Invoke) -> None:
    output = invoke("show", "beta-refactor-2", "--ancestors").output
    assert output.index("Refactor the search module") < output.index("Continue the refactor")
    assert "continued in beta-refactor-2" in output


# --- search -----------------------------------------------------------------------------------


def test_search_shows_hits_with_context(invoke: Invoke) -> None:
    output = invoke("search", "deploy").output
    assert "Deploy pipeline" in output and "alpha-deploy" in output
    assert "↓ assistant: Let me start the containers." in output
    assert ">>>" not in output  # markers become highlighting


def test_search_json_matches_search_messages(invoke: Invoke, seeded_db: Path) -> None:
    hits = json.loads(invoke("search", "deploy", "--json").output)
    with SessionDB(seeded_db) as db:
        assert hits == db.search_messages("deploy")
    assert hits and set(hits[0]) == {
        "id",
        "session_id",
        "role",
        "snippet",
        "timestamp",
        "tool_name",
        "source",
        "model",
        "session_started",
        "context",
    }


def test_search_filters(invoke: Invoke) -> None:
    def sessions_of(*args: str) -> set[str]:
        return {hit["session_id"] for hit in json.loads(invoke("search", *args, "--json").output)}

    assert sessions_of("cat OR deploy", "--source", "telegram") == {"gamma-photo"}
    assert "gamma-photo" not in sessions_of("cat OR deploy", "--exclude-source", "telegram")
    roles = {
        hit["role"] for hit in json.loads(invoke("search", "terminal", "--role", "tool", "--json").output)
    }
    assert roles == {"tool"}
    assert len(json.loads(invoke("search", "deploy", "--limit", "1", "--json").output)) == 1


def test_search_cjk_and_awkward_queries(invoke: Invoke) -> None:
    assert "beta-refactor-2" in invoke("search", "记忆断裂").output
    assert "No messages match" in invoke("search", "foo:bar").output
    assert invoke("search", "nothing-like-this", "--json").output.strip() == "[]"


# --- lineage ----------------------------------------------------------------------------------


def test_lineage_tree_with_end_reasons(invoke: Invoke) -> None:
    output = invoke("lineage", "beta-refactor-2").output
    lines = output.splitlines()
    assert lines[0].startswith("beta-refactor") and "ended: compression" in lines[0]
    assert "beta-refactor-2" in lines[1] and "[compression continuation]" in lines[1] and "◀" in lines[1]
    delegate = invoke("lineage", "alpha-deploy").output
    assert "alpha-deploy-sub" in delegate and "[delegate]" in delegate and "ended: user_exit" in delegate
    assert "[branch]" in invoke("lineage", "epsilon-plan").output


def test_lineage_json(invoke: Invoke) -> None:
    data = json.loads(invoke("lineage", "Refactor search", "--json").output)
    assert data["session"] == "beta-refactor"
    assert data["ancestors"] == []
    assert [(node["id"], node["kind"]) for node in data["descendants"]] == [
        ("beta-refactor-2", "compression continuation")
    ]
