"""Looking a function up through the ``hermes_state`` module, so replacing it there works.

Hermes' tests replace some module attributes of ``hermes_state`` (``repair_state_db_schema``,
``_db_opens_cleanly``, ``_repair_attempted_paths``, ``asyncio``) and expect the code that
uses them to see the replacement. The functions of this package live in their own modules, so they look
such names up on the drop-in module at call time, falling back to their own definition
while that module is not imported.
"""

from __future__ import annotations

import sys
from typing import Any

DROP_IN_MODULE = "hermes_store.hermes_state"


def through_hermes_state(name: str, default: Any) -> Any:
    """``hermes_state.<name>`` as it is now, else ``default``."""
    module = sys.modules.get(DROP_IN_MODULE)
    return getattr(module, name, default) if module is not None else default
