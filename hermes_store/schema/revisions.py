"""The Alembic history as the revision scripts on disk say it is, read without Alembic.

The head revision is never written down anywhere else: it is whichever script no other
script names as its ``down_revision``. Adding a revision file is the whole edit. Opening
an up-to-date store compares the database's revision with this head, so reading the
history must stay cheap (no Alembic import on that path, which every open takes): each script's
``revision``/``down_revision``/``schema_version`` assignments are found with a regular
expression, once per script directory per process.

Upstream's ``schema_version`` mirror: revisions ``0001``–``0011`` are upstream schema
versions 1–11 (frozen history, :data:`hermes_store.schema.legacy.LEGACY_REVISIONS`). A later
revision keeps the version of the one before it — our own additions (indexes,
PostgreSQL-only objects) do not change what upstream sees — unless its script declares a
module-level ``schema_version = N`` (0019 declares 17, upstream's current schema).

The Alembic configuration of those scripts (:func:`alembic_config`) is built here too, for
every module that runs them (migrations, the head snapshot's retake), importing Alembic
only when called.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hermes_store.errors import SchemaError
from hermes_store.schema.legacy import version_of_legacy_revision

if TYPE_CHECKING:
    from alembic.config import Config
    from sqlalchemy.engine import URL

OLDEST_RUNNABLE_REVISION = "0019"
"""The oldest revision this release runs on as it is, without migrating (database servers).

Revision 0019 adds the columns upstream's schema 17 reads and writes (``active``,
``compacted``, ``archived``, the routing and handoff columns, …) and this release's
queries name them, so it cannot serve a database below 0019. A server database older than
this is refused on open (:class:`~hermes_store.errors.SchemaBehind`) until
``hermes-store upgrade`` runs; the previous release keeps serving while that runs.
"""

SEARCH_OBJECTS_REVISION = "0012"
"""The revision from which PostgreSQL's search may use the stored ``search_vector``
column and the ``hermes_cjk_grams`` index (see :mod:`hermes_store.search.postgres`)."""

UNICODE61_REVISION = "0014"
"""The revision from which PostgreSQL's ``search_vector`` holds unicode61 words, so word
queries are translated as FTS5 reads them (:mod:`hermes_store.search.fts5_query`); before
it they go through ``phraseto_tsquery`` over PostgreSQL's own parser."""

STORED_GRAMS_REVISION = "0015"
"""The revision from which PostgreSQL's messages hold their CJK grams in ``cjk_grams``
(GIN-indexed), so short CJK terms are found and rechecked without recomputing
``hermes_cjk_grams``; before it search reads revision 0012's expression index."""

ASCII_TRIGRAMS_REVISION = "0016"
"""The revision from which a CJK message's ``cjk_grams`` also hold the lower-cased ASCII
trigrams of its text, so a Latin term beside a short CJK term is looked up there too
instead of in ``pg_trgm``'s index of every message."""

WORD_PAIRS_REVISION = "0017"
"""The revision from which PostgreSQL indexes each message's adjacent word pairs
(``idx_messages_word_pairs`` over ``hermes_word_pairs(search_vector)``), so a quoted
phrase finds its candidates there instead of in its words' posting lists."""

BUCKETED_INDEXES_REVISION = "0018"
"""The revision from which PostgreSQL's search indexes (words, stored grams, word pairs)
also key each message by its id bucket (``id >> 18``), so a search window names its
bucket and reads only that bucket's candidates."""

_ASSIGNMENT = r"^{name}\s*(?::[^=\n]+)?=\s*(?:None|[\"']([^\"'\n]+)[\"'])"
_REVISION = re.compile(_ASSIGNMENT.format(name="revision"), re.MULTILINE)
_DOWN_REVISION = re.compile(_ASSIGNMENT.format(name="down_revision"), re.MULTILINE)
_SCHEMA_VERSION = re.compile(r"^schema_version\s*(?::[^=\n]+)?=\s*(\d+)", re.MULTILINE)


def migrations_path() -> str:
    """Filesystem path of the Alembic scripts.

    Installed (wheel or editable) they are the package ``hermes_store.migrations``. When
    Python runs from a checkout's root, the source folder ``hermes_store/`` shadows the
    installed package and has no ``migrations`` inside (the top-level ``migrations/`` is
    mapped into the package only by the install), so the scripts are taken from beside it.
    """
    try:
        return str(resources.files("hermes_store.migrations"))
    except ModuleNotFoundError:
        checkout = Path(__file__).resolve().parents[2] / "migrations"
        if (checkout / "env.py").is_file():
            return str(checkout)
        raise SchemaError(
            "this hermes_store has no migration scripts (hermes_store.migrations is missing); "
            "reinstall it: pip install --force-reinstall hermes-store"
        ) from None


