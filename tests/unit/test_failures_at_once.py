"""The test run's plugin that names a failed test the moment it fails (tests/failures_at_once.py),
run as CI runs pytest: quiet, with xdist's workers."""

from __future__ import annotations

import os

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: Three tests in order on one worker: one that fails, one whose fixture fails, then a slow one
#: that ends long after the first two.
MODULE = """
import time

import pytest


@pytest.fixture
def broken():
    raise RuntimeError("no fixture")


def test_fails():
    assert 1 == 2


def test_errs(broken):
    pass


def test_slow_after_them():
    time.sleep(2)
"""


def _lines(pytester, monkeypatch, *flags) -> list[str]:
    """The output lines of a quiet pytest run, with the plugin, of `MODULE` on two workers."""
    monkeypatch.setenv("PYTHONPATH", TESTS)
    pytester.makepyfile(test_three=MODULE)
    result = pytester.runpytest_subprocess("-p", "failures_at_once", "-p", "no:cacheprovider",
                                           "-n", "2", "--dist", "loadfile", *flags)
    assert result.ret == 1, result.stdout.str()
    return result.stdout.lines


def test_a_failure_and_an_error_are_named_before_the_summary(pytester, monkeypatch):
    lines = _lines(pytester, monkeypatch, "-q")
    summary = next(i for i, line in enumerate(lines) if "short test summary info" in line)
    early = [line for line in lines[:summary] if line.startswith(("FAILED", "ERROR"))]
    assert early == ["FAILED test_three.py::test_fails (0 s)",
                     "ERROR at setup test_three.py::test_errs (0 s)"], lines


def test_a_verbose_run_names_each_test_once_as_before(pytester, monkeypatch):
    lines = _lines(pytester, monkeypatch, "-v")
    assert not [line for line in lines if line.endswith(" s)")], lines
