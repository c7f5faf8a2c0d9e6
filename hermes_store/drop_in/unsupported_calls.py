"""One-line errors for the calls a newer Hermes makes that the drop-in does not have.

Hermes' handlers take a bare ``AttributeError`` or ``TypeError`` for a transient failure,
log it and go on without the transcript. A method the drop-in lacks raises
:class:`~hermes_store.errors.DropInLacksMethod` instead (still an ``AttributeError``, since
Hermes probes optional methods with ``getattr(db, name, None)``); an argument a method does
not take raises :class:`~hermes_store.errors.DropInLacksKeyword` (a ``TypeError``), but
only once an unserved Hermes was let through, because the translation wraps every public
method and a served Hermes never passes such arguments.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

from hermes_store import __version__ as STORE_VERSION
from hermes_store.drop_in.served_hermes import SERVED_HERMES_RELEASES, running_hermes_version
from hermes_store.errors import DropInLacks, DropInLacksKeyword, DropInLacksMethod


def is_dunder(name: str) -> bool:
    """Python's own protocol names (``__deepcopy__``, ``__wrapped__``…), which tools probe
    on any object and which must stay plain ``AttributeError``."""
    return name.startswith("__") and name.endswith("__")


def lacks_method(owner: str, name: str) -> DropInLacksMethod:
    """The error for ``owner.name``, a name the drop-in does not have."""
    error = DropInLacksMethod(
        f"{owner}.{name} is not in the hermes_store {STORE_VERSION} drop-in, "
        f"{_served_and_running()}; run a Hermes it serves, or Hermes' own hermes_state.py"
    )
    error.name = name
    return error


def translate_argument_errors(cls: type) -> None:
    """Wrap each public method of ``cls`` (on ``cls`` itself) so that a call with an
    argument it does not take raises :class:`DropInLacksKeyword`; a ``TypeError`` raised
    inside a method that was called right is raised as it is."""
    for name in dir(cls):
        if name.startswith("_"):
            continue
        static = inspect.getattr_static(cls, name)
        if isinstance(static, staticmethod | classmethod):
            setattr(cls, name, type(static)(_translating(cls.__name__, name, static.__func__)))
        elif inspect.isfunction(static):
            setattr(cls, name, _translating(cls.__name__, name, static))


def _translating(owner: str, name: str, function: Callable[..., Any]) -> Callable[..., Any]:
    signature = inspect.signature(function)

    @functools.wraps(function)
    def translated(*args: Any, **kwargs: Any) -> Any:
        try:
            return function(*args, **kwargs)
        except TypeError as exc:
            if isinstance(exc, DropInLacks):
                raise
            what = _arguments_not_taken(signature, args, kwargs, exc)
            if what is None:
                raise  # the call matched: the TypeError is the method's own
            raise DropInLacksKeyword(
                f"{owner}.{name}() has no {what} in the hermes_store {STORE_VERSION} drop-in, "
                f"{_served_and_running()}; run a Hermes it serves, or Hermes' own hermes_state.py"
            ) from exc

    return translated


def _arguments_not_taken(
    signature: inspect.Signature, args: tuple[Any, ...], kwargs: dict[str, Any], error: TypeError
) -> str | None:
    """What of the call ``signature`` does not take (``"keyword x, y"``, or the arguments
    and Python's reason), or ``None`` when ``error`` is not about the call's arguments."""
    explicit = [k for k in kwargs if k not in signature.parameters]
    try:
        signature.bind(*args, **kwargs)
    except TypeError as mismatch:
        takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in signature.parameters.values())
        if explicit and not takes_any:
            return f"keyword {', '.join(explicit)}"
        return f"these arguments ({mismatch})"
    # A method taking **kwargs checks their names itself (create_session, ensure_session).
    refused = [k for k in explicit if k in str(error)]
    if refused and "unexpected keyword argument" in str(error):
        return f"keyword {', '.join(refused)}"
    return None


def _served_and_running() -> str:
    running = running_hermes_version()
    here = f", not Hermes Agent {running}" if running is not None else ""
    return f"which serves Hermes Agent {SERVED_HERMES_RELEASES}{here}"
