"""The machinery behind the reliability tests and ``scripts/soak.py``.

Everything that runs real processes against one ``state.db`` lives here, so that the
short runs in CI and the long soak exercise exactly the same code:

* :func:`run_contention` — 8 writer processes and 2 reader processes (search, listing,
  exports) on one file for a fixed number of operations, while a third process holds
  one read transaction open the whole time;
* :func:`run_kill_loop` — writer processes killed with ``SIGKILL`` at random points,
  the database checked after every kill;
* :func:`run_migration_kills` — the upgrade of a large legacy database killed part-way,
  again and again, then completed.

The checks (:func:`verify_store`) use nothing but :mod:`sqlite3`: they play the part of
an independent reader and must not share code with the store they judge. Worker
processes are ``_workers.py`` beside this file, run by path with the same interpreter.

Every message a worker writes carries a tag and a checksum of its own text
(``<tag>|<body>|<sha256[:16]>``): a row whose checksum does not match was half-written.
A worker appends one line to its acknowledgement file *after* ``append_message``
returned, so every acknowledged message must be in the database, exactly once.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import random
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import closing
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
WORKERS = HERE / "_workers.py"
FTS_TABLES = ("messages_fts", "messages_fts_trigram")
SHARED_SESSIONS = tuple(f"shared-{n}" for n in range(4))
INDEXED_TEXT = (
    "COALESCE(m.content, '') || ' ' || COALESCE(m.tool_name, '') || ' ' || COALESCE(m.tool_calls, '')"
)
# fmt: off
WORDS = (
    "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india",
    "juliet", "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo",
    "sierra", "tango", "uniform", "victor", "whiskey", "xray", "yankee", "zulu",
)
# fmt: on
CJK_PHRASES = ("记忆断裂问题", "会话存储可靠", "进程崩溃恢复", "数据没有丢失")


class VerificationError(AssertionError):
    """The database broke one of the guarantees (what and where is in the message)."""


# --- message text --------------------------------------------------------------------------


def checksum(tag: str, body: str) -> str:
    return hashlib.sha256(f"{tag}|{body}".encode()).hexdigest()[:16]


def message_text(tag: str, rng: random.Random, size: int = 240) -> str:
    """``<tag>|<body>|<checksum>``: words, a CJK phrase (for the trigram index) and filler."""
    words = [rng.choice(WORDS) for _ in range(max(4, size // 7))]
    words.insert(rng.randrange(len(words)), rng.choice(CJK_PHRASES))
    words.insert(0, "payload")
    body = " ".join(words)[:size]
    return f"{tag}|{body}|{checksum(tag, body)}"


def parse_text(text: object) -> str | None:
    """The tag of a well-formed message text, ``None`` when it is not one of ours or torn."""
    if not isinstance(text, str):
        return None
    head, sep, rest = text.partition("|")
    body, sep2, digest = rest.rpartition("|")
    if not sep or not sep2 or checksum(head, body) != digest:
        return None
    return head


def replace_tag(writer_tag: str, seq: int, count: int, index: int) -> str:
    """Tag of message ``index`` of a ``count``-message transcript written by op ``seq``."""
    return f"{writer_tag}~r{seq}n{count}i{index}"


def parse_replace_tag(tag: str) -> tuple[int, int, int] | None:
    """(seq, count, index) of a transcript message's tag, ``None`` for an appended one."""
    _, sep, rest = tag.partition("~r")
    if not sep:
        return None
    seq, _, rest = rest.partition("n")
    count, _, index = rest.partition("i")
    return int(seq), int(count), int(index)


def tool_calls_for(tag: str, count: int) -> list[dict[str, Any]] | None:
    if count == 0:
        return None
    return [
        {
            "id": f"call_{tag}_{n}",
            "type": "function",
            "function": {"name": "terminal", "arguments": json.dumps({"cmd": f"echo {tag} {n}"})},
        }
        for n in range(count)
    ]


