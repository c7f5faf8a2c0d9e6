"""What observability tools and error handlers see: OpenTelemetry spans, one error family."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event

from hermes_store import SessionDB


def test_opentelemetry_gets_a_span_for_every_statement(db: SessionDB) -> None:
    """The stock SQLAlchemy instrumentation, with its in-memory exporter, sees every
    statement of the hot read paths (each one used to run on the driver cursor)."""
    pytest.importorskip("opentelemetry.instrumentation.sqlalchemy")
    from opentelemetry.instrumentation.sqlalchemy import SQLAlchemyInstrumentor
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    db.create_session("s1", "cli")
    db.append_message("s1", "user", "rotate the logs")
    db.append_message("s1", "assistant", "logrotate it is", tool_calls=[{"id": "c1"}])
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrumentor = SQLAlchemyInstrumentor()
    # Its declared support stops below SQLAlchemy 2.1; the event API it uses is unchanged.
    instrumentor.instrument(
        engine=db.engine, tracer_provider=provider, enable_commenter=False, skip_dep_check=True
    )
    statements: list[str] = []
    event.listen(db.engine, "before_cursor_execute", lambda *args: statements.append(args[2]))
    try:
        db.append_message("s1", "user", "and compress them")
        db.get_session("s1")
        db.get_messages("s1")
        db.get_messages_as_conversation("s1")
        db.list_sessions_rich()
        db.search_messages("logs")
        db.get_ancestors("s1")
    finally:
        instrumentor.uninstrument()
    # Besides one span per statement the instrumentation records connection checkouts
    # ("connect" spans, without a statement).
    texts = [
        str(span.attributes["db.statement"])
        for span in exporter.get_finished_spans()
        if span.attributes and "db.statement" in span.attributes
    ]
    assert len(statements) >= 9
    assert texts == statements
    assert any(text.startswith("INSERT INTO messages") for text in texts)
    assert any("FROM messages" in text and "session_id" in text for text in texts)


def _drop_messages(db: SessionDB) -> None:
    raw = db._conn
    assert raw is not None
    if isinstance(raw, sqlite3.Connection):
        raw.execute("DROP TABLE messages")
    else:
        raw.execute("DROP TABLE messages CASCADE")


FAULTY_READS: dict[str, Callable[[SessionDB], Any]] = {
    "get_messages": lambda db: db.get_messages("s1"),
    "message_count": lambda db: db.message_count("s1"),
    "search_messages": lambda db: db.search_messages("hello"),
    "get_messages_as_conversation": lambda db: db.get_messages_as_conversation("s1"),
    "list_sessions_rich": lambda db: db.list_sessions_rich(),
    "export_session": lambda db: db.export_session("s1"),
}


def test_the_same_fault_raises_the_same_exception_type_from_every_read(tmp_path: Path) -> None:
    """A missing table used to surface as sqlite3.OperationalError from the paths that
    ran on the driver cursor and as SQLAlchemy's from the others."""
    db = SessionDB(tmp_path / "state.db")
    try:
        db.create_session("s1", "cli")
        db.append_message("s1", "user", "hello world")
        _drop_messages(db)
        raised: dict[str, type[BaseException]] = {}
        for name, read in FAULTY_READS.items():
            with pytest.raises(Exception) as info:  # the type is what is compared
                read(db)
            raised[name] = type(info.value)
    finally:
        db.close()
    assert set(raised.values()) == {__import__("sqlalchemy").exc.OperationalError}, raised


def test_echo_logs_the_hot_path_statements(db: SessionDB, caplog: pytest.LogCaptureFixture) -> None:
    """``echo`` (SQLAlchemy's statement log) shows what append and get_session run."""
    import logging

    # Connections read the flag when they are made: set it before the first write.
    db.engine.echo = True
    try:
        with caplog.at_level(logging.INFO, logger="sqlalchemy.engine.Engine"):
            db.create_session("s1", "cli")
            db.append_message("s1", "user", "hello")
            db.get_session("s1")
    finally:
        db.engine.echo = False
    logged = [record.getMessage() for record in caplog.records]
    assert any(message.startswith("INSERT INTO messages") for message in logged), logged
    assert any(message.startswith("UPDATE sessions SET message_count") for message in logged), logged
    assert any(message.startswith("SELECT id, source") for message in logged), logged


def test_an_unsupported_backend_is_refused_with_its_name() -> None:
    from hermes_store.db.backends import backend_named

    with pytest.raises(ValueError, match="'mysql'"):
        backend_named("mysql")
