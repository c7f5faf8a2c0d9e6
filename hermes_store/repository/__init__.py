"""The repository layer: functions over an ORM session that read and write rows.

None of them commits: writes run inside :meth:`hermes_store.unit_of_work.UnitOfWork.write`,
reads inside :meth:`~hermes_store.unit_of_work.UnitOfWork.read`. Modules:
``sessions`` (lifecycle, tokens, titles, deletion), ``messages``, ``lineage``
(recursive CTEs), ``listing`` (listings and analytics) and ``meta``.
"""
