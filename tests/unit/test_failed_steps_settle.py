"""A run whose state is FAILED before its steps' states are (KFP 2.17's persistence agent can
report them in that order) is read again until a step shows FAILED, within a bound: `kfdist
submit` names the failed step. The client here is a stand-in that answers `get_run` from a
list, since the real API server cannot be made to lag on demand."""

from types import SimpleNamespace

from kfdist import kfp_run_api


def _run(*states):
    tasks = [SimpleNamespace(display_name=name, state=state, child_tasks=())
             for name, state in zip(("shard-dataset", "train-distributed"), states)]
    return SimpleNamespace(state="FAILED", run_details=SimpleNamespace(task_details=tasks))


class _Answers:
    """Answers each `get_run` with the next run of `runs` (the last one after that)."""

    def __init__(self, *runs):
        self.runs, self.asked = list(runs), 0

    def get_run(self, run_id):
        self.asked += 1
        return self.runs.pop(0) if len(self.runs) > 1 else self.runs[0]


def test_the_failed_step_is_read_once_the_steps_catch_up():
    lagging = _run("SUCCEEDED", "RUNNING")
    client = _Answers(lagging, _run("SUCCEEDED", "FAILED"))
    run = kfp_run_api.settled_run(client, "r", lagging, poll_interval=0.01, settle_s=5)
    assert kfp_run_api.failed_steps(run) == ("train-distributed",) and client.asked == 2


def test_the_wait_for_a_failed_step_is_bounded():
    lagging = _run("SUCCEEDED", "RUNNING")
    client = _Answers(lagging)
    run = kfp_run_api.settled_run(client, "r", lagging, poll_interval=0.01, settle_s=0.1)
    assert kfp_run_api.failed_steps(run) == () and 1 <= client.asked <= 20
