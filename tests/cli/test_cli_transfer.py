"""``export`` and ``import``: formats, streaming, and the exact round trip."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import Result

from hermes_store.api.session_db import SessionDB

Invoke = Callable[..., Result]


def _table(path: Path, table: str) -> list[tuple[object, ...]]:
    connection = sqlite3.connect(path)
    try:
        return connection.execute(f"SELECT * FROM {table} ORDER BY 1").fetchall()
    finally:
        connection.close()


def test_round_trip_is_exact(invoke: Invoke, seeded_db: Path, tmp_path: Path) -> None:
    first = tmp_path / "first.jsonl"
    invoke("export", "-o", str(first))
    empty = tmp_path / "empty.db"
    summary = json.loads(invoke("import", str(first), "--json", db=empty).output)
    assert summary == {"sessions": 8, "messages": 17, "skipped": 0, "unlinked_parents": {}}
    second = tmp_path / "second.jsonl"
    invoke("export", "-o", str(second), db=empty)
    assert first.read_bytes() == second.read_bytes()
    # Every stored column survived, not only what the export shows.
    assert _table(seeded_db, "sessions") == _table(empty, "sessions")
    assert _table(seeded_db, "messages") == _table(empty, "messages")
    for fmt in ("json", "markdown"):
        assert invoke("export", "-f", fmt).output == invoke("export", "-f", fmt, db=empty).output


def test_imported_store_is_searchable(invoke: Invoke, tmp_path: Path) -> None:
    dump = tmp_path / "dump.jsonl"
    invoke("export", "-o", str(dump))
    copy = tmp_path / "copy.db"
    invoke("import", str(dump), db=copy)
    hits = json.loads(invoke("search", "docker", "--json", db=copy).output)
    assert {hit["session_id"] for hit in hits} == {"alpha-deploy"}
    invoke("doctor", db=copy)


def test_export_jsonl_records_are_export_session(invoke: Invoke, seeded_db: Path) -> None:
    lines = invoke("export", "--source", "cli").output.splitlines()
    records = [json.loads(line) for line in lines]
    assert len(records) == 6
    assert [r["started_at"] for r in records] == sorted(r["started_at"] for r in records)
    with SessionDB(seeded_db) as db:
        expected = db.export_session("alpha-deploy")
    assert next(r for r in records if r["id"] == "alpha-deploy") == json.loads(json.dumps(expected))


def test_export_one_session_as_json_object(invoke: Invoke) -> None:
    record = json.loads(invoke("export", "Deploy pipeline", "-f", "json").output)
    assert record["id"] == "alpha-deploy"
    assert [m["role"] for m in record["messages"]] == ["user", "assistant", "tool", "assistant"]
    everything = json.loads(invoke("export", "-f", "json").output)
    assert isinstance(everything, list) and len(everything) == 8


def test_export_markdown(invoke: Invoke, tmp_path: Path) -> None:
    target = tmp_path / "alpha.md"
    invoke("export", "alpha-deploy", "-o", str(target))  # format from the suffix
    text = target.read_text(encoding="utf-8")
    assert text.startswith("# Deploy pipeline\n")
    assert "**Tool call** `terminal`" in text
    assert "<details><summary>Reasoning</summary>" in text


def test_import_refuses_existing_sessions(invoke: Invoke, tmp_path: Path) -> None:
    dump = tmp_path / "dump.jsonl"
    invoke("export", "-o", str(dump))
    result = invoke("import", str(dump), status=1)
    assert result.output.startswith("Error: line 1: session zeta-ancient already exists")
    skipped = json.loads(invoke("import", str(dump), "--skip-existing", "--json").output)
    assert skipped["sessions"] == 0 and skipped["skipped"] == 8


def test_import_links_children_that_come_before_their_parents(invoke: Invoke, tmp_path: Path) -> None:
    lines = invoke("export").output.splitlines()
    dump = tmp_path / "reversed.jsonl"
    dump.write_text("\n".join(reversed(lines)) + "\n", encoding="utf-8")
    target = tmp_path / "target.db"
    invoke("import", str(dump), "--batch-size", "1", db=target)
    with SessionDB(target) as db:
        assert db.get_session("beta-refactor-2")["parent_session_id"] == "beta-refactor"  # type: ignore[index]
        assert db.get_compression_tip("beta-refactor") == "beta-refactor-2"


def test_import_from_stdin(invoke: Invoke, tmp_path: Path) -> None:
    dump = invoke("export", "--source", "telegram").output
    target = tmp_path / "stdin.db"
    invoke("import", "-", db=target, input=dump)
    assert json.loads(invoke("sessions", "--json", db=target).output)[0]["id"] == "gamma-photo"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"id": "x", "source": "cli", "started_at": 1.0}\nnot json\n', "line 2: not valid JSON"),
        ('{"id": "x", "source": "cli"}\n', "line 1: the session record has no 'started_at'"),
        ('[{"id": "x"}]\n', "looks like a JSON array"),
        ('{"id": "x", "source": "cli", "started_at": 1.0, "messages": [{"content": "hi"}]}\n', "no 'role'"),
    ],
)
def test_import_rejects_bad_input_on_one_line(
    invoke: Invoke, tmp_path: Path, content: str, message: str
) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(content, encoding="utf-8")
    result = invoke("import", str(bad), status=1, db=tmp_path / "target.db")
    assert result.output.startswith("Error:") and message in result.output
    assert "Traceback" not in result.output


def test_import_clashing_message_id_is_an_error(invoke: Invoke, tmp_path: Path) -> None:
    record = json.loads(invoke("export", "gamma-photo", "-f", "json").output)
    record["id"] = "gamma-photo-copy"  # a new session whose messages reuse stored ids
    dump = tmp_path / "clash.jsonl"
    dump.write_text(json.dumps(record) + "\n", encoding="utf-8")
    result = invoke("import", str(dump), status=1)
    assert "cannot import lines 1–1" in result.output
