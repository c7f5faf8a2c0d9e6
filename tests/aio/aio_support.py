"""Helpers of the asyncio tests: worker processes started and reaped by a test."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

WORKERS = Path(__file__).resolve().parent / "_aio_workers.py"


class Processes:
    """Worker processes started by a test; every one is killed and reaped at teardown."""

    def __init__(self) -> None:
        self.started: list[subprocess.Popen[str]] = []

    def spawn(self, kind: str, **config: Any) -> subprocess.Popen[str]:
        """Start ``_aio_workers.py KIND`` with ``config`` (stdout is a pipe of lines)."""
        process = subprocess.Popen(
            [sys.executable, str(WORKERS), kind, json.dumps(config)],
            stdout=subprocess.PIPE,
            text=True,
        )
        self.started.append(process)
        return process

    @staticmethod
    def expect(process: subprocess.Popen[str], line: str) -> str:
        """Block until ``process`` prints a line starting with ``line``; return that line."""
        assert process.stdout is not None
        got = process.stdout.readline().strip()
        assert got.startswith(line), f"worker printed {got!r}, expected {line!r}"
        return got
