"""The local backend follows the operators' rules: success, restarts, backoff, deadline, ports.

Replicas here are tiny Python programs (no TensorFlow), run as real processes.
"""

from __future__ import annotations

import fcntl
import os
import sys
import time

import pytest

from kfdist.components.common.errors import TrainingFailedError
from kfdist.components.train_distributed.job import config
from kfdist.components.train_distributed.job import strategy_rules
from kfdist.components.train_distributed.local import local_backend
from kfdist.components.train_distributed.job import tf_config
from kfdist.components.train_distributed.local.local_backend import run_processes
from kfdist.components.train_distributed.local.ports import PortReservation, port_lock_dir
from fakes.process_state import is_running


def _program(code: str):
    return [sys.executable, "-c", code]


def _spec(**kw) -> config.JobSpec:
    return config.JobSpec(backend="local", workers=kw.pop("workers", 1), **kw)


class Log(list):
    def __call__(self, line):
        self.append(line)


KILL_SELF_ONCE = """
import os, signal, sys
marker = sys.argv[1]
if not os.path.exists(marker):
    open(marker, "w").close()
    os.kill(os.getpid(), signal.SIGKILL)
print("second life")
"""

EXIT_ONCE = """
import os, sys
marker = sys.argv[1]
if not os.path.exists(marker):
    open(marker, "w").close()
    sys.exit(int(sys.argv[2]))
"""


