"""`kfdist render launch`: the job `kfdist launch` creates, printed from its own code path.

Each cluster backend's output is the same object `kfdist launch --dry-run` prints for the same
flags, and validates against its operator's CRD with no field pruned.
"""

import subprocess
import sys

import pytest
import yaml

from fakes import crd_schema
from kfdist.components.launch_program.render_pytorchjob import PYTORCHJOB_V1
from kfdist.components.train_distributed.kubernetes.build.job_kinds import (
    MPIJOB_V2BETA1, TFJOB_V1, TRAINJOB_V1ALPHA1)

COMMON = ["--workers", "2", "--output", "gs://team-bucket/runs/r", "--gpus-per-worker", "1",
          "--node-selector", "pool=gpu", "--queue-name", "team-q"]
CASES = {
    "tfjob": (["--framework", "tensorflow", "--ps", "1", "--image", "r.example/tf:1"], TFJOB_V1),
    "pytorchjob": (["--framework", "pytorch", "--image", "r.example/pt:1"], PYTORCHJOB_V1),
    "mpijob": (["--framework", "tensorflow", "--mpi", "--program-dir", "examples"], MPIJOB_V2BETA1),
    "trainjob": (["--framework", "pytorch", "--program-dir", "examples", "--stage"],
                 TRAINJOB_V1ALPHA1),
}


def _kfdist(*args):
    done = subprocess.run([sys.executable, "-m", "kfdist", *args], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return yaml.safe_load(done.stdout)


@pytest.mark.parametrize("backend", sorted(CASES))
def test_render_launch_prints_what_launch_creates_and_the_crd_keeps_every_field(backend):
    flags, kind = CASES[backend]
    argv = [*flags, *COMMON, "--backend", backend, "--", "python", "train.py"]
    rendered = _kfdist("render", "launch", *argv)
    assert rendered == _kfdist("launch", "--dry-run", *argv)
    assert rendered["kind"] == kind.kind
    path = (crd_schema.crd_path("trainer.kubeflow.org_trainjobs.trainer-v2.3.0.yaml")
            if kind is TRAINJOB_V1ALPHA1 else crd_schema.crd_path_for(kind))
    assert crd_schema.load_crd(path).validate(rendered) == []
    assert rendered["metadata"]["labels"] == {"kueue.x-k8s.io/queue-name": "team-q"}


def test_render_launch_refuses_the_local_backend_naming_the_cluster_ones():
    done = subprocess.run([sys.executable, "-m", "kfdist", "render", "launch", "--framework",
                           "pytorch", "--output", "gs://b/o", "--", "python", "t.py"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert ("--backend tfjob | pytorchjob | trainjob | mpijob | auto (it prints a cluster job, "
            "not 'local')") in done.stderr


def test_render_launch_names_every_missing_input_at_once():
    """Not one per try: the output, a cluster backend, the image and the program, in one line."""
    done = subprocess.run([sys.executable, "-m", "kfdist", "render", "launch"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith("kfdist: invalid input: kfdist render launch needs --output DIR ")
    for named in ("; --backend tfjob | pytorchjob", "; --image IMAGE:TAG", " or --program-dir DIR",
                  "; the program after `--`"):
        assert named in line, line
