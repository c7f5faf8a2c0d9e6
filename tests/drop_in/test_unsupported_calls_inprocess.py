"""The one-line errors of calls the drop-in lacks, in this process.

``test_served_hermes`` checks the whole behaviour in child processes running a fake Hermes;
here the translation itself is exercised on a small class, so that what it decides for
each kind of call is seen directly: an argument the method does not take, a keyword a
``**kwargs`` method refuses by name, and a ``TypeError`` of the method's own.
"""

from __future__ import annotations

from typing import Any

import pytest

from hermes_store.drop_in.unsupported_calls import is_dunder, lacks_method, translate_argument_errors
from hermes_store.errors import DropInLacksKeyword, DropInLacksMethod, StoreError


class _Store:
    def plain(self, session_id: str, *, limit: int = 10) -> str:
        return f"{session_id}:{limit}"

    def own_error(self, value: Any) -> None:
        raise TypeError("value must be a str")

    def checked_keywords(self, session_id: str, **kwargs: Any) -> None:
        unknown = set(kwargs) - {"model"}
        if unknown:
            raise TypeError(f"unexpected keyword argument(s): {', '.join(sorted(unknown))}")

    @staticmethod
    def helper(text: str) -> str:
        return text.upper()

    def _private(self, anything: Any) -> Any:
        return anything


translate_argument_errors(_Store)


def test_a_call_that_fits_is_answered_as_before() -> None:
    store = _Store()
    assert store.plain("s", limit=3) == "s:3"
    assert _Store.helper("a") == "A"
    assert store._private(1) == 1


def test_an_argument_the_method_does_not_take_is_one_line_naming_it() -> None:
    with pytest.raises(DropInLacksKeyword, match=r"_Store\.plain\(\) has no keyword display_kind") as caught:
        _Store().plain("s", display_kind="ui")
    assert isinstance(caught.value, TypeError) and isinstance(caught.value, StoreError)
    assert "\n" not in str(caught.value)
    with pytest.raises(DropInLacksKeyword, match="these arguments"):
        _Store().plain("s", "extra positional")


def test_a_keyword_a_kwargs_method_refuses_is_translated_too() -> None:
    with pytest.raises(DropInLacksKeyword, match="keyword profile_name"):
        _Store().checked_keywords("s", profile_name="work")
    _Store().checked_keywords("s", model="m")


def test_the_methods_own_type_error_passes_as_it_is() -> None:
    with pytest.raises(TypeError, match="value must be a str") as caught:
        _Store().own_error(3)
    assert not isinstance(caught.value, DropInLacksKeyword)


def test_a_missing_method_is_an_attribute_error_naming_it() -> None:
    error = lacks_method("SessionDB", "append_messages_batch")
    assert isinstance(error, DropInLacksMethod) and isinstance(error, AttributeError)
    assert error.name == "append_messages_batch"
    assert "SessionDB.append_messages_batch is not in the hermes_store" in str(error)
    assert is_dunder("__deepcopy__") and not is_dunder("_conn")


def test_release_ranges_compare_release_numbers_only() -> None:
    from hermes_store.drop_in.served_hermes import SERVED_HERMES_RELEASES, HermesReleases, release_numbers

    assert release_numbers("v0.18.0+local") == (0, 18) and release_numbers("dev") is None
    assert "0.18.0" in SERVED_HERMES_RELEASES and "0.18" in SERVED_HERMES_RELEASES
    assert "0.18.1rc1" not in SERVED_HERMES_RELEASES and "0.20.3" not in SERVED_HERMES_RELEASES
    assert (
        "0.17.9" not in HermesReleases("0.18.0", "0.19") and str(SERVED_HERMES_RELEASES) == ">=0.18.0,<0.18.1"
    )


def test_a_hermes_tree_is_known_by_its_pyproject(tmp_path: Any) -> None:
    from hermes_store.drop_in import served_hermes

    (tmp_path / "pyproject.toml").write_text('[project]\nname = "hermes-agent"\nversion = "0.21.3\\n"\n')
    assert served_hermes._hermes_pyproject_version(tmp_path / "pyproject.toml") == "0.21.3"
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "something-else"\nversion = "1.0"\n')
    assert served_hermes._hermes_pyproject_version(tmp_path / "pyproject.toml") is None
    (tmp_path / "pyproject.toml").write_text("not = [toml")
    assert served_hermes._hermes_pyproject_version(tmp_path / "pyproject.toml") is None
    assert served_hermes._hermes_pyproject_version(tmp_path / "missing.toml") is None