@dataclass(frozen=True)
class History:
    """A linear revision history, base first, with the ``schema_version`` each leaves."""

    location: str
    revisions: tuple[str, ...]
    schema_versions: tuple[int | None, ...]

    @property
    def head(self) -> str:
        """The newest revision."""
        return self.revisions[-1]

    @property
    def head_schema_version(self) -> int | None:
        """The upstream ``schema_version`` a database at head holds."""
        return self.schema_versions[-1]

    @property
    def next_revision_id(self) -> str:
        """The id a new revision takes: the head's number plus one, four digits (``"0012"``)."""
        if not self.head.isdigit():
            raise SchemaError(f"head revision {self.head!r} is not numbered; pass --rev-id")
        return f"{int(self.head) + 1:04d}"

    def __contains__(self, revision: object) -> bool:
        return revision in self.revisions

    def reaches(self, revision: str | None, floor: str) -> bool:
        """Whether a database at ``revision`` has everything ``floor`` created.

        A revision this history does not know (written by a newer release) counts as
        reaching every floor; ``None`` (no Alembic revision) reaches none. A ``floor``
        missing from the history (another copy of the scripts) is reached by any revision.
        """
        if revision is None:
            return False
        if revision not in self.revisions or floor not in self.revisions:
            return True
        return self.revisions.index(revision) >= self.revisions.index(floor)

    def schema_version_of(self, revision: str) -> int | None:
        """The ``schema_version`` mirrored for ``revision`` (``None``: unknown revision)."""
        if revision not in self.revisions:
            return None
        return self.schema_versions[self.revisions.index(revision)]


@dataclass(frozen=True)
class _Script:
    revision: str
    down_revision: str | None
    schema_version: int | None


@lru_cache(maxsize=16)
def history(location: str | None = None) -> History:
    """The history of the scripts in ``location`` (default: the shipped migrations).

    Read once per location per process: scripts do not change under a running program.
    """
    return _history(str(Path(location or migrations_path()).resolve()))


@lru_cache(maxsize=8)
def _history(location: str) -> History:
    scripts = _read_scripts(Path(location) / "versions")
    if not scripts:
        raise SchemaError(f"no revision scripts in {location}/versions")
    children: dict[str | None, list[_Script]] = {}
    for script in scripts.values():
        children.setdefault(script.down_revision, []).append(script)
    ordered: list[_Script] = []
    parent: str | None = None
    while parent in children:
        successors = children[parent]
        if len(successors) > 1:
            names = ", ".join(sorted(script.revision for script in successors))
            raise SchemaError(f"revisions {names} all follow {parent or 'base'} in {location}: merge them")
        ordered.append(successors[0])
        parent = successors[0].revision
    if len(ordered) != len(scripts):
        stray = sorted(set(scripts) - {script.revision for script in ordered})
        raise SchemaError(f"revisions {', '.join(stray)} in {location} do not descend from base")
    versions: list[int | None] = []
    for script in ordered:
        previous = versions[-1] if versions else None
        declared = script.schema_version or version_of_legacy_revision(script.revision)
        versions.append(declared if declared is not None else previous)
    return History(location, tuple(s.revision for s in ordered), tuple(versions))


def _read_scripts(versions: Path) -> dict[str, _Script]:
    scripts: dict[str, _Script] = {}
    for path in sorted(versions.glob("*.py")):
        text = path.read_text(encoding="utf-8")
        revision = _REVISION.search(text)
        if revision is None or revision.group(1) is None:
            continue  # __init__.py and helpers are not revisions
        down = _DOWN_REVISION.search(text)
        if down is None:
            raise SchemaError(f"{path} has no down_revision (a tuple would be a merge, unsupported)")
        declared = _SCHEMA_VERSION.search(text)
        scripts[revision.group(1)] = _Script(
            revision.group(1), down.group(1), int(declared.group(1)) if declared else None
        )
    return scripts


def alembic_config(
    url: URL | str | None = None, *, script_location: str | None = None, **attributes: Any
) -> Config:
    """An Alembic ``Config`` built in code (no ini file) for the shipped migrations.

    ``script_location`` points it at another copy of the scripts (tests, forks).
    """
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", script_location or migrations_path())
    if url is not None:
        rendered = url if isinstance(url, str) else url.render_as_string(hide_password=False)
        config.set_main_option("sqlalchemy.url", rendered.replace("%", "%%"))
        config.cmd_opts = None
    config.attributes["configure_logger"] = False
    config.attributes.update(attributes)
    return config
