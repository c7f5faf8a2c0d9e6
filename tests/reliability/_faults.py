"""Fault-injection helpers shared by the reliability fixtures and tests (no pytest here)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path


def run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, capture_output=True, text=True, timeout=60)


# --- immutable files and directories ------------------------------------------------------


def release_immutable(path: Path) -> None:
    """Undo ``immutable(path)`` early (the fixture's clean-up then does nothing more)."""
    result = run("chattr", "-i", str(path))
    assert result.returncode == 0, result.stderr


class SmallFs:
    """A tmpfs of a given size mounted at ``path`` for one test."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.filler = path / "filler"

    def remount(self, *, read_only: bool) -> None:
        result = run("mount", "-o", "remount," + ("ro" if read_only else "rw"), str(self.path))
        assert result.returncode == 0, result.stderr

    def fill(self) -> int:
        """Fill every free byte with ``filler``; returns how many bytes it took."""
        written = 0
        fd = os.open(self.filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            chunk = b"\0" * 65536
            while True:
                try:
                    written += os.write(fd, chunk)
                except OSError:
                    if len(chunk) == 1:
                        break
                    chunk = chunk[: len(chunk) // 2]
        finally:
            os.close(fd)
        return written

    def free(self) -> None:
        self.filler.unlink(missing_ok=True)