def test_chief_success_ends_the_job_and_the_ps_and_evaluator(tmp_path):
    log = Log()
    pid_file = tmp_path / "ps.pid"
    replicas = [
        (tf_config.Task("chief", 0), _program("import time; time.sleep(0.5); print('chief done')"), dict(os.environ)),
        (tf_config.Task("ps", 0), _program(f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(120)"), dict(os.environ)),
        (tf_config.Task("evaluator", 0), _program("import time; time.sleep(120)"), dict(os.environ)),
    ]
    started = time.monotonic()
    result = run_processes(replicas, _spec(ps=1, evaluator=True), strategy_rules.PARAMETER_SERVER, log)
    assert time.monotonic() - started < 30
    assert result.ended == ["ps-0", "evaluator-0"] and result.restarts == 0
    assert "[chief-0] chief done" in log
    assert not is_running(int(pid_file.read_text()))


def test_without_a_chief_worker_0_decides_unless_all_workers_must_succeed(tmp_path):
    slow = _program(f"import time; time.sleep(1.5); open({str(tmp_path / 'w1')!r}, 'w').close()")
    fast = _program("print('w0')")
    env = dict(os.environ)
    replicas = [(tf_config.Task("worker", 0), fast, env), (tf_config.Task("worker", 1), slow, env)]

    result = run_processes(replicas, _spec(workers=2, success_policy=""), strategy_rules.MULTI_WORKER_MIRRORED, Log())
    assert result.ended == ["worker-1"] and not (tmp_path / "w1").exists()

    result = run_processes(replicas, _spec(workers=2, success_policy="AllWorkers"),
                           strategy_rules.MULTI_WORKER_MIRRORED, Log())
    assert result.ended == [] and (tmp_path / "w1").exists()


def test_never_fails_the_job_on_sigkill_and_names_the_replica():
    replicas = [(tf_config.Task("worker", 0), _program("import os; print('bye'); os.kill(os.getpid(), 9)"), dict(os.environ))]
    with pytest.raises(TrainingFailedError) as error:
        run_processes(replicas, _spec(restart_policy="Never"), strategy_rules.MIRRORED, Log())
    message = str(error.value)
    assert "worker-0" in message and "exit code 137 (killed by SIGKILL)" in message
    assert "restartPolicy Never does not restart exit code 137" in message


def test_exit_code_policy_restarts_a_killed_replica(tmp_path):
    log = Log()
    replicas = [(tf_config.Task("worker", 0), _program(KILL_SELF_ONCE) + [str(tmp_path / "m")], dict(os.environ))]
    result = run_processes(replicas, _spec(restart_policy="ExitCode"), strategy_rules.MIRRORED, log)
    assert result.restarts == 1
    assert any("worker-0 exited with code 137; restarting it (restartPolicy ExitCode" in line for line in log)
    assert "[worker-0] second life" in log


@pytest.mark.parametrize("policy,code,restarted", [
    ("ExitCode", 1, False), ("ExitCode", 127, False), ("ExitCode", 128, True),
    ("ExitCode", 138, True), ("ExitCode", 255, True), ("OnFailure", 1, True), ("Never", 143, False),
])
def test_which_exit_codes_are_retried(tmp_path, policy, code, restarted):
    replicas = [(tf_config.Task("worker", 0), _program(EXIT_ONCE) + [str(tmp_path / "m"), str(code)], dict(os.environ))]
    if restarted:
        assert run_processes(replicas, _spec(restart_policy=policy), strategy_rules.MIRRORED, Log()).restarts == 1
    else:
        with pytest.raises(TrainingFailedError, match=f"restartPolicy {policy} does not restart exit code {code}"):
            run_processes(replicas, _spec(restart_policy=policy), strategy_rules.MIRRORED, Log())


def test_backoff_limit_bounds_the_restarts():
    replicas = [(tf_config.Task("worker", 0), _program("import os; os.kill(os.getpid(), 9)"), dict(os.environ))]
    log = Log()
    with pytest.raises(TrainingFailedError, match=r"backoff limit reached: 2 restart\(s\) of backoff_limit=2"):
        run_processes(replicas, _spec(restart_policy="OnFailure", backoff_limit=2), strategy_rules.MIRRORED, log)
    assert sum("restarting it" in line for line in log) == 2


def test_active_deadline_stops_every_replica(tmp_path):
    pid_file = tmp_path / "pid"
    replicas = [(tf_config.Task("worker", 0), _program(f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(120)"), dict(os.environ))]
    started = time.monotonic()
    with pytest.raises(TrainingFailedError, match=r"DeadlineExceeded: the job ran longer than active_deadline_seconds=1"):
        run_processes(replicas, _spec(active_deadline_seconds=1), strategy_rules.MIRRORED, Log())
    assert time.monotonic() - started < 15
    assert not is_running(int(pid_file.read_text()))


def test_horovod_jobs_end_with_their_launcher():
    log = Log()
    replicas = [(tf_config.Task("launcher", 0),
                 _program("print('[1,0]<stdout>:hello from rank 0'); print('[1,1]<stderr>:rank 1 here')"),
                 dict(os.environ))]
    result = run_processes(replicas, _spec(workers=2, restart_policy="OnFailure"), strategy_rules.HOROVOD, log)
    assert result.restarts == 0
    assert "[rank-0] hello from rank 0" in log and "[rank-1] rank 1 here" in log


def test_a_failed_launcher_names_the_rank_of_each_last_line():
    replicas = [(tf_config.Task("launcher", 0),
                 _program("import sys; print('[1,1]<stderr>:out of memory'); sys.exit(3)"),
                 dict(os.environ))]
    with pytest.raises(TrainingFailedError, match=r"\[rank-1\] out of memory"):
        run_processes(replicas, _spec(workers=2, restart_policy="Never"), strategy_rules.HOROVOD,
                      Log())


def test_port_reservations_of_two_jobs_never_overlap():
    same = lambda n: [40123, 40124, 40125][:n]  # noqa: E731 -- both "jobs" are offered the same ports
    first = PortReservation(2, candidates=same)
    try:
        offered = iter([[40123, 40124], [40125], [40126]])
        second = PortReservation(2, candidates=lambda n: next(offered))
        try:
            assert first.ports == [40123, 40124]
            assert second.ports == [40125, 40126]
        finally:
            second.release()
    finally:
        first.release()
    again = PortReservation(2, candidates=same)  # released ports can be taken again
    assert again.ports == [40123, 40124]
    again.release()
    assert not any(os.path.exists(os.path.join(port_lock_dir(), f"{port}.lock"))
                   for port in (40123, 40124, 40125, 40126))  # nothing left behind


def test_a_lock_taken_on_a_removed_lock_file_is_not_a_reservation(monkeypatch):
    """A job that opened a port's lock file just before its holder released and removed it
    gets the lock of a file that is gone (another job may have created it afresh and hold
    that): the port is not reserved, and the job moves on to another port."""
    from kfdist.components.train_distributed.local import ports

    real_flock = fcntl.flock

    def released_meanwhile(f, operation):  # the holder removes the file; another creates it
        if f.name.endswith("40141.lock"):
            os.unlink(f.name)
            open(f.name, "a").close()
        real_flock(f, operation)

    monkeypatch.setattr(ports.fcntl, "flock", released_meanwhile)
    offered = iter([[40141], [40142]])
    reservation = PortReservation(1, candidates=lambda n: next(offered))
    try:
        assert reservation.ports == [40142]
    finally:
        reservation.release()
        os.unlink(os.path.join(port_lock_dir(), "40141.lock"))


def test_local_cluster_has_every_replica_type_on_its_own_port():
    spec = _spec(workers=2, ps=2, evaluator=True)
    cluster = local_backend.local_cluster(spec, strategy_rules.PARAMETER_SERVER, [5000, 5001, 5002, 5003, 5004, 5005])
    assert cluster == {"chief": ["localhost:5000"], "worker": ["localhost:5001", "localhost:5002"],
                       "ps": ["localhost:5003", "localhost:5004"], "evaluator": ["localhost:5005"]}