# --- acknowledgements -----------------------------------------------------------------------


@dataclass
class Acks:
    """What the workers were told had been stored."""

    messages: dict[str, tuple[int, str, int]] = field(default_factory=dict)
    """tag → (message id, session id, tool calls)."""
    tokens: dict[str, int] = field(default_factory=dict)
    """session id → acknowledged ``update_token_counts(input_tokens=1)`` calls."""
    replaces: dict[str, int] = field(default_factory=dict)
    """session id → the latest acknowledged ``replace_messages`` (writer op number)."""


def read_acks(paths: list[Path]) -> Acks:
    """Parse acknowledgement files; a final line without its newline was never complete."""
    acks = Acks()
    for path in paths:
        if not path.exists():
            continue
        data = path.read_text(encoding="utf-8")
        for line in data.split("\n")[:-1]:
            kind, *fields = line.split("\t")
            if kind == "m":
                tag, message_id, session_id, calls = fields
                if tag in acks.messages:
                    raise VerificationError(f"tag {tag} acknowledged twice")
                acks.messages[tag] = (int(message_id), session_id, int(calls))
            elif kind == "t":
                acks.tokens[fields[0]] = acks.tokens.get(fields[0], 0) + 1
            elif kind == "r":
                acks.replaces[fields[0]] = max(acks.replaces.get(fields[0], 0), int(fields[1]))
    return acks


# --- verification ---------------------------------------------------------------------------


def connect_raw(path: Path, timeout: float = 60.0) -> sqlite3.Connection:
    conn = sqlite3.connect(str(path), timeout=timeout, isolation_level=None)
    conn.execute(f"PRAGMA busy_timeout={int(timeout * 1000)}")
    return conn


def verify_store(
    path: Path,
    acks: Acks | Callable[[], Acks] | None = None,
    *,
    tagged_only: bool = True,
    token_slack: dict[str, int] | None = None,
    lock: bool = True,
) -> dict[str, int]:
    """Check every guarantee on one consistent snapshot of ``path``; return counts.

    * ``PRAGMA integrity_check`` is ``ok`` and FTS5's ``integrity-check`` passes on both
      indexes, which hold exactly one entry per message with the text the triggers give;
    * ``message_count``/``tool_call_count`` of every session equal its rows;
    * with ``tagged_only``, every message is one of ours and not half-written, and no tag
      is stored twice;
    * every acknowledged message is present, once, with the id, session and tool calls
      it was acknowledged with; acknowledged token updates are all counted (exactly,
      or with up to ``token_slack[session]`` unacknowledged extras from killed writers).

    With ``lock`` the checks run inside ``BEGIN IMMEDIATE`` (writers keep retrying
    meanwhile), which the FTS5 integrity-check command needs; it is rolled back. Pass
    ``acks`` as a callable while writers run: it is called once the lock is held, when
    every acknowledged write is committed and nothing else can commit.
    """
    with closing(connect_raw(path)) as conn:
        conn.execute("BEGIN IMMEDIATE" if lock else "BEGIN")
        try:
            conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()  # fixes the snapshot
            loaded = acks() if callable(acks) else (acks or Acks())
            return _verify_snapshot(conn, loaded, tagged_only, token_slack, lock)
        finally:
            conn.execute("ROLLBACK")


