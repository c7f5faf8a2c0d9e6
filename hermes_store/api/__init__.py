"""The faces callers hold: :class:`SessionDB` and :class:`AsyncSessionDB`.

They check arguments and delegate to the unit of work, the repositories and search; they
hold no SQL and shape no rows (``hermes_store.hermes_state`` is Hermes' drop-in on top).
"""
