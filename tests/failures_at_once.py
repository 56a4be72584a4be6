"""A pytest plugin that names each failed test the moment it fails, with its seconds.

pytest's quiet output marks a failure with an `F` among the progress dots and names it only in the
summary at the end: in a CI run of an hour, that is an hour after the failure. With this plugin
(`pytest_plugins` in tests/conftest.py) the run's main process writes `FAILED <test id> (N s)`
(or `ERROR at setup`/`teardown`) on a line of its own as soon as it hears of it, from a worker
or from itself. Verbose runs name every test already, and are left as they are.
"""

from __future__ import annotations

import pytest

#: The main process's terminal reporter, kept by `pytest_configure` (none in a worker, whose
#: output nobody sees, nor in a verbose run).
_reporters: list = []


@pytest.hookimpl(trylast=True)  # after the terminal reporter is registered
def pytest_configure(config):
    """Keeps the terminal reporter of a quiet run's main process."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None and not hasattr(config, "workerinput") and config.option.verbose <= 0:
        _reporters.append(reporter)


def pytest_unconfigure(config):
    """Forgets the reporter of a run that ends (a pytest run inside a test has its own)."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter in _reporters:
        _reporters.remove(reporter)


@pytest.hookimpl(trylast=True)  # after the reporter's own `F` or `E`
def pytest_runtest_logreport(report):
    """Writes a failed test's id and seconds on a line of its own."""
    if not (report.failed and _reporters):
        return
    reporter = _reporters[-1]
    if not reporter.currentfspath:  # xdist's progress line, which `write_line` does not end
        reporter.write("\n")
    kind = "FAILED" if report.when == "call" else f"ERROR at {report.when}"
    reporter.write_line(f"{kind} {report.nodeid} ({report.duration:.0f} s)")
