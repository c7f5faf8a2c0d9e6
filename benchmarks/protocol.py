"""The store interface the benchmarks drive, and a loader that writes a workload into any store.

Both the plain-``sqlite3`` baseline and ``hermes_store``'s ``SessionDB`` are meant to satisfy
:class:`BenchStore` structurally (no inheritance needed). Anything extra a benchmark wants (titles,
ending sessions) is looked up with ``getattr`` so that a partial implementation can still be timed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from benchmarks.workload import GeneratedSession

__all__ = ["BenchStore", "LoadReport", "StoreFactory", "load_workload"]


@runtime_checkable
class BenchStore(Protocol):
    """The subset of upstream's ``SessionDB`` API that the benchmarks exercise."""

    def create_session(
        self, session_id: str, source: str, /, *, model: str | None = ..., parent_session_id: str | None = ...
    ) -> str:
        """Insert a session row if it does not exist yet and return its id."""
        ...

    def append_message(
        self,
        session_id: str,
        role: str,
        /,
        content: Any = ...,
        tool_name: str | None = ...,
        tool_calls: Any = ...,
        tool_call_id: str | None = ...,
        token_count: int | None = ...,
        finish_reason: str | None = ...,
        reasoning: str | None = ...,
    ) -> int:
        """Append one message, bump the session counters, and return the new message id."""
        ...

    def search_messages(
        self, query: str, /, source_filter: Sequence[str] | None = ..., limit: int = ...
    ) -> list[dict[str, Any]]:
        """Full-text search over messages, upstream result shape."""
        ...

    def list_sessions_rich(
        self, /, source: str | None = ..., limit: int = ..., offset: int = ...
    ) -> list[dict[str, Any]]:
        """List sessions with preview and last activity, newest first."""
        ...

    def get_messages_as_conversation(self, session_id: str, /) -> list[dict[str, Any]]:
        """Return a session's messages as OpenAI-style dicts."""
        ...

    def close(self) -> None:
        """Release the store's connections."""
        ...


#: Something that opens a store on a database file path (a class or a function).
StoreFactory = Callable[[str], BenchStore]


@dataclass(slots=True)
class LoadReport:
    """What :func:`load_workload` wrote and how long it took."""

    sessions: int = 0
    messages: int = 0
    seconds: float = 0.0
    create_latencies: list[float] = field(default_factory=list)
    append_latencies: list[float] = field(default_factory=list)

    @property
    def messages_per_second(self) -> float:
        """Overall append throughput, session creation included."""
        return self.messages / self.seconds if self.seconds else 0.0


def load_workload(
    store: BenchStore, sessions: Iterable[GeneratedSession], *, with_titles: bool = True
) -> LoadReport:
    """Write every generated session and message into ``store``, one call per row.

    Titles are applied through ``store.set_session_title`` when the store has that method and
    ``with_titles`` is true; that time is counted in ``seconds`` but not in either latency list.
    """
    report = LoadReport()
    set_title: Callable[[str, str], Any] | None = getattr(store, "set_session_title", None)
    clock = time.perf_counter
    started = clock()
    for session in sessions:
        t0 = clock()
        store.create_session(
            session.id, session.source, model=session.model, parent_session_id=session.parent_id
        )
        report.create_latencies.append(clock() - t0)
        if with_titles and session.title and set_title is not None:
            set_title(session.id, session.title)
        for m in session.messages:
            t0 = clock()
            store.append_message(
                session.id,
                m.role,
                content=m.content,
                tool_name=m.tool_name,
                tool_calls=m.tool_calls,
                tool_call_id=m.tool_call_id,
                token_count=m.token_count,
                finish_reason=m.finish_reason,
                reasoning=m.reasoning,
            )
            report.append_latencies.append(clock() - t0)
        report.sessions += 1
        report.messages += len(session.messages)
    report.seconds = clock() - started
    return report
