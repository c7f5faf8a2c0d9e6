"""Argument checks run before anything is written.

Upstream bound whatever it was given and let SQLite coerce it: an int session id became
text, ``create_session(None)`` inserted a row with a NULL id. A data library should say
what is wrong instead, so the facade checks the type of every identifier and text field
and raises ``TypeError`` naming the argument.
"""

from __future__ import annotations

import math
from typing import Any


def require_str(name: str, value: Any) -> str:
    """``value`` if it is a ``str``; otherwise ``TypeError``."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, not {type(value).__name__}")
    return value


def optional_str(name: str, value: Any) -> str | None:
    """``value`` if it is ``None`` or a ``str``; otherwise ``TypeError``."""
    if value is not None and not isinstance(value, str):
        raise TypeError(f"{name} must be a str or None, not {type(value).__name__}")
    return value


def optional_int(name: str, value: Any) -> int | None:
    """``value`` if it is ``None`` or an ``int`` (not a bool); otherwise ``TypeError``."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
        raise TypeError(f"{name} must be an int or None, not {type(value).__name__}")
    return value


def require_count(name: str, value: Any) -> int:
    """A non-negative ``int`` (limits and offsets); otherwise ``TypeError``/``ValueError``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    if value < 0:
        raise ValueError(f"{name} must not be negative")
    return value


def require_int(name: str, value: Any) -> int:
    """``value`` if it is an ``int`` (not a bool), e.g. a message id; otherwise ``TypeError``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    return value


def require_finite(name: str, value: Any, unit: str) -> float:
    """``value`` as a float if it is a finite ``int`` or ``float`` (not a bool) counting
    ``unit``; otherwise ``TypeError``, or ``ValueError`` for NaN and the infinities (each
    backend would store and compare them differently, and none as a time)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{name} must be a number of {unit}, not {type(value).__name__}")
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(f"{name} must be a finite number of {unit}, not {number!r}")
    return number


def require_seconds(name: str, value: Any) -> float:
    """A finite number of seconds as a float (:func:`require_finite`): a lease's length,
    an epoch time."""
    return require_finite(name, value, "seconds")