def _verify_snapshot(
    conn: sqlite3.Connection,
    acks: Acks,
    tagged_only: bool,
    token_slack: dict[str, int] | None,
    fts_check: bool,
) -> dict[str, int]:
    problems = [str(row[0]) for row in conn.execute("PRAGMA integrity_check")]
    if problems != ["ok"]:
        raise VerificationError(f"PRAGMA integrity_check: {problems[:5]}")
    message_total = conn.execute("SELECT COUNT(*) FROM messages").fetchone()[0]
    for table in FTS_TABLES:
        if fts_check:
            try:
                conn.execute(f"INSERT INTO {table}({table}, rank) VALUES('integrity-check', 1)")
            except sqlite3.DatabaseError as exc:
                raise VerificationError(f"{table} integrity-check failed: {exc}") from exc
        indexed = conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
        if indexed != message_total:
            raise VerificationError(f"{table} holds {indexed} entries for {message_total} messages")
        stale = conn.execute(
            f"SELECT COUNT(*) FROM messages m LEFT JOIN {table} f ON f.rowid = m.id "
            f"WHERE f.rowid IS NULL OR f.content IS NOT ({INDEXED_TEXT})"
        ).fetchone()[0]
        if stale:
            raise VerificationError(f"{table}: {stale} messages missing or indexed with other text")

    mismatched = conn.execute(
        """
        SELECT s.id, s.message_count, s.tool_call_count, COUNT(m.id),
               COALESCE(SUM(CASE WHEN m.tool_calls IS NULL THEN 0
                                 WHEN json_valid(m.tool_calls) AND json_type(m.tool_calls) = 'array'
                                 THEN json_array_length(m.tool_calls) ELSE 1 END), 0)
        FROM sessions s LEFT JOIN messages m ON m.session_id = s.id
        GROUP BY s.id
        HAVING COALESCE(s.message_count, 0) != COUNT(m.id)
            OR COALESCE(s.tool_call_count, 0) != COALESCE(SUM(CASE WHEN m.tool_calls IS NULL THEN 0
                                 WHEN json_valid(m.tool_calls) AND json_type(m.tool_calls) = 'array'
                                 THEN json_array_length(m.tool_calls) ELSE 1 END), 0)
        """
    ).fetchall()
    if mismatched:
        raise VerificationError(
            "counters disagree with rows (session, message_count, tool_call_count, rows, calls): "
            f"{mismatched[:5]}"
        )
    orphans = conn.execute(
        "SELECT COUNT(*) FROM messages m LEFT JOIN sessions s ON s.id = m.session_id WHERE s.id IS NULL"
    ).fetchone()[0]
    if orphans:
        raise VerificationError(f"{orphans} messages belong to no session")

    stored: dict[str, tuple[int, str, int]] = {}
    if tagged_only or acks.messages:
        for message_id, session_id, content, tool_calls in conn.execute(
            "SELECT id, session_id, content, tool_calls FROM messages"
        ):
            tag = parse_text(content)
            if tag is None:
                if tagged_only:
                    raise VerificationError(
                        f"message {message_id} is half-written or foreign: {content!r:.80}"
                    )
                continue
            if tag in stored:
                raise VerificationError(f"message {tag} stored twice (ids {stored[tag][0]} and {message_id})")
            calls = len(json.loads(tool_calls)) if tool_calls else 0
            if tool_calls and json.loads(tool_calls) != tool_calls_for(tag, calls):
                raise VerificationError(f"message {message_id}: tool_calls half-written")
            stored[tag] = (int(message_id), str(session_id), calls)
    transcripts: dict[str, set[tuple[int, int, int]]] = {}
    for tag, (_, session_id, _) in stored.items():
        parts = parse_replace_tag(tag)
        if parts is not None:
            transcripts.setdefault(session_id, set()).add(parts)
    for session_id, parts in transcripts.items():
        versions = {(seq, count) for seq, count, _ in parts}
        _, count = max(versions)
        if len(versions) != 1 or sorted(index for _, _, index in parts) != list(range(count)):
            raise VerificationError(f"transcript of {session_id} is half-replaced: {sorted(parts)[:8]}")
    for session_id, acked_seq in acks.replaces.items():
        have = max((seq for seq, _, _ in transcripts.get(session_id, ())), default=0)
        if have < acked_seq:
            raise VerificationError(f"acknowledged rewrite {acked_seq} of {session_id} lost (found {have})")
    lost = [tag for tag in acks.messages if tag not in stored]
    if lost:
        raise VerificationError(f"{len(lost)} acknowledged messages lost, e.g. {lost[:5]}")
    wrong = [(tag, ack, stored[tag]) for tag, ack in acks.messages.items() if stored[tag] != ack]
    if wrong:
        raise VerificationError(f"acknowledged messages stored differently: {wrong[:3]}")

    tokens = dict(conn.execute("SELECT id, COALESCE(input_tokens, 0) FROM sessions").fetchall())
    for session_id, acked in acks.tokens.items():
        have = tokens.get(session_id, 0)
        slack = (token_slack or {}).get(session_id, 0)
        if not acked <= have <= acked + slack:
            raise VerificationError(
                f"session {session_id}: {acked} acknowledged token updates, input_tokens={have}"
                f" (allowed extra from killed writers: {slack})"
            )
    return {
        "messages": int(message_total),
        "sessions": len(tokens),
        "acknowledged": len(acks.messages),
        "unacknowledged_present": sum(1 for tag in stored if parse_replace_tag(tag) is None)
        - len(acks.messages),
        "rewritten_transcripts": len(transcripts),
    }


