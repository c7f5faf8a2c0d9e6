"""The ``SessionDB`` methods of upstream Hermes' later features, one mixin module each.

Each module holds the thin face of one feature (argument checks, then one repository call
through the unit of work) and names its methods in ``ASYNC_READS``/``ASYNC_WRITES``, from
which :class:`~hermes_store.api.async_session_db.AsyncSessionDB` derives its coroutines.
"""
