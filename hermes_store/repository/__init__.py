"""The repository layer: functions over an ORM session that read and write rows.

None of them commits: writes run inside ``SessionDB.unit_of_work.write(fn, "what")``
(:meth:`hermes_store.uow.unit_of_work.UnitOfWork.write`), reads inside
``SessionDB.unit_of_work.read()``. Modules: ``sessions`` (lifecycle, tokens, titles,
deletion), ``messages``, ``lineage`` (recursive CTEs), ``listing`` (listings and
analytics), ``meta``, ``usage`` (token and cost figures), ``bulk`` (exact whole-session
copies for import/export) and ``facts`` (counts and storage figures for reports).
"""
