"""The rows per backfill batch: ``HERMES_MIGRATION_BATCH_ROWS`` or the built-in default."""

from __future__ import annotations

import pytest

from hermes_store.schema.migration_ops import BATCH_ROWS, BATCH_ROWS_ENV, batch_rows


def test_unset_or_blank_gives_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(BATCH_ROWS_ENV, raising=False)
    assert batch_rows() == BATCH_ROWS == 1_000
    monkeypatch.setenv(BATCH_ROWS_ENV, "  ")
    assert batch_rows() == BATCH_ROWS


def test_a_positive_number_is_the_batch_size(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(BATCH_ROWS_ENV, " 250 ")
    assert batch_rows() == 250


@pytest.mark.parametrize("value", ["0", "-5", "ten", "1.5"])
def test_anything_else_is_refused_naming_the_variable(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv(BATCH_ROWS_ENV, value)
    with pytest.raises(ValueError, match=BATCH_ROWS_ENV) as raised:
        batch_rows()
    assert repr(value) in str(raised.value)