# --- processes ------------------------------------------------------------------------------


def worker_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("HERMES_STORE_URL", "HERMES_HOME")}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.pop("COV_CORE_SOURCE", None)  # pytest-cov's subprocess hook only slows workers down
    return env


def spawn(kind: str, config: dict[str, Any], **popen: Any) -> subprocess.Popen[str]:
    """Start ``_workers.py <kind> <json config>`` with this interpreter."""
    return subprocess.Popen(
        [sys.executable, str(WORKERS), kind, json.dumps(config)],
        env=worker_env(),
        text=True,
        **popen,
    )


def wait_for(predicate: Any, timeout: float, what: str, interval: float = 0.01) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


def kill(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGKILL)
    process.wait(timeout=30)


@contextlib.contextmanager
def reaped(processes: list[subprocess.Popen[str]]) -> Iterator[None]:
    """Kill whatever is still running when the block exits (also on failure)."""
    try:
        yield
    finally:
        for process in processes:
            if process.poll() is None:
                kill(process)


def prepare_store(path: Path) -> None:
    """Create the database (at head) with the shared sessions, in a child process.

    A child keeps this process free of open connections to the file the workers use.
    """
    result = subprocess.run(
        [sys.executable, str(WORKERS), "prepare", json.dumps({"db": str(path)})],
        env=worker_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    if result.returncode != 0:
        raise RuntimeError(f"preparing {path} failed:\n{result.stderr}")


def percentile(values: list[float], fraction: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(fraction * (len(ordered) - 1))))
    return ordered[index]


# --- 1. contention --------------------------------------------------------------------------


@dataclass
class ContentionResult:
    writers: int
    readers: int
    operations: int
    appends: int
    token_updates: int
    replaces: int
    seconds: float
    writes_per_second: float
    p50_ms: float
    p99_ms: float
    max_ms: float
    retries: int
    writer_errors: list[str]
    reader_operations: int
    reader_errors: list[str]
    torn_reads: int
    long_reader_seconds: float
    long_reader_stable: bool
    torn_examples: list[str]
    verified: dict[str, int]
    verification_error: str | None
    latencies_ms: list[float] = field(default_factory=list, repr=False)

    def figures(self) -> dict[str, Any]:
        figures = asdict(self)
        del figures["latencies_ms"]
        return figures


