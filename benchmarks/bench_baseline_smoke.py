"""Smoke run of the benchmark pieces against the plain-``sqlite3`` baseline only.

Generates a small workload (50 sessions x 20 messages by default) into a temporary database through
:class:`~benchmarks.baseline_sqlite.BaselineStore`, then times every search route, a listing and a
conversation replay. It checks that each guaranteed search term is found, and finishes in seconds.

Run from the repository root::

    python -m benchmarks.bench_baseline_smoke [--sessions N] [--messages M] [--seed S] [--markdown]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from benchmarks.baseline_sqlite import BaselineStore
from benchmarks.protocol import load_workload
from benchmarks.timing import Result, format_duration, format_table, measure, summarize
from benchmarks.workload import describe, generate_sessions, known_terms


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sessions", type=int, default=50)
    parser.add_argument("--messages", type=int, default=20, help="messages per session")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--rounds", type=int, default=30, help="timed calls per read benchmark")
    parser.add_argument("--markdown", action="store_true", help="print the result table as Markdown")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the smoke benchmark; return a process exit status (1 if a guaranteed term is not found)."""
    args = _parse_args(argv)
    sessions = list(generate_sessions(args.sessions, args.messages, args.seed))
    stats = describe(sessions)
    terms = known_terms(args.seed)
    print(
        f"workload: {stats.sessions} sessions, {stats.messages} messages, "
        f"{stats.tool_share:.0%} tool traffic ({stats.tool_calls} calls), "
        f"{stats.cjk_share:.0%} CJK prose, {stats.child_sessions} child sessions, "
        f"{stats.content_chars / 1e6:.2f} M content chars"
    )
    print(f"sources: {stats.sources}")
    print(f"known terms: {terms.as_dict()}")

    results: list[Result] = []
    failures: list[str] = []
    with tempfile.TemporaryDirectory(prefix="hermes-bench-") as tmp:
        store = BaselineStore(Path(tmp) / "state.db")
        try:
            report = load_workload(store, sessions)
            appends = summarize(report.append_latencies)
            print(
                f"load: {report.messages} messages in {report.seconds:.2f} s "
                f"({report.messages_per_second:,.0f} msg/s; append median {format_duration(appends.median)}, "
                f"p95 {format_duration(appends.p95)}, p99 {format_duration(appends.p99)})"
            )
            results.append(Result.of("append_message (median)", appends.median))
            results.append(Result.of("append_message (p95)", appends.p95))
            results.append(Result.of("create_session (median)", summarize(report.create_latencies).median))

            routes = {
                "word": terms.word,
                "two_words": terms.two_words,
                "phrase": terms.phrase,
                "prefix": terms.prefix,
                "cjk3 (trigram)": terms.cjk3,
                "cjk2 (LIKE)": terms.cjk2,
            }
            print("\nsearch hits (limit 20):")
            for label, query in routes.items():
                hits = store.search_messages(query)
                sample = hits[0]["snippet"].replace("\n", " ")[:70] if hits else ""
                print(f"  {label:<15} {query!r:<32} {len(hits):>3} hits  {sample!r}")
                if not hits:
                    failures.append(f"{label} {query!r}")

                def search(q: str = query) -> object:
                    return store.search_messages(q)

                results.append(Result.of(f"search {label}", summarize(measure(search, args.rounds)).median))

            source = sessions[0].source
            read_benchmarks: dict[str, Callable[[], object]] = {
                "search word, source filter": lambda: store.search_messages(
                    terms.word, source_filter=[source]
                ),
                "list_sessions_rich": lambda: store.list_sessions_rich(),
                f"list_sessions_rich source={source}": lambda: store.list_sessions_rich(source=source),
                "list_sessions_rich offset=20": lambda: store.list_sessions_rich(offset=20),
                "get_messages_as_conversation": lambda: store.get_messages_as_conversation(sessions[0].id),
            }
            for label, fn in read_benchmarks.items():
                results.append(Result.of(label, summarize(measure(fn, args.rounds)).median))

            listing = store.list_sessions_rich()
            print(
                f"\nlisting: {len(listing)} rows, first {listing[0]['id']} preview {listing[0]['preview']!r}"
                if listing
                else "\nlisting: empty"
            )
            convo = store.get_messages_as_conversation(sessions[0].id)
            roles = [m["role"] for m in convo[:6]]
            print(f"conversation {sessions[0].id}: {len(convo)} messages, first roles {roles}")
            print(f"stored: {store.session_count()} sessions, {store.message_count()} messages")
        finally:
            store.close()

    print(f"\nbaseline medians over {args.rounds} rounds (hermes_store column filled in later):")
    print(format_table(results, markdown=args.markdown))
    if failures:
        print(f"\nFAILED: no hits for {', '.join(failures)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
