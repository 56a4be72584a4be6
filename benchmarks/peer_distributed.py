"""Distributed overhead: kfdist's local backend against a plain script of the same strategy.

The plain script is the program the seeds run by hand: every process reads `TF_CONFIG`, builds
the strategy, reads the same shards of the same kfdist dataset with `tf.data`, and trains the
same model (`mnist_mlp`) with the same batch per replica and Adam:

* `multi_worker_mirrored`, 2 workers: `fit` with the eval split as `validation_data`;
* `parameter_server`, a chief, 1 PS and 2 workers: the chief's `fit` over a `DatasetCreator`,
  the PS and the workers as `tf.distribute.Server`s; the chief scores the eval split after every
  epoch (there is no validation in a PS `fit`).

The benchmark starts the plain processes itself with the Training Operator's TF_CONFIG layout on
localhost, as `kfdist launch` would. kfdist's side is the training step on its local backend, in
a process of its own as a pipeline runs it.
Two pairs per strategy (`PAIRS`):

* `matched`: the overhead. Both sides run one step per call of the train function and read their
  input the same way: the plain script uses the training step's own input function (the split
  decoded once into memory), kfdist runs with `steps_per_execution=1`.
* `defaults`: kfdist as it ships (`steps_per_execution` 16, in-memory input) against the script
  as TensorFlow's tutorials write it (every batch parsed from the TFRecords; one step per call for
  `multi_worker_mirrored`, 10 for `parameter_server`, as its tutorial compiles).

Each pair runs `repeats.REPEATS` rounds, alternating which side goes first; a `matched` round
also runs the plain script a second time (`plain_again`), and the plain script's steps/s over its
own second run's is the resolution of the comparison: a ratio of two runs of one program, which
would be 1.0 on a quiet machine. Reported per side and round, and as median and spread:
steady-state steps and examples per second (the epochs after the first, training only), start-up
(the job's start to its first epoch's first step), the exit (the last epoch's end to the job's
end: saving, `fit`'s return, the processes' exit), the seconds to a held-out accuracy target
(start-up plus the epochs, with their validation, up to the first that reaches it), and kfdist's
steps/s over the plain script's per round.
"""

from __future__ import annotations

import collections
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from kfdist.components.train_distributed.job.config import STEPS_PER_EXECUTION

from benchmarks import repeats, time_to_accuracy
from benchmarks.common import CHILD_ENV, REPO_ROOT, epoch_wall_seconds

BATCH = 64
#: The strategies compared, with their layouts.
LAYOUTS = {"multi_worker_mirrored": {"worker": 2}, "parameter_server": {"chief": 1, "worker": 2,
                                                                        "ps": 1}}
PLAIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "plain_distributed.py")
#: Steps per call in TensorFlow's tutorials: Keras's default for MultiWorkerMirroredStrategy,
#: 10 in the ParameterServerStrategy tutorial.
TUTORIAL_STEPS_PER_EXECUTION = {"multi_worker_mirrored": 1, "parameter_server": 10}
#: Pairs that also run the plain script a second time in every round (`plain_again`): the ratio
#: of two runs of one program is what this machine's noise alone moves a ratio by.
CONTROLLED = ("matched",)
#: The plain script's inputs (its INPUT argument), as the tables name them.
INPUTS = {"kfdist": "in memory (the training step's input function)",
          "records": "TFRecords, parsed per batch"}
#: The pairs: (kfdist's settings, the plain script's) by strategy; None is kfdist's default.
PAIRS: Dict[str, Callable[[str], Tuple[Optional[int], Dict[str, Any]]]] = {
    "matched": lambda strategy: (1, {"steps_per_execution": 1, "input": "kfdist"}),
    "defaults": lambda strategy: (None, {
        "steps_per_execution": TUTORIAL_STEPS_PER_EXECUTION[strategy], "input": "records"}),
}


def _run_plain(strategy: str, dataset: str, epochs: int, out: str,
               settings: Dict[str, Any]) -> Dict[str, Any]:
    """Starts every process of the layout with its TF_CONFIG; returns the leader's figures."""
    from kfdist.components.train_distributed.local.ports import free_ports

    layout = LAYOUTS[strategy]
    ports = iter(free_ports(sum(layout.values())))
    cluster = {kind: [f"localhost:{next(ports)}" for _ in range(n)] for kind, n in layout.items()}
    leader = ("chief", 0) if "chief" in layout else ("worker", 0)
    env = dict(os.environ, **CHILD_ENV, PYTHONPATH=REPO_ROOT)
    processes, result_file = [], os.path.join(out, "plain.json")
    started_unix = time.time()
    for kind, addresses in cluster.items():
        for index in range(len(addresses)):
            config = {"cluster": cluster, "task": {"type": kind, "index": index}}
            processes.append(((kind, index), subprocess.Popen(
                [sys.executable, PLAIN, strategy, dataset, str(epochs), str(BATCH), result_file,
                 str(settings["steps_per_execution"]), settings["input"]],
                env=dict(env, TF_CONFIG=json.dumps(config)), stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE, text=True)))
    try:
        chief = dict(processes)[leader]
        _, err = chief.communicate(timeout=3600)
        if chief.returncode != 0:
            raise RuntimeError(f"plain {strategy} failed:\n{err[-3000:]}")
        for task, process in processes:
            if task[0] != "ps" and strategy != "parameter_server":
                process.wait(timeout=300)
    finally:
        for _, process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()
    ended_unix = time.time()
    with open(result_file) as f:
        figures = json.load(f)
    return dict(figures, started_unix=started_unix, ended_unix=ended_unix)


