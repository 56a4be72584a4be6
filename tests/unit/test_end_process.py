"""`stopping.end_process`: a process kfdist started and ends itself is gone and reaped."""

from __future__ import annotations

import signal
import subprocess
import sys

from kfdist.stopping import end_process

READY = "import signal, sys, time; {handler}print('ready', flush=True); time.sleep(60)"


def _start(ignore_sigterm: bool) -> subprocess.Popen:
    handler = "signal.signal(signal.SIGTERM, signal.SIG_IGN); " if ignore_sigterm else ""
    process = subprocess.Popen([sys.executable, "-c", READY.format(handler=handler)],
                               stdout=subprocess.PIPE, text=True)
    assert process.stdout.readline() == "ready\n"  # its handler is in place
    return process


def test_a_process_that_stops_on_sigterm_is_ended_by_it():
    process = _start(ignore_sigterm=False)
    end_process(process, grace=10)
    assert process.returncode == -signal.SIGTERM


def test_a_process_that_ignores_sigterm_is_killed_after_the_grace():
    process = _start(ignore_sigterm=True)
    end_process(process, grace=0.5)
    assert process.returncode == -signal.SIGKILL


def test_an_ended_process_is_left_as_it_ended():
    process = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    process.wait()
    end_process(process)
    assert process.returncode == 3
