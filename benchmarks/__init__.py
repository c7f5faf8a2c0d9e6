"""Benchmark suite for ``hermes_store``.

The pieces are independent so that the ``hermes_store`` side can be plugged in later:

* :mod:`benchmarks.workload` builds a seeded, deterministic stream of agent conversations.
* :mod:`benchmarks.protocol` names the small store interface every benchmark drives, and loads a
  workload into any object that satisfies it.
* :mod:`benchmarks.baseline_sqlite` is the yardstick: plain ``sqlite3`` doing what upstream's
  ``SessionDB`` does at schema version 11.
* :mod:`benchmarks.timing` measures calls and prints comparison tables.
"""
