"""Smoke test of ``python -m benchmarks.bench_async --quick``: it runs and reports every figure.

No timing is asserted (the figures go to docs/benchmarks.md from a full run); the test
proves the benchmark runs both sides at 1, 10 and 100 callers and reports a ratio for
each, plus the loop-stall figure.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

from support import REPO_ROOT

RATIO = re.compile(r"\| \d+\.\d\dx \|$")


def test_quick_async_benchmark_reports_every_figure() -> None:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.bench_async", "--quick"],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| sqlite: ")]
    for callers in (1, 10, 100):
        for figure in ("appends/s", "search p50", "search p99"):
            label = f"| sqlite: {figure}, {callers} callers |"
            matching = [row for row in rows if row.startswith(label)]
            assert matching and RATIO.search(matching[0]), f"{label} missing:\n{proc.stdout}"
    assert any(row.startswith("| sqlite: one append call") and RATIO.search(row) for row in rows)
    assert any(row.startswith("| sqlite: max loop stall") for row in rows)