def run_contention(
    workdir: Path,
    *,
    writers: int = 8,
    readers: int = 2,
    ops_per_writer: int = 250,
    seed: int = 0,
    timeout: float = 600.0,
) -> ContentionResult:
    """Run the contention scenario once in ``workdir`` and verify the result."""
    workdir.mkdir(parents=True, exist_ok=True)
    db = workdir / "state.db"
    prepare_store(db)
    start_file = workdir / "start"
    stop_file = workdir / "stop"
    processes: list[subprocess.Popen[str]] = []
    with reaped(processes):
        holder = spawn(
            "long_reader",
            {"db": str(db), "stop": str(stop_file), "out": str(workdir / "long_reader.json")},
            stdout=subprocess.PIPE,
        )
        processes.append(holder)
        assert holder.stdout is not None
        if holder.stdout.readline().strip() != "holding":
            raise RuntimeError("long reader did not start its transaction")
        reader_outs = [workdir / f"reader{n}.json" for n in range(readers)]
        for n in range(readers):
            processes.append(
                spawn(
                    "reader",
                    {
                        "db": str(db),
                        "stop": str(stop_file),
                        "out": str(reader_outs[n]),
                        "seed": seed * 100 + n,
                    },
                )
            )
        writer_outs = [workdir / f"writer{n}.json" for n in range(writers)]
        acks = [workdir / f"writer{n}.acks" for n in range(writers)]
        ready = [workdir / f"writer{n}.ready" for n in range(writers)]
        writer_processes = []
        for n in range(writers):
            writer = spawn(
                "writer",
                {
                    "db": str(db),
                    "wid": n,
                    "tag": f"c{seed}w{n}",
                    "ops": ops_per_writer,
                    "acks": str(acks[n]),
                    "ready": str(ready[n]),
                    "start": str(start_file),
                    "out": str(writer_outs[n]),
                    "seed": seed * 100 + n,
                },
            )
            writer_processes.append(writer)
            processes.append(writer)
        wait_for(lambda: all(p.exists() for p in ready), timeout, "writers to open the store")
        start_file.touch()
        deadline = time.monotonic() + timeout
        for writer in writer_processes:
            writer.wait(timeout=max(1.0, deadline - time.monotonic()))
        stop_file.touch()
        for process in processes:
            process.wait(timeout=120)
    codes = [p.returncode for p in processes]
    summaries = [json.loads(path.read_text()) for path in writer_outs]
    reader_summaries = [json.loads(path.read_text()) for path in reader_outs]
    long_reader = json.loads((workdir / "long_reader.json").read_text())
    latencies = [value for s in summaries for value in s["latencies_ms"]]
    begin = min(s["started"] for s in summaries)
    end = max(s["finished"] for s in summaries)
    writer_errors = [e for s in summaries for e in s["errors"]]
    if any(code != 0 for code in codes):
        writer_errors.append(f"worker exit codes {codes}")
    verified: dict[str, int] = {}
    verification_error = None
    try:
        verified = verify_store(db, read_acks(acks))
    except VerificationError as exc:
        verification_error = str(exc)
    operations = sum(s["operations"] for s in summaries)
    return ContentionResult(
        writers=writers,
        readers=readers,
        operations=operations,
        appends=sum(s["appends"] for s in summaries),
        token_updates=sum(s["token_updates"] for s in summaries),
        replaces=sum(s["replaces"] for s in summaries),
        seconds=round(end - begin, 3),
        writes_per_second=round(operations / max(end - begin, 1e-9), 1),
        p50_ms=round(statistics.median(latencies), 2),
        p99_ms=round(percentile(latencies, 0.99), 2),
        max_ms=round(max(latencies), 2),
        retries=sum(s["retries"] for s in summaries),
        writer_errors=writer_errors,
        reader_operations=sum(s["operations"] for s in reader_summaries),
        reader_errors=[e for s in reader_summaries for e in s["errors"]],
        torn_reads=sum(s["torn"] for s in reader_summaries),
        long_reader_seconds=round(long_reader["held_s"], 2),
        long_reader_stable=bool(long_reader["stable"]),
        torn_examples=[e for s in reader_summaries for e in s["examples"]][:10],
        verified=verified,
        verification_error=verification_error,
        latencies_ms=latencies,
    )


# --- 2. kills -------------------------------------------------------------------------------


