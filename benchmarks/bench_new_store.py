"""Creating a new store file: upstream Hermes, the raw sqlite3 baseline and hermes_store.

Hermes creates ``state.db`` on its first run, and its own tests open a new file in almost
every test. Two figures per side, the sides in rotating order round by round:

* **first in a process** — a fresh ``python -c`` child imports the store (not timed), then
  times opening a new file and closing it;
* **next in the same process** — the median of ``--files`` more new files opened and
  closed in that child after the first.

::

    python -m benchmarks.bench_new_store [--rounds 5] [--files 30]

Prints milliseconds and the ratio to upstream (the upstream column is skipped with a
message when the mirror is absent), with the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.bench_targets import load_average
from benchmarks.upstream import upstream_folder

REPO_ROOT = Path(__file__).resolve().parent.parent

CHILD = """
import json, sys, time
from pathlib import Path
from benchmarks.bench_targets import open_store

side, folder, upstream, files = sys.argv[1], Path(sys.argv[2]), sys.argv[3], int(sys.argv[4])
upstream_path = Path(upstream) if upstream else None
timings = []
for n in range(files + 1):
    if n == 0 and side == "upstream":
        open_store(side, folder / "warm-import.db", upstream_path).close()  # import only
    started = time.perf_counter()
    open_store(side, folder / f"new-{n}.db", upstream_path).close()
    timings.append((time.perf_counter() - started) * 1000)
print(json.dumps({"first": timings[0], "next": sorted(timings[1:])[len(timings[1:]) // 2]}))
"""

_IMPORTS = {
    "hermes_store": "from hermes_store import SessionDB\n",
    "sqlite3": "import benchmarks.baseline_sqlite\n",
    "upstream": "",
}


def one_child(side: str, upstream: Path | None, files: int) -> dict[str, float]:
    """One fresh process's figures for ``side``."""
    with tempfile.TemporaryDirectory() as folder:
        result = subprocess.run(
            [sys.executable, "-c", _IMPORTS[side] + CHILD, side, folder, str(upstream or ""), str(files)],
            capture_output=True,
            text=True,
            check=True,
            cwd=REPO_ROOT,
            env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
            timeout=600,
        )
    figures: dict[str, float] = json.loads(result.stdout.strip().splitlines()[-1])
    return figures


def main(argv: list[str] | None = None) -> int:
    """Run the rounds and print the table."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--files", type=int, default=30)
    args = parser.parse_args(argv)
    upstream = upstream_folder()
    sides = ["upstream", "sqlite3", "hermes_store"] if upstream else ["sqlite3", "hermes_store"]
    if upstream is None:
        print("upstream Hermes skipped: no mirror of 0xK8oX/hermes-agent (see benchmarks/upstream.py)")
    print(f"load average before: {load_average()}")
    samples: dict[str, dict[str, list[float]]] = {side: {"first": [], "next": []} for side in sides}
    for round_ in range(args.rounds):
        for side in sides[round_ % len(sides) :] + sides[: round_ % len(sides)]:
            for key, value in one_child(side, upstream, args.files).items():
                samples[side][key].append(value)
    print(f"load average after: {load_average()}")
    print(f"{'side':<14} {'first in a process':>20} {'next in the process':>20}")
    for side in sides:
        cells = []
        for key in ("first", "next"):
            value = statistics.median(samples[side][key])
            ratio = value / statistics.median(samples["upstream"][key]) if upstream else None
            cells.append(f"{value:.1f} ms" + (f" ({ratio:.2f}×)" if ratio is not None else ""))
        print(f"{side:<14} {cells[0]:>20} {cells[1]:>20}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
