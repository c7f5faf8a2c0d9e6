"""Cold start: a new Python process imports the store, opens an up-to-date database, reads once.

Three kinds of fresh ``python -c`` process run in rotating order:

* baseline — ``from benchmarks.baseline_sqlite import BaselineStore``, open, ``message_count(id)``;
* reference — a bare ``import sqlalchemy.orm`` (what any SQLAlchemy-based store must pay);
* store — ``from hermes_store import SessionDB``, open, ``message_count(id)``.

Each child times itself from its first statement to the end of the read, so interpreter start-up
(identical for all three) is left out; the parent's wall time per process is kept as detail. The
store child also reports whether any ``alembic`` module was imported: opening a database that is
already at head must not load the migration machinery.

Target: store ≤ 1.3 × (reference + baseline).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks.config import RunConfig
from benchmarks.datasets import Dataset
from benchmarks.report import Figure, Target
from benchmarks.timing import median

__all__ = ["run"]

SCENARIO = "cold start"
REPO_ROOT = Path(__file__).resolve().parent.parent

_PRELUDE = "import time\n_t0 = time.perf_counter()\n"
_EPILOGUE = (
    "_t1 = time.perf_counter()\n"
    "import json, sys\n"
    "_alembic = sorted(m for m in sys.modules if m == 'alembic' or m.startswith('alembic.'))\n"
    "print(json.dumps({'seconds': _t1 - _t0, 'alembic': len(_alembic), 'result': _n}))\n"
)
CODE = {
    "baseline": _PRELUDE
    + "from benchmarks.baseline_sqlite import BaselineStore\n"
    + "_db = BaselineStore(__PATH__)\n_n = _db.message_count(__SID__)\n"
    + _EPILOGUE
    + "_db.close()\n",
    "sqlalchemy": _PRELUDE + "import sqlalchemy.orm\n_n = 0\n" + _EPILOGUE,
    "store": _PRELUDE
    + "from hermes_store import SessionDB\n"
    + "_db = SessionDB(__PATH__)\n_n = _db.message_count(__SID__)\n"
    + _EPILOGUE
    + "_db.close()\n",
}


def _child(kind: str, path: Path, session_id: str) -> tuple[dict[str, float], float]:
    code = CODE[kind].replace("__PATH__", repr(str(path))).replace("__SID__", repr(session_id))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"{kind} cold-start child failed:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1]), wall


def run(cfg: RunConfig, dataset: Dataset, log: Callable[[str], None] = print) -> list[Figure]:
    """``cfg.cold_rounds`` processes of each kind; three figures."""
    paths = {
        "baseline": dataset.baseline_path,
        "sqlalchemy": dataset.baseline_path,
        "store": dataset.store_path,
    }
    kinds = list(paths)
    seconds: dict[str, list[float]] = {k: [] for k in kinds}
    walls: dict[str, list[float]] = {k: [] for k in kinds}
    alembic_loaded = 0
    results: dict[str, float] = {}
    for _ in range(1):  # one untimed start of each, to warm the OS caches
        for kind in kinds:
            _child(kind, paths[kind], dataset.long_session_id)
    for r in range(cfg.cold_rounds):
        shift = r % len(kinds)
        for kind in kinds[shift:] + kinds[:shift]:
            report, wall = _child(kind, paths[kind], dataset.long_session_id)
            seconds[kind].append(report["seconds"])
            walls[kind].append(wall)
            results[kind] = report["result"]
            if kind == "store":
                alembic_loaded = max(alembic_loaded, int(report["alembic"]))
    base, ref, store = (median(seconds[k]) for k in kinds)
    log(
        f"  baseline {base * 1e3:.1f} ms, import sqlalchemy.orm {ref * 1e3:.1f} ms, "
        f"hermes_store {store * 1e3:.1f} ms; alembic modules loaded by the store: {alembic_loaded}"
    )
    walls_note = ", ".join(f"{k} {median(walls[k]) * 1e3:.0f} ms" for k in kinds)
    same_answer = "" if results["baseline"] == results["store"] else "; read results differ"
    return [
        Figure(
            SCENARIO,
            "import + open + one read (new process)",
            "s",
            base,
            store,
            note=f"process wall time incl. interpreter: {walls_note}{same_answer}",
        ),
        Figure(
            SCENARIO,
            "vs budget: import sqlalchemy.orm + baseline",
            "s",
            ref + base,
            store,
            Target("ratio_max", 1.3),
            note=f"import sqlalchemy.orm alone: {ref * 1e3:.1f} ms",
        ),
        Figure(
            SCENARIO,
            "Alembic imported opening an up-to-date database",
            "bool",
            0,
            alembic_loaded,
            Target("store_zero"),
        ),
    ]
