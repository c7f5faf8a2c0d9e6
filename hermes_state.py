"""``import hermes_state`` gives :mod:`hermes_store.hermes_state` (Hermes Agent's drop-in).

This top-level module makes itself an alias of that module (one module object, so a
test that patches ``hermes_state.SessionDB`` or ``hermes_state.DEFAULT_DB_PATH`` patches
what the store really uses). See the README, "Running Hermes on this store".
"""

import sys

from hermes_store import hermes_state as _drop_in

sys.modules[__name__] = _drop_in
