"""The Hermes Agent releases this drop-in serves, and the Hermes that is running it.

The drop-in follows upstream's store at one commit (schema 17). A Hermes release after it
calls methods and keywords the drop-in lacks; Hermes' own handlers swallow the
``AttributeError``/``TypeError`` that follow and the transcripts are lost without a word.
So the first ``SessionDB(...)`` of a process finds out which Hermes imports the drop-in
and refuses a release outside :data:`SERVED_HERMES_RELEASES` with one line
(:class:`~hermes_store.errors.UnsupportedHermes`), unless
:data:`ALLOW_UNSUPPORTED_HERMES_ENV` says the user accepts the risk.

Which Hermes runs is looked up once per process (:func:`running_hermes_version`):

1. the source tree of Hermes' modules already imported (Hermes imports ``hermes_state``
   from its own packages, so one of them is in ``sys.modules`` by then): its
   ``pyproject.toml``, when that names the ``hermes-agent`` project. The tree comes first
   because it is the code that runs: an editable install's metadata keeps the version it
   was installed at after a ``git pull``;
2. else the installed ``hermes-agent`` distribution's metadata (a wheel install, whose
   modules sit in ``site-packages`` with no ``pyproject.toml``);
3. else no Hermes: a program using the library, for which nothing changes.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import threading
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from hermes_store import __version__ as STORE_VERSION
from hermes_store.drop_in import LOGGER_NAME
from hermes_store.errors import UnsupportedHermes

log = logging.getLogger(LOGGER_NAME)

HERMES_DISTRIBUTION = "hermes-agent"
"""Upstream's distribution (and ``[project]``) name."""

ALLOW_UNSUPPORTED_HERMES_ENV = "HERMES_STORE_ALLOW_UNSUPPORTED_HERMES"
"""Set to ``1`` to run a Hermes outside the served releases anyway (warned on every start)."""

HERMES_TOP_LEVEL_MODULES = (
    "hermes_cli",
    "run_agent",
    "gateway",
    "tui_gateway",
    "acp_adapter",
    "cron",
    "cli",
    "hermes_constants",
)
"""Hermes' entry points and the top-level modules they import first (upstream's
``[project.scripts]`` and ``py-modules``); any of them locates the tree Hermes runs from."""


@dataclass(frozen=True)
class HermesReleases:
    """The releases from ``first`` up to, not including, ``beyond``.

    Versions compare by their release numbers only: a pre-release or development build of
    ``beyond`` counts as ``beyond`` (it already has that release's store), a local label
    (``+…``) is ignored, and a version that does not start with numbers is outside.
    """

    first: str
    beyond: str

    def __contains__(self, version: object) -> bool:
        numbers = release_numbers(str(version))
        first, beyond = release_numbers(self.first), release_numbers(self.beyond)
        assert first is not None and beyond is not None, "the bounds are release numbers"
        return numbers is not None and first <= numbers < beyond

    def __str__(self) -> str:
        return f">={self.first},<{self.beyond}"


SERVED_HERMES_RELEASES = HermesReleases(first="0.18.0", beyond="0.18.1")
"""The Hermes releases this drop-in serves: 0.18.0, the release whose store (schema 17, the
API at the commit the drop-in follows) it re-implements. 0.17.0 kept schema 16; 0.18.1
moved to schema 19 and added methods and keywords."""

_RELEASE = re.compile(r"\s*v?(\d+(?:\.\d+)*)")


def release_numbers(version: str) -> tuple[int, ...] | None:
    """``(0, 18, 0)`` for ``"0.18.0"`` (trailing zeros dropped, so ``1.0 == 1``); ``None``
    when ``version`` does not start with a release number."""
    match = _RELEASE.match(version)
    if match is None:
        return None
    numbers = [int(part) for part in match.group(1).split(".")]
    while len(numbers) > 1 and numbers[-1] == 0:
        numbers.pop()
    return tuple(numbers)