#: kfdist's training step in a process of its own, as a pipeline step runs (kfp.local starts one
#: per step): its arguments as JSON; it prints the step's log lines.
STEP = """
import json, sys
from kfdist.components.train_distributed import runtime
args = json.loads(sys.argv[1])
runtime.train(args.pop("dataset"), args.pop("out"), log=lambda line: print(line, flush=True),
              **args)
"""


def _run_kfdist(strategy: str, dataset: str, epochs: int, out: str,
                steps_per_execution: Optional[int]) -> Dict[str, Any]:
    """The training step on the local backend, in a process of its own as in a pipeline (not in
    the benchmark's, whose threads would share the cores with the replicas); its epochs and when
    its first began and its last ended (from the arrival of the leader's epoch lines, less the
    epoch's own time)."""
    from kfdist.components.train_distributed.job.epoch_line import parse_epoch_line

    layout = LAYOUTS[strategy]
    arrivals: Dict[int, float] = {}
    settings = {} if steps_per_execution is None else {"steps_per_execution": steps_per_execution}
    args = dict(dataset=dataset, out=out, strategy=strategy, workers=layout["worker"],
                ps=layout.get("ps", 0), epochs=epochs, batch_size_per_replica=BATCH, **settings)
    env = dict(os.environ, PYTHONPATH=REPO_ROOT, PYTHONUNBUFFERED="1")
    started_unix = time.time()
    step = subprocess.Popen([sys.executable, "-c", STEP, json.dumps(args)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    tail: "collections.deque[str]" = collections.deque(maxlen=40)
    try:
        for line in step.stdout:
            progress = parse_epoch_line(line.rstrip("\n"))
            if progress is not None:
                arrivals.setdefault(progress.epoch, time.time())
            tail.append(line)
        step.wait(timeout=3600)
    finally:
        if step.poll() is None:
            step.kill()
            step.wait()
    ended_unix = time.time()
    if step.returncode != 0:
        raise RuntimeError(f"kfdist {strategy} failed:\n{''.join(tail)}")
    with open(os.path.join(out, "history.json")) as f:
        history = json.load(f)["epochs"]
    epochs_run = [{"seconds": e["seconds"], "val_accuracy": e.get("val_accuracy", 0.0),
                   "validation_seconds": e.get("validation_seconds", 0.0)} for e in history]
    first, last = epochs_run[0], len(epochs_run)
    return {"epochs": epochs_run, "started_unix": started_unix, "ended_unix": ended_unix,
            "first_epoch_begin_unix": arrivals[1] - first["seconds"] - first["validation_seconds"],
            "last_epoch_end_unix": arrivals[last]}


def figures(run: Dict[str, Any], steps: int, examples_per_step: int,
            target: float) -> Dict[str, Any]:
    """One run's figures: steady-state speed, start-up, exit and the time to `target`.

    Args:
      run: `epochs` (each with `seconds`, `validation_seconds`, `val_accuracy`) and the times
        (`time.time()`) the job started and ended, its first epoch began and its last ended.
      steps: Steps per epoch.
      examples_per_step: Examples per step.
      target: The held-out accuracy.
    """
    epochs: List[Dict[str, float]] = run["epochs"]
    steady = [e["seconds"] for e in epochs[1:]] or [epochs[0]["seconds"]]
    steps_per_second = steps * len(steady) / sum(steady)
    startup = run["first_epoch_begin_unix"] - run["started_unix"]
    return {"steps_per_second": round(steps_per_second, 2),
            "examples_per_second": round(steps_per_second * examples_per_step),
            "startup_seconds": round(startup, 2),
            "exit_seconds": round(run["ended_unix"] - run["last_epoch_end_unix"], 2),
            "job_seconds": round(run["ended_unix"] - run["started_unix"], 2),
            **time_to_accuracy.reaching_target(epochs, startup, target),
            "val_accuracy": [round(e["val_accuracy"], 4) for e in epochs],
            "epoch_wall_seconds": [round(s, 2) for s in epoch_wall_seconds(epochs)]}


#: The figures reported as median and spread for each side.
SPREAD_FIGURES = ("steps_per_second", "examples_per_second", "startup_seconds", "exit_seconds",
                  "job_seconds", "seconds_to_target")


def measure_pair(strategy: str, pair: str, dataset: str, root: str, epochs: int, target: float,
                 rounds: int, log: Callable[[str], None]) -> Dict[str, Any]:
    """One pair of one strategy, `rounds` alternating rounds; each side's runs and spreads."""
    layout = LAYOUTS[strategy]
    # Both sides' epoch is one pass over the train split, as the training step counts it:
    # steps of a batch per worker (all-reduce), or of one worker's batch (PS).
    per_step = BATCH * (layout["worker"] if strategy == "multi_worker_mirrored" else 1)
    with open(os.path.join(dataset, "metadata.json")) as f:
        train_examples = json.load(f)["splits"]["train"]["num_examples"]
    steps = train_examples // per_step
    ours, plain = PAIRS[pair](strategy)

    def side(name: str, run: Callable[[str], Dict[str, Any]]) -> Callable[[int], Dict[str, Any]]:
        def go(index: int) -> Dict[str, Any]:
            out = os.path.join(root, f"{strategy}-{pair}-{name}-{index}")
            os.makedirs(out)
            try:
                return figures(run(out), steps, per_step, target)
            finally:
                shutil.rmtree(out, ignore_errors=True)
        return go

    sides = [side("kfdist", lambda out: _run_kfdist(strategy, dataset, epochs, out, ours)),
             side("plain", lambda out: _run_plain(strategy, dataset, epochs, out, plain))]
    if pair in CONTROLLED:  # the same plain script again: the measurement's own spread
        sides.append(side("plain-again", lambda out: _run_plain(strategy, dataset, epochs, out,
                                                                  plain)))
    runs = repeats.run_alternating(
        sides, rounds, lambda line: log(f"peers distributed {strategy} {pair}: {line}"),
        pair=f"{strategy}/{pair}")
    result = pair_result(steps, per_step, ours, plain, runs[0], runs[1])
    return with_control(result, runs[2]) if pair in CONTROLLED else result


def with_control(result: Dict[str, Any], again: List[Dict[str, Any]]) -> Dict[str, Any]:
    """A pair's figures (`pair_result`) with the plain script's second runs, by round, and its
    steps/s over theirs: the spread of a ratio of one program to itself."""
    plain = result["plain"]["runs"]
    return dict(result, plain_again={"runs": again, **repeats.spreads_of(again, SPREAD_FIGURES)},
                plain_steps_per_second_over_plain_again=repeats.ratios(
                    [r["steps_per_second"] for r in plain], [r["steps_per_second"] for r in again]))


def pair_result(steps: int, per_step: int, ours: Optional[int], plain: Dict[str, Any],
                kfdist: List[Dict[str, Any]], script: List[Dict[str, Any]]) -> Dict[str, Any]:
    """A pair's figures: its settings, each side's runs (`figures`) with their spreads, and
    kfdist's steps/s over the plain script's, round by round.

    Args:
      steps: Steps per epoch.
      per_step: Examples per step.
      ours: kfdist's steps per call (None: its default).
      plain: The plain script's settings (`PAIRS`).
      kfdist: kfdist's runs, by round.
      script: The plain script's runs, by round.
    """
    return {"steps_per_epoch": steps, "examples_per_step": per_step,
            "kfdist_steps_per_execution": ours if ours is not None else STEPS_PER_EXECUTION,
            "kfdist_input": INPUTS["kfdist"],
            "plain_steps_per_execution": plain["steps_per_execution"],
            "plain_input": INPUTS[plain["input"]],
            "kfdist": {"runs": kfdist, **repeats.spreads_of(kfdist, SPREAD_FIGURES)},
            "plain": {"runs": script, **repeats.spreads_of(script, SPREAD_FIGURES)},
            "kfdist_steps_per_second_over_plain": repeats.ratios(
                [r["steps_per_second"] for r in kfdist], [r["steps_per_second"] for r in script])}


def measure(data: str, train_examples: int, epochs: int, target: float,
            log: Callable[[str], None] = lambda line: None,
            rounds: int = repeats.REPEATS) -> Dict[str, Any]:
    """Both pairs of each strategy on `data` (MNIST-like files, sharded here in 4 files)."""
    from kfdist.components.shard_dataset.runtime import shard

    result: Dict[str, Any] = {"train_examples": train_examples, "epochs": epochs,
                              "target_accuracy": target, "batch_per_replica": BATCH,
                              "rounds": rounds}
    with tempfile.TemporaryDirectory(prefix="kfdist-bench-dist-") as root:
        dataset = os.path.join(root, "dataset")
        shard(data, dataset, num_shards=4, log=lambda line: None)
        for strategy in LAYOUTS:
            result[strategy] = {pair: measure_pair(strategy, pair, dataset, root, epochs, target,
                                                   rounds, log) for pair in PAIRS}
    return result
