"""One pipeline on Kubeflow Pipelines' real backend beside `kfdist run`, step by step.

The tabular pipeline on scikit-learn's wine table (3 epochs, `backend=local`: each step's work
is the same on both sides), in alternating rounds:

* `kfdist run tabular` here (kfp.local, each step a process): each step's time as the console
  prints it (`done in`), and the run's wall time;
* the compiled `pipelines/tabular.yaml` submitted to Kubeflow Pipelines 2.17 (API server, Argo,
  the v2 driver and launcher, MLMD, the object store) on the project's genuine-node bed, caching
  off: the run's wall time (from its creation to SUCCEEDED, as the API reports it) and, for each
  step, where its time went: the driver's pod, the step pod's start (scheduling, the init
  containers that copy Argo's executor and KFP's launcher), the launcher's inputs (MLMD, the
  cache check, the input artifacts' download), the component itself (kfdist's step, in its
  Python process) and its outputs (upload, MLMD publish); the rest is Argo between steps.

The KFP side runs on a bed a person started (`--kfp-bed DIR`, from `bash tests/cluster/up.sh DIR
--stack node --with-kfp`) or on one started here for the measure (about a minute when the build
cache is warm). The step pods' phases come from their status and their log lines' kubelet
timestamps.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional

from benchmarks import repeats
from benchmarks.common import REPO_ROOT, started_bed

PARAMS = {"label_column": "target", "backend": "local", "epochs": 3,
          "accuracy_threshold": 0.5}
#: The pipeline's tasks by the steps `kfdist run` names.
STEPS = {"shard": "shard-dataset", "train": "train-distributed", "evaluate": "evaluate-model",
         "export": "export-saved-model"}
PHASES = ("driver", "pod_start", "inputs", "component", "outputs")
RUN_TIMEOUT_S = 900
_DONE = re.compile(r"^  (?P<step>\w+)\s+done in (?P<seconds>[\d.]+)s")
_WALL = re.compile(r"^done in (?P<seconds>[\d.]+)s")
#: Launcher log lines that end the inputs, the component and the outputs (`kubectl --timestamps`).
_MARKS = (("inputs", "Looking for component"), ("component", "ExecutorOutput:"),
          ("outputs", "publish success."))


@contextlib.contextmanager
def kfp_bed(given: Optional[str]) -> Iterator[Path]:
    """Yields the directory of a bed with KFP: `given`, or one started here (stopped after)."""
    if given:
        yield Path(given)
        return
    with started_bed("--stack", "node", "--with-kfp") as root:
        yield Path(root)


def _kubectl(bed: Path, *args: str) -> str:
    beside = os.path.join(os.path.dirname(sys.executable), "kubectl")  # the venv's, else PATH's
    kubectl = beside if os.path.exists(beside) else "kubectl"
    return subprocess.run([kubectl, f"--kubeconfig={bed / 'kubeconfig'}", "-n", "kubeflow",
                           *args], capture_output=True, text=True, check=True, timeout=120).stdout


def _store(bed: Path):
    """A boto3 client of the bed's object store, with the keys of KFP's own Secret."""
    import boto3

    record = json.loads((bed / "kfp.json").read_text())
    secret = json.loads(_kubectl(bed, "get", "secret", "mlpipeline-minio-artifact", "-o",
                                 "json"))["data"]
    key = {name: base64.b64decode(value).decode() for name, value in secret.items()}
    return boto3.client("s3", endpoint_url=f"http://{record['node_ip']}:{record['s3_port']}",
                        aws_access_key_id=key["accesskey"],
                        aws_secret_access_key=key["secretkey"], region_name="us-east-1")


def argo_requeue_time(bed: Path) -> str:
    """The bed's Argo controller's `defaultRequeueTime` (its start line in its log), or `?`."""
    try:
        found = re.search(r"defaultRequeueTime=(\S+)",
                          (bed / "logs" / "workflow-controller.log").read_text(errors="replace"))
    except OSError:
        found = None
    return found.group(1) if found else "?"


def local_run(table: str, out: str) -> Dict[str, Any]:
    """`kfdist run tabular` on `table`: {"wall", "steps": {step: seconds}}."""
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "kfdist", "run", "tabular", "--data", table,
                           "--export-base", os.path.join(out, "serving"), "--output", out,
                           *[f"--{k.replace('_', '-')}={v}" for k, v in PARAMS.items()]],
                          capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"kfdist run failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    steps = {m["step"]: float(m["seconds"]) for m in map(_DONE.match, done.stdout.splitlines())
             if m}
    return {"wall": round(wall, 2), "steps": steps}


def kfp_run(bed: Path, client, package: str, source_uri: str, export_base: str) -> Dict[str, Any]:
    """The pipeline on KFP (caching off): {"wall", "steps": {step: {phase: seconds}}}."""
    run = client.create_run_from_pipeline_package(
        package, arguments=dict(PARAMS, source_uri=source_uri, export_base=export_base),
        enable_caching=False)
    done = client.wait_for_run_completion(run.run_id, timeout=RUN_TIMEOUT_S)
    if done.state != "SUCCEEDED":
        raise RuntimeError(f"run {run.run_id} ended {done.state}: {done.error}")
    wall = (done.finished_at - done.created_at).total_seconds()
    pods = json.loads(_kubectl(bed, "get", "pods", "-l", f"pipeline/runid={run.run_id}", "-o",
                               "json"))["items"]
    return {"wall": round(wall, 2), "steps": {step: step_phases(bed, pods, task)
                                              for step, task in STEPS.items()}}


def _node(pod: Dict[str, Any]) -> str:
    return pod["metadata"].get("annotations", {}).get("workflows.argoproj.io/node-name", "")


def _time(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def step_phases(bed: Path, pods: List[Dict[str, Any]], task: str) -> Dict[str, float]:
    """Where the step `task` spent its time, from its driver's and executor's pods."""
    [driver] = [p for p in pods if _node(p).endswith(f".{task}-driver")]
    [executor] = [p for p in pods if _node(p).endswith(f".{task}.executor")]
    lines = _kubectl(bed, "logs", executor["metadata"]["name"], "-c", "main",
                     "--timestamps").splitlines()
    return phases(driver, executor, lines)


def phases(driver: Dict[str, Any], executor: Dict[str, Any], lines: List[str]) -> Dict[str, float]:
    """A step's phases (`PHASES`, seconds) from its driver's and executor's pods and the
    executor's `main` log lines with their kubelet timestamps (pure)."""
    driver_end = max(_time(c["state"]["terminated"]["finishedAt"])
                     for c in driver["status"]["containerStatuses"])
    found = {"driver": driver_end - _time(driver["metadata"]["creationTimestamp"])}
    at = _time(lines[0].split(" ", 1)[0])
    found["pod_start"] = at - _time(executor["metadata"]["creationTimestamp"])
    for phase, mark in _MARKS:
        stamp = _time(next(line.split(" ", 1)[0] for line in lines if mark in line))
        found[phase], at = stamp - at, stamp
    return {phase: round(seconds, 2) for phase, seconds in found.items()}


