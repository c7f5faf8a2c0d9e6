"""The head revision comes from the scripts; adding one is the whole edit.

A copy of the shipped migrations gets one more revision (an index on ``messages``);
nothing else is edited. Stores are pointed at the copy with ``ensure_schema(…,
script_location=…)``, the path a store's opening takes.
"""

from __future__ import annotations

import shutil
import sqlite3
import warnings
from contextlib import closing
from pathlib import Path

import pytest
from alembic.script import ScriptDirectory

from hermes_store import SessionDB, create_engine, ensure_schema
from hermes_store.errors import SchemaError
from hermes_store.schema.legacy import HEAD_VERSION, NewerSchemaWarning
from hermes_store.schema.migrate import alembic_config, migrations_path
from hermes_store.schema.revisions import history

NEW_REVISION = '''"""Index messages by role (a revision added by a test).

Revision ID: {new}
Revises: {head}
"""

from alembic import op

revision = "{new}"
down_revision = "{head}"
branch_labels = None
depends_on = None
{extra}

def upgrade() -> None:
    op.create_index("idx_test_messages_role", "messages", ["role"])


def downgrade() -> None:
    op.drop_index("idx_test_messages_role", table_name="messages")
'''


def scripts_with_one_more_revision(tmp_path: Path, extra: str = "") -> tuple[str, str]:
    """A copy of the shipped scripts plus one revision after head: (location, new id)."""
    location = tmp_path / "migrations"
    shutil.copytree(migrations_path(), location, ignore=shutil.ignore_patterns("__pycache__"))
    head = history().head
    new = f"{int(head) + 1:04d}"
    text = NEW_REVISION.format(new=new, head=head, extra=extra)
    (location / "versions" / f"{new}_index_messages_by_role.py").write_text(text)
    return str(location), new


def catalogue(path: Path) -> tuple[str, int, bool]:
    with closing(sqlite3.connect(path)) as conn:
        revision = conn.execute("SELECT version_num FROM alembic_version").fetchone()[0]
        version = conn.execute("SELECT MAX(version) FROM schema_version").fetchone()[0]
        index = conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'index' AND name = 'idx_test_messages_role'"
        ).fetchone()
    return str(revision), int(version), index is not None


def test_the_derived_history_is_alembics(tmp_path: Path) -> None:
    scripts = ScriptDirectory.from_config(alembic_config())
    walked = tuple(reversed([script.revision for script in scripts.walk_revisions()]))
    assert history().revisions == walked
    assert history().head == scripts.get_current_head()
    assert history().schema_version_of("0007") == 7
    assert history().head_schema_version == HEAD_VERSION  # upstream's current schema
    location, new = scripts_with_one_more_revision(tmp_path)
    assert history(location).head == new
    assert history(location).schema_version_of(new) == HEAD_VERSION


def test_an_existing_store_upgrades_to_an_added_revision(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    with SessionDB(path) as db:
        db.create_session("s", "cli")
        db.append_message("s", "user", "kept across the upgrade")
    assert catalogue(path) == (history().head, HEAD_VERSION, False)
    location, new = scripts_with_one_more_revision(tmp_path)
    engine = create_engine(path)
    with warnings.catch_warnings():
        warnings.simplefilter("error", NewerSchemaWarning)
        state = ensure_schema(engine, script_location=location)
    engine.dispose()
    assert state.at_head and not state.newer
    assert catalogue(path) == (new, HEAD_VERSION, True)
    with closing(sqlite3.connect(path)) as conn:
        assert conn.execute("SELECT content FROM messages").fetchall() == [("kept across the upgrade",)]


def test_a_fresh_store_built_with_an_added_revision_is_not_newer_than_itself(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    location, new = scripts_with_one_more_revision(tmp_path)
    engine = create_engine(path, prepare=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", NewerSchemaWarning)
        first = ensure_schema(engine, script_location=location)
        again = ensure_schema(engine, script_location=location)
    engine.dispose()
    assert (first.revision, again.revision) == (new, new)
    assert again.at_head and not again.newer
    assert catalogue(path) == (new, HEAD_VERSION, True)
    # The shipped release, which lacks that revision, knows the file is newer than itself.
    with pytest.warns(NewerSchemaWarning, match=new):
        SessionDB(path).close()


def test_a_revision_may_declare_the_schema_version_it_leaves(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    later = HEAD_VERSION + 1
    location, new = scripts_with_one_more_revision(tmp_path, extra=f"schema_version = {later}\n")
    assert history(location).schema_version_of(new) == later
    engine = create_engine(path, prepare=True)
    ensure_schema(engine, script_location=location)
    engine.dispose()
    assert catalogue(path) == (new, later, True)


def test_a_branched_history_is_refused(tmp_path: Path) -> None:
    location, new = scripts_with_one_more_revision(tmp_path)
    twin = Path(location) / "versions" / "twin.py"
    twin.write_text(
        (Path(location) / "versions" / f"{new}_index_messages_by_role.py")
        .read_text()
        .replace(f'revision = "{new}"', 'revision = "twin"')
    )
    with pytest.raises(SchemaError, match="merge"):
        history(location)


def write_scripts(tmp_path: Path, *scripts: str) -> str:
    versions = tmp_path / "scripts" / "versions"
    versions.mkdir(parents=True)
    (versions / "__init__.py").write_text("")
    for number, text in enumerate(scripts):
        (versions / f"r{number}.py").write_text(text)
    return str(versions.parent)


@pytest.mark.parametrize(
    ("scripts", "complaint"),
    [
        ((), "no revision scripts"),
        (('revision = "a"\n',), "no down_revision"),
        (('revision = "a"\ndown_revision = None\n', 'revision = "b"\ndown_revision = "x"\n'), "descend"),
    ],
)
def test_unreadable_histories_are_refused_with_a_reason(
    tmp_path: Path, scripts: tuple[str, ...], complaint: str
) -> None:
    with pytest.raises(SchemaError, match=complaint):
        history(write_scripts(tmp_path, *scripts))


def test_annotated_assignments_are_read(tmp_path: Path) -> None:
    location = write_scripts(
        tmp_path,
        'revision: str = "a"\ndown_revision: str | None = None\n',
        "revision: str = 'b'\ndown_revision: Union[str, None] = 'a'\nschema_version: int = 3\n",
    )
    assert history(location).revisions == ("a", "b")
    assert history(location).schema_versions == (None, 3)
