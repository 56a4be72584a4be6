"""`kfdist launch --program-dir DIR [--requirements FILE]`: a program shipped, not built into an image.

The directory is copied to OUTPUT/program; every replica (`pod_entry`) runs the command in a copy
of its own, with the pinned requirements installed there (not into this environment), and the
copies are gone after the job.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

PROGRAM = """
import os, helper, tabulate
print("rank", os.environ["RANK"], "helper", helper.VALUE, "tabulate", tabulate.__version__,
      "cwd", os.getcwd(), flush=True)
with open(os.path.join(os.environ["KFDIST_MODEL_DIR"], "done-" + os.environ["RANK"]), "w") as f:
    f.write(tabulate.__version__)
# The job succeeds with its master, which ends the workers still running: the master waits
# until every rank has written its file.
import time
deadline = time.monotonic() + 120
while os.environ["RANK"] == "0" and time.monotonic() < deadline and len(
        [n for n in os.listdir(os.environ["KFDIST_MODEL_DIR"]) if n.startswith("done-")]
        ) < int(os.environ["WORLD_SIZE"]):
    time.sleep(0.2)
"""


@pytest.fixture
def program(tmp_path):
    folder = tmp_path / "prog"
    folder.mkdir()
    (folder / "train.py").write_text(PROGRAM)
    (folder / "helper.py").write_text("VALUE = 42\n")
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("# what train.py needs\ntabulate==0.9.0  # an older one than kfdist's\n")
    return folder, requirements


def _launch(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "kfdist", "launch", "--framework", "pytorch",
                           "--workers", "2", *args], capture_output=True, text=True, timeout=300,
                          cwd=cwd)


def test_every_replica_runs_its_own_copy_with_the_pinned_requirements(program, tmp_path):
    import tabulate

    folder, requirements = program
    assert tabulate.__version__ != "0.9.0"  # so the replicas' 0.9.0 is the shipped requirement
    out = tmp_path / "out"
    done = _launch("--program-dir", str(folder), "--requirements", str(requirements),
                   "--output", str(out), "--", sys.executable, "train.py")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "[master-0] kfdist-program: installed the requirements in" in done.stdout
    cwds = re.findall(r"\[(?:master|worker)-0\] rank \d helper 42 tabulate 0\.9\.0 cwd (\S+)",
                      done.stdout)
    assert len(set(cwds)) == 2, done.stdout  # a copy each
    assert not any(os.path.exists(c) for c in cwds)  # removed with the job
    assert sorted(os.listdir(out / "program")) == [".kfdist-requirements.txt", "helper.py",
                                                   "train.py"]
    assert (out / "model" / "done-0").read_text() == (out / "model" / "done-1").read_text() == "0.9.0"


@pytest.mark.parametrize("extra, message", [
    (["--requirements", "REQ"], "--requirements are installed with the program --program-dir"),
    (["--program-dir", "nowhere"], "--program-dir 'nowhere' is not a directory"),
    (["--program-dir", "PROG", "--requirements", "UNPINNED"],
     "line 2: 'numpy>=2' is not pinned to one version"),
])
def test_bad_program_input_is_refused_before_anything_is_written(program, tmp_path, extra,
                                                                 message):
    folder, requirements = program
    unpinned = tmp_path / "unpinned.txt"
    unpinned.write_text("tabulate==0.9.0\nnumpy>=2\n")
    paths = {"REQ": str(requirements), "PROG": str(folder), "UNPINNED": str(unpinned)}
    done = _launch(*[paths.get(a, a) for a in extra], "--output", str(tmp_path / "out"), "--",
                   sys.executable, "train.py")
    assert done.returncode == 2 and message in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_a_missing_program_file_fails_the_job_naming_it(program, tmp_path):
    folder, _ = program
    done = _launch("--program-dir", str(folder), "--output", str(tmp_path / "out"), "--",
                   sys.executable, "nothere.py")
    assert done.returncode == 1
    assert "nothere.py" in done.stderr and "exit code 2" in done.stderr


def test_the_cluster_job_runs_the_program_in_kfdists_runtime_image(program, tmp_path):
    import yaml

    from kfdist import RUNTIME_IMAGE

    folder, requirements = program
    done = _launch("--backend", "pytorchjob", "--program-dir", str(folder), "--requirements",
                   str(requirements), "--output", "gs://bucket/runs/1", "--dry-run", "--",
                   "python", "train.py")
    assert done.returncode == 0, done.stderr
    container = yaml.safe_load(done.stdout)["spec"]["pytorchReplicaSpecs"]["Master"]["template"][
        "spec"]["containers"][0]
    assert container["image"] == RUNTIME_IMAGE
    assert container["command"] == ["python", "-m", "kfdist.components.launch_program.pod_entry",
                                    "--program", "gs://bucket/runs/1/program", "--", "python",
                                    "train.py"]