@dataclass
class KillLoopResult:
    kills: int = 0
    kills_while_writing: int = 0
    kills_while_opening: int = 0
    full_stops: int = 0
    verifications: int = 0
    acknowledged: int = 0
    unacknowledged_present: int = 0
    messages: int = 0
    rewritten_transcripts: int = 0
    lost: int = 0
    seconds: float = 0.0

    def figures(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class _Slot:
    process: subprocess.Popen[str]
    generation: int
    acks: Path
    session: str
    spawned: float


def run_kill_loop(
    workdir: Path,
    *,
    kills: int,
    writers: int = 3,
    seed: int = 0,
    deadline: float | None = None,
    full_stop_every: int = 8,
) -> KillLoopResult:
    """Kill writers with SIGKILL at random points ``kills`` times (or until ``deadline``).

    After every kill the database is verified while the other writers keep writing;
    every ``full_stop_every`` kills all writers are killed at once and a fresh
    ``SessionDB`` must open, write and read the file. Raises :class:`VerificationError`
    on the first broken guarantee.
    """
    rng = random.Random(seed)
    workdir.mkdir(parents=True, exist_ok=True)
    db = workdir / "state.db"
    prepare_store(db)
    result = KillLoopResult()
    started = time.monotonic()
    generation = 0
    ack_files: list[Path] = []
    slack: dict[str, int] = {}
    slots: list[_Slot] = []
    processes: list[subprocess.Popen[str]] = []

    def launch() -> _Slot:
        nonlocal generation
        generation += 1
        tag = f"k{seed}g{generation}"
        ack = workdir / f"{tag}.acks"
        ack_files.append(ack)
        process = spawn(
            "writer",
            {
                "db": str(db),
                "wid": generation,
                "tag": tag,
                "ops": 0,
                "acks": str(ack),
                "errors": str(workdir / f"{tag}.errors"),
                "seed": seed * 10007 + generation,
            },
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        processes.append(process)
        return _Slot(process, generation, ack, f"own-{tag}", time.monotonic())

    def killed(slot: _Slot) -> None:
        # A killed writer may have committed one token update it never acknowledged.
        slack[slot.session] = slack.get(slot.session, 0) + 1
        for shared in SHARED_SESSIONS:
            slack[shared] = slack.get(shared, 0) + 1

    def check() -> None:
        # A live writer may have committed one write it has not acknowledged yet.
        live = sum(1 for slot in slots if slot.process.poll() is None)
        allowed = {session: slack.get(session, 0) + live for session in {*slack, *SHARED_SESSIONS}}
        for slot in slots:
            allowed[slot.session] = allowed.get(slot.session, 0) + 1
        figures = verify_store(db, lambda: read_acks(ack_files), token_slack=allowed)
        result.verifications += 1
        result.acknowledged = figures["acknowledged"]
        result.unacknowledged_present = figures["unacknowledged_present"]
        result.messages = figures["messages"]
        result.rewritten_transcripts = figures["rewritten_transcripts"]

    with reaped(processes):
        slots = [launch() for _ in range(writers)]
        while result.kills < kills and (deadline is None or time.monotonic() < deadline):
            index = rng.randrange(len(slots))
            slot = slots[index]
            if rng.random() < 0.15:
                # Anywhere from interpreter start-up through opening the store.
                time.sleep(rng.uniform(0.0, 1.2))
            else:
                wait_for(
                    lambda s=slot: s.acks.exists() and s.acks.stat().st_size > 0, 120, "a writer to write"
                )
                time.sleep(rng.uniform(0.0, 0.4))
            writing = slot.acks.exists() and slot.acks.stat().st_size > 0
            if slot.process.poll() is not None:
                raise RuntimeError(f"writer generation {slot.generation} exited by itself")
            kill(slot.process)
            killed(slot)
            result.kills += 1
            result.kills_while_writing += int(writing)
            result.kills_while_opening += int(not writing)
            check()
            slots[index] = launch()
            if full_stop_every and result.kills % full_stop_every == 0:
                for other in slots:
                    kill(other.process)
                    killed(other)
                result.full_stops += 1
                check()
                reopen_and_use(db)
                slots = [launch() for _ in range(writers)]
        for slot in slots:
            kill(slot.process)
            killed(slot)
    check()
    reopen_and_use(db)
    result.seconds = round(time.monotonic() - started, 2)
    return result


def reopen_and_use(db: Path) -> None:
    """Open the store in a child, append, read back and search; raise if anything fails."""
    outcome = subprocess.run(
        [sys.executable, str(WORKERS), "reopen", json.dumps({"db": str(db)})],
        env=worker_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    if outcome.returncode != 0:
        raise VerificationError(f"reopening {db} after kills failed:\n{outcome.stderr[-3000:]}")


# --- 2b. kills during a legacy upgrade --------------------------------------------------------


def build_large_legacy(path: Path, *, sessions: int = 1000, per_session: int = 40, version: int = 9) -> None:
    """An upstream database at ``version`` with ``sessions × per_session`` messages.

    Built with plain sqlite3 through ``tests/legacy_db.py`` (upstream's DDL); counters
    agree with the rows, every third assistant message carries a tool call.
    """
    sys.path.insert(0, str(HERE.parent))
    try:
        import legacy_db
    finally:
        sys.path.remove(str(HERE.parent))
    legacy_db.build_legacy_db(path, version)
    rows = []
    session_rows = []
    for s in range(sessions):
        session_id = f"legacy-{s:05d}"
        calls = 0
        for m in range(per_session):
            tool = m % 6 == 1
            tool_calls = json.dumps(tool_calls_for(f"L{s}x{m}", 1)) if tool else None
            calls += int(tool)
            text = f"legacy {s} {m} {WORDS[(s + m) % len(WORDS)]} {CJK_PHRASES[m % 4]} " * 3
            rows.append((session_id, "assistant" if m % 2 else "user", text, tool_calls, 1.7e9 + s + m / 100))
        session_rows.append((session_id, "cli", 1.7e9 + s, per_session, calls, f"legacy title {s}"))
    with closing(legacy_db.connect(path)) as conn:
        conn.execute("BEGIN")
        conn.executemany(
            "INSERT INTO sessions (id, source, started_at, message_count, tool_call_count, title) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            session_rows,
        )
        conn.executemany(
            "INSERT INTO messages (session_id, role, content, tool_calls, timestamp) VALUES (?, ?, ?, ?, ?)",
            rows,
        )
        conn.execute("COMMIT")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def row_digest(path: Path) -> str:
    """A digest of every session and message row (the columns every version has)."""
    digest = hashlib.sha256()
    with closing(sqlite3.connect(str(path))) as conn:
        for row in conn.execute(
            "SELECT id, source, started_at, message_count, tool_call_count, title FROM sessions ORDER BY id"
        ):
            digest.update(repr(row).encode())
        for row in conn.execute(
            "SELECT id, session_id, role, content, tool_calls, tool_name, timestamp FROM messages ORDER BY id"
        ):
            digest.update(repr(row).encode())
    return digest.hexdigest()


def schema_state(path: Path) -> tuple[str | None, int | None]:
    """(Alembic revision or ``None``, upstream ``schema_version``)."""
    with closing(sqlite3.connect(str(path))) as conn:
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        revision = None
        if "alembic_version" in names:
            row = conn.execute("SELECT version_num FROM alembic_version").fetchone()
            revision = None if row is None else str(row[0])
        version = conn.execute("SELECT MAX(version) FROM schema_version").fetchone()[0]
        return revision, None if version is None else int(version)


@dataclass
class MigrationKillResult:
    sessions: int = 0
    messages: int = 0
    migration_seconds: float = 0.0
    kills: int = 0
    kills_before_commit: int = 0
    kills_with_uncommitted_work: int = 0
    kills_after_completion: int = 0
    completed: bool = False
    rows_lost: int = 0
    seconds: float = 0.0

    def figures(self) -> dict[str, Any]:
        return asdict(self)


def run_migration_kills(
    workdir: Path,
    *,
    kills: int,
    sessions: int = 1000,
    per_session: int = 40,
    seed: int = 0,
    template: Path | None = None,
) -> MigrationKillResult:
    """Kill ``SessionDB`` opening (upgrading) a large legacy database, ``kills`` times.

    After every kill the file must pass ``integrity_check``, be either untouched (still
    legacy) or completely upgraded — never in between — and hold every row. Then an
    uninterrupted open must finish the upgrade with every row and a complete index.
    """
    rng = random.Random(seed)
    workdir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    if template is None:
        template = workdir / "legacy-template.db"
        build_large_legacy(template, sessions=sessions, per_session=per_session)
    original = row_digest(template)
    original_state = schema_state(template)
    result = MigrationKillResult(sessions=sessions, messages=sessions * per_session)
    db = workdir / "state.db"

    def fresh_copy() -> None:
        for suffix in ("", "-wal", "-shm", "-journal"):
            Path(f"{db}{suffix}").unlink(missing_ok=True)
        shutil.copyfile(template, db)

    # How long one uninterrupted upgrade takes here, to aim the kills inside it.
    fresh_copy()
    timing = _run_migrate(db, kill_after=None)
    result.migration_seconds = round(timing, 3)
    fresh_copy()
    while result.kills < kills:
        _run_migrate(db, kill_after=rng.uniform(0.0, result.migration_seconds * 1.1))
        result.kills += 1
        wal = Path(f"{db}-wal")
        uncommitted = wal.exists() and wal.stat().st_size > 0
        with closing(sqlite3.connect(str(db))) as conn:
            check = [r[0] for r in conn.execute("PRAGMA integrity_check")]
        if check != ["ok"]:
            raise VerificationError(f"integrity_check after kill {result.kills}: {check[:5]}")
        state = schema_state(db)
        if row_digest(db) != original:
            raise VerificationError(f"rows changed by a killed upgrade (kill {result.kills}, state {state})")
        if state == original_state:
            result.kills_before_commit += 1
            result.kills_with_uncommitted_work += int(uncommitted)
        elif state == ("0020", 17):
            result.kills_after_completion += 1
            verify_store(db, tagged_only=False)
            fresh_copy()
        else:
            raise VerificationError(f"half-upgraded schema after kill {result.kills}: {state}")
    _run_migrate(db, kill_after=None)
    if schema_state(db) != ("0020", 17):
        raise VerificationError(f"reopening did not complete the upgrade: {schema_state(db)}")
    if row_digest(db) != original:
        raise VerificationError("rows changed by the completed upgrade")
    verified = verify_store(db, tagged_only=False)
    if verified["messages"] != result.messages:
        raise VerificationError(f"{result.messages - verified['messages']} legacy messages lost")
    result.completed = True
    result.seconds = round(time.monotonic() - started, 2)
    return result


def _run_migrate(db: Path, kill_after: float | None) -> float:
    """Open ``db`` in a child; kill it ``kill_after`` s after it starts opening. Returns the
    time an uninterrupted open took (0 when killed)."""
    process = spawn("migrate", {"db": str(db)}, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    with reaped([process]):
        assert process.stdout is not None
        line = process.stdout.readline().strip()
        if line != "opening":
            raise RuntimeError(f"migrate worker said {line!r}: {process.communicate()[1][-2000:]}")
        if kill_after is not None:
            time.sleep(kill_after)
            kill(process)
            return 0.0
        out, err = process.communicate(timeout=300)
    if process.returncode != 0:
        raise VerificationError(f"opening the legacy database failed:\n{err[-3000:]}")
    return float(out.split()[-1])
