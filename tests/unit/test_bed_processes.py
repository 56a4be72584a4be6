"""The test bed's process records: a recorded pid is signalled only while it names the process
the bed started (its start time), and a process kept by `stop_all(keep=...)` stays recorded."""

from __future__ import annotations

import json
import subprocess
import sys

from cluster import processes


def _sleeper() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                            start_new_session=True)


def test_a_pid_now_naming_another_process_is_left_alone(tmp_path):
    stranger = _sleeper()
    try:
        # A record whose pid is the stranger's but whose start time is not: the pid was reused.
        (tmp_path / processes.RECORD).write_text(json.dumps([
            {"name": "old", "pid": stranger.pid,
             "start_time": processes.start_time(stranger.pid) - 1}]))
        assert processes.running(tmp_path) == []
        assert processes.stop_all(tmp_path) == []
        assert stranger.poll() is None, "a process the bed did not start was signalled"
    finally:
        stranger.kill()
        stranger.wait()


def test_stop_all_keeps_what_it_is_told_to_and_stops_it_later(tmp_path):
    procs = processes.Processes(tmp_path)
    first = procs.start("containerd", [sys.executable, "-c", "import time; time.sleep(60)"])
    second = procs.start("kubelet", [sys.executable, "-c", "import time; time.sleep(60)"])
    assert processes.running(tmp_path) == ["containerd", "kubelet"]
    processes.stop_all(tmp_path, keep=("containerd",))
    assert second.wait(timeout=20) is not None and first.poll() is None
    assert processes.running(tmp_path) == ["containerd"]
    processes.stop_all(tmp_path)
    assert first.wait(timeout=20) is not None
    assert processes.running(tmp_path) == [] and not (tmp_path / processes.RECORD).exists()


def test_a_bed_whose_owner_died_is_stopped_by_the_next_start_and_a_living_ones_is_not(
        tmp_path, monkeypatch):
    from cluster import owners

    monkeypatch.setattr(owners, "REGISTRY", tmp_path / "registry")
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    owners.register(tmp_path / "orphan", owner_pid=dead.pid)
    owners.register(tmp_path / "mine")
    stopped = []
    assert owners.stop_orphans(stopped.append) == [(tmp_path / "orphan").resolve()]
    assert stopped == [(tmp_path / "orphan").resolve()]
    assert owners.orphans() == []
    owners.unregister(tmp_path / "mine")
    assert not (tmp_path / "registry").exists()


def test_a_shared_bed_is_an_orphan_only_once_every_owner_has_ended(tmp_path, monkeypatch):
    from cluster import owners

    monkeypatch.setattr(owners, "REGISTRY", tmp_path / "registry")
    starter = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        owners.register(tmp_path / "shared", owner_pid=starter.pid)
        owners.join(tmp_path / "shared")
        assert owners.orphans() == []
    finally:
        starter.kill()
        starter.wait()
    assert owners.orphans() == []  # this process still uses it
    assert owners.leave(tmp_path / "shared") == 0
    assert owners.orphans() == [(tmp_path / "shared").resolve()]
