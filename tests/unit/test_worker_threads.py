"""WorkerThreads: calls handed to threads, outcomes handed back to the loop."""

from __future__ import annotations

import asyncio
import logging
import threading

import pytest

from hermes_store.uow.worker_threads import WorkerThreads


def test_results_and_errors_reach_the_caller_and_calls_run_off_the_loop() -> None:
    async def scenario() -> None:
        threads = WorkerThreads(2, "t")
        loop_thread = threading.get_ident()
        assert await threads.submit(lambda a, b=0: a + b, 2, b=3) == 5
        assert await threads.submit(threading.get_ident) != loop_thread
        with pytest.raises(ZeroDivisionError):
            await threads.submit(lambda: 1 / 0)
        await threads.drain()  # nothing in flight: returns at once
        threads.shutdown()
        with pytest.raises(RuntimeError, match="after shutdown"):
            threads.submit(int)

    asyncio.run(scenario())


def test_never_more_threads_than_allowed_and_idle_threads_are_reused() -> None:
    async def scenario() -> None:
        threads = WorkerThreads(3, "capped")
        gate = threading.Event()
        running = [threads.submit(gate.wait, 5) for _ in range(8)]
        await asyncio.sleep(0.05)
        names = {t.name for t in threading.enumerate() if t.name.startswith("capped-")}
        assert len(names) == 3
        gate.set()
        assert all(await asyncio.gather(*running))
        # Idle now: more calls, one after another, need no new thread.
        seen = {await threads.submit(lambda: threading.current_thread().name) for _ in range(20)}
        assert seen <= names
        threads.shutdown()

    asyncio.run(scenario())


def test_a_cancelled_caller_does_not_stop_the_call_and_drain_waits_for_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def scenario() -> list[str]:
        threads = WorkerThreads(2, "t")
        gate = threading.Event()
        done: list[str] = []

        def slow(tag: str, fail: bool) -> str:
            gate.wait(5)
            done.append(tag)
            if fail:
                raise ValueError(f"{tag} failed")
            return tag

        ok = asyncio.ensure_future(threads.submit(slow, "ok", False))
        bad = asyncio.ensure_future(threads.submit(slow, "bad", True))
        await asyncio.sleep(0.01)
        ok.cancel()
        bad.cancel()
        with pytest.raises(asyncio.CancelledError):
            await ok
        assert threads.in_flight == 2  # cancelled callers, calls still running
        drained = asyncio.ensure_future(threads.drain())
        await asyncio.sleep(0.01)
        assert not drained.done()
        gate.set()
        await drained
        assert threads.in_flight == 0
        threads.shutdown()
        return done

    with caplog.at_level(logging.WARNING, logger="hermes_store.uow.worker_threads"):
        assert sorted(asyncio.run(scenario())) == ["bad", "ok"]
    # The failure nobody waited for is reported; the success is not.
    assert [r.getMessage() for r in caplog.records] == [
        "a store call whose caller was cancelled failed: ValueError('bad failed')"
    ]


def test_a_call_that_outlives_its_loop_is_logged_not_lost(caplog: pytest.LogCaptureFixture) -> None:
    gate = threading.Event()
    finished = threading.Event()

    def outlives() -> None:
        gate.wait(5)
        finished.set()
        raise ValueError("late")

    threads = WorkerThreads(1, "outliving")

    async def scenario() -> None:
        threads.submit(outlives)

    with caplog.at_level(logging.WARNING, logger="hermes_store.uow.worker_threads"):
        asyncio.run(scenario())  # closes its loop with the call still running
        gate.set()
        assert finished.wait(5)
        threads.shutdown()
        for thread in threading.enumerate():
            if thread.name.startswith("outliving-"):
                thread.join(5)
    assert any("after its event loop closed" in r.getMessage() for r in caplog.records)


def test_at_least_one_thread_is_required() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        WorkerThreads(0, "t")


def test_after_shutdown_no_thread_of_the_pool_is_left_running() -> None:
    """A process that forks after closing its async store must not carry threads of the
    store into the fork still running (a thread inside SQLite at that moment leaves its
    locks held in the child): shutdown waits for the idle threads to end."""

    async def scenario() -> None:
        for round_ in range(20):
            threads = WorkerThreads(4, f"ending{round_}")
            gate = threading.Event()
            running = [threads.submit(gate.wait, 5) for _ in range(4)]
            await asyncio.sleep(0)
            gate.set()
            await asyncio.gather(*running)
            await threads.drain()
            threads.shutdown()
            left = [t.name for t in threading.enumerate() if t.name.startswith(f"ending{round_}-")]
            assert left == []

    asyncio.run(scenario())