def running_hermes_version() -> str | None:
    """The version of the Hermes running this process (see the module's description), or
    ``None`` when there is none. Looked up on the first call, then remembered."""
    global _running_hermes
    if _running_hermes is _NOT_LOOKED_UP:
        _running_hermes = _tree_version() or _installed_version()
    return _running_hermes


_NOT_LOOKED_UP = "<not looked up>"
_running_hermes: str | None = _NOT_LOOKED_UP


def _tree_version() -> str | None:
    """The version in the ``pyproject.toml`` of the tree an imported Hermes module lives in."""
    for name in HERMES_TOP_LEVEL_MODULES:
        module = sys.modules.get(name)
        file = getattr(module, "__file__", None)
        if not isinstance(file, str):
            continue
        source = Path(file)
        tree = source.parent.parent if source.name == "__init__.py" else source.parent
        version = _hermes_pyproject_version(tree / "pyproject.toml")
        if version is not None:
            return version
    return None


def _hermes_pyproject_version(pyproject: Path) -> str | None:
    """``[project].version`` of ``pyproject`` when it is Hermes' (``name = "hermes-agent"``)."""
    try:
        project = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("project", {})
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None  # no pyproject here, or not one a Hermes tree would hold
    if not isinstance(project, dict) or project.get("name") != HERMES_DISTRIBUTION:
        return None
    version = project.get("version")
    return _one_line(str(version)) if version is not None else None


def _installed_version() -> str | None:
    try:
        version: object = metadata.version(HERMES_DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return None
    return _one_line(version) if isinstance(version, str) else None  # None for a METADATA without one


def _one_line(version: str) -> str:
    """``version`` fit for a one-line message, whatever a file holds."""
    return " ".join(version.split()) or "(empty)"


def check_hermes_served() -> None:
    """Raise :class:`UnsupportedHermes` when the running Hermes is outside
    :data:`SERVED_HERMES_RELEASES`; with the override set, warn instead on the first call
    of the process. No Hermes, or a served one: nothing. After the first call it costs
    one comparison."""
    global _verdict
    if _verdict is _SERVED:
        return
    if _verdict is None:
        with _first_verdict_lock:  # two threads' first stores: one lookup, one warning
            if _verdict is None:
                _verdict = _first_verdict()
    if _verdict is not _SERVED:
        raise UnsupportedHermes(_verdict)


_SERVED = "<served>"
_verdict: str | None = None
"""``None`` before the first check, ``_SERVED`` when construction goes on, else the refusal."""
_first_verdict_lock = threading.Lock()


def _first_verdict() -> str:
    version = running_hermes_version()
    if version is None or version in SERVED_HERMES_RELEASES:
        return _SERVED
    if os.environ.get(ALLOW_UNSUPPORTED_HERMES_ENV, "").strip() not in ("", "0"):
        log.warning(
            "Hermes Agent %s runs on the hermes_store %s drop-in, which serves Hermes %s only; "
            "%s is set, so it goes on: calls this drop-in lacks raise DropInLacksMethod or "
            "DropInLacksKeyword and their transcripts are lost",
            version,
            STORE_VERSION,
            SERVED_HERMES_RELEASES,
            ALLOW_UNSUPPORTED_HERMES_ENV,
        )
        for callback in _when_unsupported_accepted:
            callback()
        return _SERVED
    return (
        f"Hermes Agent {version} is not served by the hermes_store {STORE_VERSION} drop-in "
        f"(it serves Hermes {SERVED_HERMES_RELEASES}): restore Hermes' own hermes_state.py, "
        f"or set {ALLOW_UNSUPPORTED_HERMES_ENV}=1 to run anyway and risk losing transcripts"
    )


_when_unsupported_accepted: list[Callable[[], None]] = []


def when_unsupported_hermes_accepted(callback: Callable[[], None]) -> None:
    """Have ``callback`` run once, when the override lets an unserved Hermes go on: the
    drop-in then translates its methods' ``TypeError`` for arguments they do not take
    (a cost only that Hermes pays, never a served one or a plain program)."""
    _when_unsupported_accepted.append(callback)
