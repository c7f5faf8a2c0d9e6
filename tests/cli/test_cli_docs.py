"""``docs/cli.md`` documents every command and every option of ``hermes-store``."""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest

from hermes_store.cli import cli

DOCS = Path(__file__).resolve().parents[2] / "docs" / "cli.md"


def _sections() -> dict[str, str]:
    """Command name → the text of its ``## `hermes-store NAME …``` section."""
    text = DOCS.read_text(encoding="utf-8")
    sections: dict[str, str] = {}
    for match in re.finditer(r"^## `hermes-store ([a-z-]+)[^`]*`\n(.*?)(?=^## |\Z)", text, re.M | re.S):
        sections[match.group(1)] = match.group(2)
    return sections


@pytest.mark.parametrize("name", sorted(cli.commands))
def test_command_is_documented(name: str) -> None:
    sections = _sections()
    assert name in sections, f"docs/cli.md has no '## `hermes-store {name} …`' section"
    command = cli.commands[name]
    for parameter in command.params:
        if isinstance(parameter, click.Option) and not parameter.hidden:
            longest = max(parameter.opts, key=len)
            assert longest in sections[name], f"option {longest} of '{name}' is not documented"


def test_global_options_and_completion_are_documented() -> None:
    text = DOCS.read_text(encoding="utf-8")
    for option in ("--db", "--url", "HERMES_STORE_URL", "--no-color", "HERMES_HOME"):
        assert option in text
    assert "_HERMES_STORE_COMPLETE=bash_source hermes-store" in text
    assert "Exit status" in text


def test_the_head_revision_the_docs_show_is_the_shipped_head() -> None:
    from hermes_store.schema.revisions import history

    text = DOCS.read_text(encoding="utf-8")
    shown = (
        re.findall(r"→ (\d{4}) \(head\)", text)
        + re.findall(r"currently `(\d{4})`", text)
        + re.findall(r"`0001` … `(\d{4})`", text)
    )
    assert len(shown) >= 4, shown
    assert set(shown) == {history().head}, shown
