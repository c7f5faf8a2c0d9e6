"""The module-level functions of Hermes' ``hermes_state`` module, one job a module.

Hermes calls these on plain ``sqlite3`` connections and files — its own ``state.db``, and
also ``kanban.db``, ``projects.db`` and the API server's response store — so they work on
``sqlite3`` objects, not on the store's engine. :mod:`hermes_store.hermes_state` re-exports
them under the names Hermes imports. Everything they log goes to the ``"hermes_state"``
logger (:data:`LOGGER_NAME`), the name Hermes' code and tests listen to.
"""

LOGGER_NAME = "hermes_state"
"""The logger every drop-in function writes to (Hermes filters its logs by this name)."""