def summarise(local: List[Dict[str, Any]], kfp: List[Dict[str, Any]]) -> Dict[str, Any]:
    """The rounds as spreads: wall times, their ratio, and each step on both sides (pure)."""
    steps = {}
    for step in STEPS:
        phases = {phase: repeats.spread([r["steps"][step][phase] for r in kfp])
                  for phase in PHASES}
        steps[step] = {"local": repeats.spread([r["steps"][step] for r in local]),
                       "kfp": repeats.spread([sum(r["steps"][step].values()) for r in kfp]),
                       "kfp_phases": phases}
    overhead = {phase: repeats.spread([sum(r["steps"][s][phase] for s in STEPS) for r in kfp])
                for phase in PHASES}
    between = [r["wall"] - sum(sum(p.values()) for p in r["steps"].values()) for r in kfp]
    return {"rounds": len(kfp), "pipeline": "tabular (wine, 3 epochs, backend=local)",
            "local_wall": repeats.spread([r["wall"] for r in local]),
            "kfp_wall": repeats.spread([r["wall"] for r in kfp]),
            "kfp_over_local": repeats.ratios([r["wall"] for r in kfp],
                                             [r["wall"] for r in local]),
            "steps": steps, "kfp_by_phase": overhead,
            "kfp_between_steps": repeats.spread(between)}


def measure(rounds: int, bed_dir: Optional[str], log: Callable[[str], None]) -> Dict[str, Any]:
    """The pair, `rounds` alternating rounds; see the module's docstring."""
    import kfp
    from sklearn.datasets import load_wine

    with kfp_bed(bed_dir) as bed, tempfile.TemporaryDirectory(prefix="kfdist-bench-") as root:
        table = os.path.join(root, "wine.csv")
        load_wine(as_frame=True).frame.to_csv(table, index=False)
        prefix = f"bench/{int(time.time())}"
        _store(bed).upload_file(table, "mlpipeline", f"{prefix}/wine.csv")
        client = kfp.Client(host=(bed / "kfp-host").read_text().strip())
        package = os.path.join(REPO_ROOT, "pipelines", "tabular.yaml")
        local, remote = repeats.run_alternating([
            lambda i: local_run(table, os.path.join(root, f"local-{i}")),
            lambda i: kfp_run(bed, client, package, f"minio://mlpipeline/{prefix}/wine.csv",
                              f"minio://mlpipeline/{prefix}/serving-{i}")], rounds, log)
        requeue = argo_requeue_time(bed)
    return dict(summarise(local, remote), argo_requeue_time=requeue, local_runs=local,
                kfp_runs=remote)


def report_lines(m: Dict[str, Any]) -> List[str]:
    """results.md's section: each step here and on KFP, and where KFP's time went."""
    from benchmarks.common import markdown_table

    show = repeats.show
    rows = [[step, show(s["local"]), show(s["kfp"]),
             *[show(s["kfp_phases"][phase]) for phase in PHASES]]
            for step, s in m["steps"].items()]
    rows.append(["(the whole run)", show(m["local_wall"]), show(m["kfp_wall"]),
                 *[show(m["kfp_by_phase"][phase]) for phase in PHASES]])
    return [f"## One pipeline on Kubeflow Pipelines beside kfdist run ({m['rounds']} rounds, "
            "seconds)", "", f"{m['pipeline']}: KFP over kfp.local "
            f"{show(m['kfp_over_local'])}x; between steps (Argo, the drivers of the root DAG "
            f"and of the `blessed` condition) {show(m['kfp_between_steps'])} s.",
            f"Argo's controller ran with `DEFAULT_REQUEUE_TIME` {m.get('argo_requeue_time', '?')}"
            " (how soon it looks at a workflow again after a step ends).",
            "", markdown_table(["step", "kfdist run", "KFP", *[f"KFP: {p.replace('_', ' ')}"
                                                             for p in PHASES]], rows)]
