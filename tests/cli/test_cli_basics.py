"""The command line's conventions: store selection, exit statuses, colour, completion."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from click.shell_completion import CompletionItem
from click.testing import CliRunner, Result

from hermes_store.cli import cli
from hermes_store.cli.resolve import complete_session

Invoke = Callable[..., Result]


def test_help_lists_every_command(runner: CliRunner) -> None:
    result = runner.invoke(cli, ["--help"])
    assert result.exit_code == 0
    for name in cli.commands:
        assert name in result.output
    assert "_HERMES_STORE_COMPLETE=bash_source hermes-store" in result.output


def test_version(runner: CliRunner) -> None:
    result = runner.invoke(cli, ["--version"])
    assert result.exit_code == 0
    assert "hermes-store" in result.output


def test_usage_error_exits_2(runner: CliRunner, seeded_db: Path) -> None:
    result = runner.invoke(cli, ["--db", str(seeded_db), "sessions", "--limit", "0"])
    assert result.exit_code == 2
    assert "Usage:" in result.output
    result = runner.invoke(cli, ["--db", str(seeded_db), "no-such-command"])
    assert result.exit_code == 2


def test_db_and_url_together_is_a_usage_error(runner: CliRunner, seeded_db: Path) -> None:
    result = runner.invoke(cli, ["--db", str(seeded_db), "--url", f"sqlite:///{seeded_db}", "info"])
    assert result.exit_code == 2
    assert "either --db or --url" in result.output


def test_missing_session_is_one_line_error(invoke: Invoke) -> None:
    result = invoke("show", "does-not-exist", status=1)
    assert result.output.strip() == "Error: no session matches 'does-not-exist' (by id, title or id prefix)"
    assert "Traceback" not in result.output


def test_missing_database_is_not_created(runner: CliRunner, tmp_path: Path) -> None:
    target = tmp_path / "absent.db"
    # `current` answers "no database" instead (see test_cli_reads_never_write.py).
    for command in (["sessions"], ["info"], ["doctor"], ["search", "x"], ["backup", "b.db"]):
        result = runner.invoke(cli, ["--db", str(target), *command])
        assert result.exit_code == 1, (command, result.output)
        assert result.output.startswith("Error: no database at"), result.output
    assert not target.exists()


def test_not_a_database_is_reported_on_one_line(runner: CliRunner, tmp_path: Path) -> None:
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not sqlite" * 100)
    for command in (["info"], ["sessions"]):
        result = runner.invoke(cli, ["--db", str(junk), *command])
        assert result.exit_code == 1, result.output
        assert result.output.startswith("Error:")
        assert len(result.output.strip().splitlines()) == 1
        assert "Traceback" not in result.output


def test_url_option_and_environment(runner: CliRunner, seeded_db: Path) -> None:
    url = f"sqlite:///{seeded_db}"
    by_option = runner.invoke(cli, ["--url", url, "sessions", "--json"])
    assert by_option.exit_code == 0, by_option.output
    by_env = runner.invoke(cli, ["sessions", "--json"], env={"HERMES_STORE_URL": url})
    assert by_env.exit_code == 0, by_env.output
    assert json.loads(by_option.output) == json.loads(by_env.output)
    # An explicit --db wins over the environment.
    other = runner.invoke(
        cli, ["--db", str(seeded_db.parent / "nope.db"), "sessions"], env={"HERMES_STORE_URL": url}
    )
    assert other.exit_code == 1


def test_default_database_is_hermes_home(runner: CliRunner, seeded_db: Path) -> None:
    result = runner.invoke(cli, ["info", "--json"], env={"HERMES_HOME": str(seeded_db.parent)})
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["path"] == str(seeded_db)


def test_no_colour_when_not_a_terminal(invoke: Invoke) -> None:
    for args in (["sessions"], ["search", "deploy"], ["stats"], ["show", "alpha-deploy"], ["doctor"]):
        assert "\x1b[" not in invoke(*args).output


def test_no_color_flag_beats_forced_colour(runner: CliRunner, seeded_db: Path) -> None:
    forced = runner.invoke(cli, ["--db", str(seeded_db), "sessions"], env={"FORCE_COLOR": "1"})
    assert "\x1b[" in forced.output
    plain = runner.invoke(cli, ["--db", str(seeded_db), "--no-color", "sessions"], env={"FORCE_COLOR": "1"})
    assert "\x1b[" not in plain.output


def test_bash_completion_script(runner: CliRunner) -> None:
    result = runner.invoke(cli, [], prog_name="hermes-store", env={"_HERMES_STORE_COMPLETE": "bash_source"})
    assert result.exit_code == 0
    assert "_hermes_store_completion" in result.output


def test_session_ids_complete_from_the_store(seeded_db: Path) -> None:
    import click

    root = click.Context(cli, info_name="hermes-store")
    root.params = {"db": str(seeded_db), "url": None}
    ctx = click.Context(cli.commands["show"], parent=root, info_name="show")
    items = complete_session(ctx, cli.commands["show"].params[0], "alpha")
    assert isinstance(items[0], CompletionItem)
    assert {item.value for item in items} == {"alpha-deploy", "alpha-deploy-sub"}
    root.params = {"db": str(seeded_db.parent / "missing.db"), "url": None}
    assert complete_session(ctx, cli.commands["show"].params[0], "a") == []
    assert not (seeded_db.parent / "missing.db").exists()


def test_progress_bars_are_drawn_on_a_terminal(runner: CliRunner, seeded_db: Path, tmp_path: Path) -> None:
    # FORCE_COLOR makes rich treat stderr as a terminal; data on stdout stays plain.
    env = {"FORCE_COLOR": "1"}
    export = runner.invoke(cli, ["--db", str(seeded_db), "export"], env=env)
    assert export.exit_code == 0
    assert "Exporting" in export.stderr
    assert "Exporting" not in export.stdout and "\x1b[" not in export.stdout
    backup = runner.invoke(
        cli, ["--db", str(seeded_db), "backup", str(tmp_path / "b.db"), "--pages", "1"], env=env
    )
    assert "Backing up" in backup.stderr
    older = runner.invoke(cli, ["--db", str(tmp_path / "new.db"), "upgrade", "0011"], env=env)
    assert older.exit_code == 0
    upgrade = runner.invoke(cli, ["--db", str(tmp_path / "new.db"), "upgrade"], env=env)
    assert "upgrade 0011 -> 0012" in upgrade.stderr


def test_progress_bars_are_hidden_in_pipes(invoke: Invoke, tmp_path: Path) -> None:
    assert "Exporting" not in invoke("export", "-o", str(tmp_path / "x.jsonl")).output


def test_readme_main_job_on_a_fresh_home_creates_the_default_store(
    tmp_path: Path, hermes_store_proc: Callable[..., Any]
) -> None:
    """The README's first command on a machine where Hermes never ran (no ~/.hermes)."""
    home = tmp_path / "home"
    home.mkdir()
    env = {"HOME": str(home)}
    hermes_store_proc("upgrade", env=env)
    info = hermes_store_proc("info", env=env)
    store = home / ".hermes" / "state.db"
    assert store.is_file()
    assert str(store) in info.stdout
    assert (store.parent.stat().st_mode & 0o777) == 0o700


def test_a_mistyped_db_folder_is_still_refused_and_not_created(
    tmp_path: Path, hermes_store_proc: Callable[..., Any]
) -> None:
    missing = tmp_path / "no" / "such" / "dir" / "x.db"
    result = hermes_store_proc("--db", str(missing), "upgrade", check=False)
    assert result.returncode != 0
    assert "mkdir -p" in result.stderr
    assert not (tmp_path / "no").exists()
