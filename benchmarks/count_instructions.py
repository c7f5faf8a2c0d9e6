"""Instructions per append, counted with valgrind's callgrind: upstream Hermes, raw sqlite3, hermes_store.

Seconds on this shared 2-core VM move with the load and the disk; instructions do not. Each
side runs in a child process under ``valgrind --tool=callgrind`` on a file in ``/dev/shm``
(no fsync cost: the write path's CPU only): it opens a new store, creates a session,
appends ``--warmup`` messages of the realistic mix (``bench_targets.messages_for``), then
``--appends`` more. The same run without the last appends is subtracted, so start-up,
imports and the warm-up cancel out::

    python -m benchmarks.count_instructions [--appends 300] [--warmup 200] [--upstream-commit SHA]

Prints instructions per append and the ratio to upstream Hermes (skipped with a message
when the upstream mirror is absent). A run takes a few minutes: Python runs about fifty
times slower under callgrind.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.bench_targets import load_average
from benchmarks.upstream import HEAD_COMMIT, upstream_folder

REPO_ROOT = Path(__file__).resolve().parent.parent

CHILD = """
import sys
from pathlib import Path
from benchmarks.bench_targets import messages_for, open_store

side, path, upstream, warmup, appends = sys.argv[1:6]
db = open_store(side, Path(path), Path(upstream) if upstream else None)
db.create_session("s", "cli")
messages = messages_for(7, int(warmup) + int(appends))
for message in messages:
    db.append_message("s", **message)
db.close()
"""

_TOTALS = re.compile(r"^(?:totals|summary):\s+(\d+)", re.MULTILINE)


def count(side: str, upstream: Path | None, warmup: int, appends: int, folder: Path) -> int:
    """Instructions of one child run that makes ``warmup + appends`` appends on ``side``."""
    database = folder / f"{side}-{appends}.db"
    out = folder / f"{side}-{appends}.callgrind"
    command = [
        "valgrind",
        "--tool=callgrind",
        f"--callgrind-out-file={out}",
        sys.executable,
        "-c",
        CHILD,
        side,
        str(database),
        str(upstream or ""),
        str(warmup),
        str(appends),
    ]
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    subprocess.run(command, check=True, capture_output=True, env=env, cwd=REPO_ROOT, timeout=3600)
    match = _TOTALS.search(out.read_text())
    if match is None:
        raise RuntimeError(f"no totals in {out}")
    return int(match.group(1))


def per_append(side: str, upstream: Path | None, warmup: int, appends: int) -> float:
    """Instructions per append on ``side``: a run with ``appends`` more, minus one without."""
    with tempfile.TemporaryDirectory(dir="/dev/shm") as directory:
        folder = Path(directory)
        with_them = count(side, upstream, warmup, appends, folder)
        without = count(side, upstream, warmup, 0, folder)
    return (with_them - without) / appends


def main(argv: list[str] | None = None) -> int:
    """Count every side and print the table."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--appends", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--sides", default="upstream,sqlite3,hermes_store")
    parser.add_argument(
        "--upstream-commit",
        default=HEAD_COMMIT,
        help="the upstream Hermes commit to compare with (default: the one the drop-in follows)",
    )
    args = parser.parse_args(argv)
    if shutil.which("valgrind") is None:
        print("valgrind is not installed (apt-get install valgrind)")
        return 1
    upstream = upstream_folder(args.upstream_commit)
    sides = [side for side in args.sides.split(",") if side != "upstream" or upstream is not None]
    if upstream is None:
        print("upstream Hermes skipped: no mirror of 0xK8oX/hermes-agent (see benchmarks/upstream.py)")
    print(f"load average before: {load_average()}")
    figures = {side: per_append(side, upstream, args.warmup, args.appends) for side in sides}
    print(f"load average after: {load_average()}")
    print(f"{'side':<14} {'instructions/append':>20} {'over upstream':>14}")
    for side, value in figures.items():
        ratio = f"{value / figures['upstream']:.3f}×" if "upstream" in figures else "—"
        print(f"{side:<14} {value:>20,.0f} {ratio:>14}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
