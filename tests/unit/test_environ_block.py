"""`environ_block.variables_set`: variables set for a block and put back after it."""

import os

import pytest

from kfdist.environ_block import variables_set


def test_the_variables_are_set_in_the_block_and_as_before_after_it(monkeypatch):
    monkeypatch.setenv("KFDIST_T_SET", "before")
    monkeypatch.setenv("KFDIST_T_KEPT", "kept")
    monkeypatch.delenv("KFDIST_T_UNSET", raising=False)
    with pytest.raises(RuntimeError):
        with variables_set({"KFDIST_T_SET": "in", "KFDIST_T_UNSET": "in", "KFDIST_T_KEPT": None}):
            assert [os.environ.get(n) for n in ("KFDIST_T_SET", "KFDIST_T_UNSET",
                                                "KFDIST_T_KEPT")] == ["in", "in", "kept"]
            raise RuntimeError("the block failed")
    assert os.environ["KFDIST_T_SET"] == "before" and os.environ["KFDIST_T_KEPT"] == "kept"
    assert "KFDIST_T_UNSET" not in os.environ
