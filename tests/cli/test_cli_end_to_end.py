"""The installed ``hermes-store`` command, run as a real subprocess."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

Proc = Callable[..., subprocess.CompletedProcess[str]]


def test_sessions_and_search_end_to_end(hermes_store_proc: Proc, seeded_db: Path) -> None:
    listing = hermes_store_proc("--db", str(seeded_db), "sessions", "--json")
    assert json.loads(listing.stdout)[0]["id"] == "gamma-photo"
    table = hermes_store_proc("--db", str(seeded_db), "sessions")
    assert "\x1b[" not in table.stdout
    header = table.stdout.splitlines()[0].split()
    assert header == ["ID", "Title", "Preview", "Source", "Model", "Msgs", "Last", "active"]
    assert "Deploy pipeline" in table.stdout
    hits = hermes_store_proc("--db", str(seeded_db), "search", "docker", "--json")
    assert {hit["session_id"] for hit in json.loads(hits.stdout)} == {"alpha-deploy"}


def test_exit_statuses_end_to_end(hermes_store_proc: Proc, seeded_db: Path) -> None:
    missing = hermes_store_proc("--db", str(seeded_db), "show", "nope", check=False)
    assert missing.returncode == 1
    assert missing.stderr.strip() == "Error: no session matches 'nope' (by id, title or id prefix)"
    assert missing.stdout == ""
    usage = hermes_store_proc("--db", str(seeded_db), "sessions", "--bogus", check=False)
    assert usage.returncode == 2
    assert "No such option" in usage.stderr


def test_environment_url_and_round_trip_end_to_end(
    hermes_store_proc: Proc, seeded_db: Path, tmp_path: Path
) -> None:
    dump = tmp_path / "dump.jsonl"
    hermes_store_proc("export", "-o", str(dump), env={"HERMES_STORE_URL": f"sqlite:///{seeded_db}"})
    copy = tmp_path / "copy.db"
    hermes_store_proc("--db", str(copy), "import", str(dump))
    again = hermes_store_proc("--db", str(copy), "export")
    assert again.stdout == dump.read_text(encoding="utf-8")


def test_stats_and_upgrade_end_to_end(hermes_store_proc: Proc, seeded_db: Path, tmp_path: Path) -> None:
    stats = hermes_store_proc("--db", str(seeded_db), "stats", "--csv")
    assert stats.stdout.startswith("section,key,label,model,sessions")
    fresh = tmp_path / "fresh.db"
    upgraded = hermes_store_proc("--db", str(fresh), "upgrade")
    assert "→ 0020 (head)" in upgraded.stdout
    assert json.loads(hermes_store_proc("--db", str(fresh), "doctor", "--json").stdout)["ok"] is True


def test_completion_script_end_to_end(hermes_store_proc: Proc) -> None:
    script = hermes_store_proc(env={"_HERMES_STORE_COMPLETE": "bash_source"})
    assert "complete -o nosort -F _hermes_store_completion hermes-store" in script.stdout
