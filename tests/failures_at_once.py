"""A pytest plugin that names each failed test the moment it fails, with its seconds.

pytest's quiet output marks a failure with an `F` among the progress dots and names it only in the
summary at the end: in a CI run of an hour, that is an hour after the failure. With this plugin
(`pytest_plugins` in tests/conftest.py) the run's main process writes `FAILED <test id> (N s)`
(or `ERROR at setup`/`teardown`) on a line of its own as soon as it hears of it, from a worker
or from itself. Verbose runs name every test already, and are left as they are.
"""

from __future__ import annotations

import pytest


class _Namer:
    """Writes each failed test's id and seconds through the main process's terminal reporter."""

    def __init__(self, reporter):
        self.reporter = reporter

    @pytest.hookimpl(trylast=True)  # after the reporter's own `F` or `E`
    def pytest_runtest_logreport(self, report):
        if not report.failed:
            return
        if not self.reporter.currentfspath:  # xdist's progress line, which `write_line` leaves
            self.reporter.write("\n")
        kind = "FAILED" if report.when == "call" else f"ERROR at {report.when}"
        self.reporter.write_line(f"{kind} {report.nodeid} ({report.duration:.0f} s)")


@pytest.hookimpl(trylast=True)  # after the terminal reporter is registered
def pytest_configure(config):
    """Registers a `_Namer` in a quiet run's main process (not in a worker, whose output nobody
    sees, nor in a verbose run)."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None and not hasattr(config, "workerinput") and config.option.verbose <= 0:
        config.pluginmanager.register(_Namer(reporter))
