"""The live indexed-text expression is the one the revisions froze (one definition).

Revisions keep their own copies (a revision never changes), so this test is what keeps the
search code, ``doctor`` and the indexes the revisions built in agreement.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

from support import REPO_ROOT

from hermes_store.schema import fts_ddl
from hermes_store.schema.indexed_text import INDEXED_TEXT, indexed_text


def _revision(name: str) -> ModuleType:
    path = Path(REPO_ROOT, "migrations", "versions", name)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_postgresql_revisions_froze_this_expression() -> None:
    for name in ("0011_inline_fts_with_tool_fields.py", "0012_postgresql_search_at_scale.py"):
        assert f"({indexed_text()})" == _revision(name).INDEXED_TEXT, name
    assert f"({indexed_text('m.')})" == INDEXED_TEXT


def test_the_sqlite_triggers_of_revision_0011_index_this_expression() -> None:
    source = Path(REPO_ROOT, "migrations", "versions", "0011_inline_fts_with_tool_fields.py").read_text()
    assert source.count(indexed_text("new.")) == 4
    assert source.count(f"SELECT id, {indexed_text()}") == 2
    # doctor (and the store on open) recreate the same triggers from it.
    assert all(
        indexed_text("new.") in sql
        for name, sql in fts_ddl.fts_triggers("messages_fts").items()
        if "delete" not in name
    )
