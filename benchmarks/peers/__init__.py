"""The peers kfdist is measured against: TFX's component libraries, in their own environment.

`peer_python()` makes (once, and again when `requirements.txt` changes) a virtual environment
at the repository's root, `.venv-peers`, holding the pinned peer libraries, and returns its
interpreter. The peer
programs (`tfx_*.py`) run there, never in kfdist's environment. `run_tree()` runs any program
and samples the memory of its whole process tree (Beam's worker processes included), the same
way for kfdist's contenders and the peer's: the proportional set size (PSS, from
`/proc/PID/smaps_rollup`), which counts a page that several processes share (TensorFlow's
libraries in every Beam worker) once in all, split between them, where summed RSS would count it
once per process.

A program run by `run_tree` may print `pipeline_done_unix` (its `time.time()` when its pipeline
ends, before any check of its outputs): its `pipeline_seconds` are then the time from its start
to that moment, so a contender's checks stay outside the clock the comparison uses.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import threading
import time
from typing import Callable, Dict, List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
REQUIREMENTS = os.path.join(HERE, "requirements.txt")
#: The peer environment, beside kfdist's `.venv` (ignored by git).
VENV = os.path.join(os.path.dirname(os.path.dirname(HERE)), ".venv-peers")
#: How often `run_tree` samples memory.
SAMPLE_SECONDS = 0.2


def _stamp() -> str:
    with open(REQUIREMENTS, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def peer_python(log: Callable[[str], None]) -> str:
    """The peer environment's interpreter, installing the pinned peer libraries first when the
    environment is missing or was made from other requirements."""
    python = os.path.join(VENV, "bin", "python")
    stamp_file = os.path.join(VENV, "requirements.sha256")
    if os.path.exists(stamp_file) and open(stamp_file).read() == _stamp():
        return python
    log(f"peers: installing TFX's libraries into {VENV} (a few minutes, once)")
    started = time.monotonic()
    subprocess.run([sys.executable, "-m", "venv", "--clear", VENV], check=True)
    subprocess.run([python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                    "-r", REQUIREMENTS], check=True)
    with open(stamp_file, "w") as f:
        f.write(_stamp())
    log(f"peers: installed in {time.monotonic() - started:.0f} s")
    return python


def peer_env() -> Dict[str, str]:
    """The environment of a peer program: its directory on the path of Beam's worker processes
    too (they unpickle the program's functions by module name), TensorFlow's logs quiet."""
    return dict(os.environ, PYTHONPATH=HERE, TF_CPP_MIN_LOG_LEVEL="2", TF_USE_LEGACY_KERAS="1",
                PYTHONUNBUFFERED="1")


def parse_pss_kib(smaps_rollup: str) -> int:
    """The `Pss:` figure (KiB) of a `/proc/PID/smaps_rollup` text.

    Raises:
      ValueError: If the text has no `Pss:` line.
    """
    for line in smaps_rollup.splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1])
    raise ValueError("no Pss: line in the smaps_rollup text")


def process_pss_bytes(pid: int) -> int:
    """The proportional set size of process `pid`, in bytes.

    Raises:
      OSError: If the process is gone or its `smaps_rollup` cannot be read.
    """
    with open(f"/proc/{pid}/smaps_rollup") as f:
        return parse_pss_kib(f.read()) * 1024


def tree_pss_bytes(root) -> int:
    """The summed PSS of the `psutil.Process` `root` and all its descendants (a process that
    ends while it is read counts nothing)."""
    import psutil

    try:
        processes = [root, *root.children(recursive=True)]
    except psutil.Error:
        return 0
    total = 0
    for process in processes:
        try:
            total += process_pss_bytes(process.pid)
        except (OSError, ValueError):
            pass
    return total


def run_tree(argv: List[str], env: Optional[Dict[str, str]] = None,
             timeout: float = 6 * 3600) -> Dict[str, object]:
    """Runs `argv`; returns the JSON object its last stdout line holds, with `wall_seconds`,
    `pipeline_seconds` (see the module's docstring; the wall time when it prints no
    `pipeline_done_unix`) and `peak_tree_pss_mb` (the largest summed PSS over its process tree,
    sampled every 0.2 s). `timeout` is generous: TFX's pipeline on 1,000,000 rows runs about an
    hour on 2 cores.

    Raises:
      RuntimeError: If it fails or prints no JSON.
    """
    import psutil

    started, started_unix = time.perf_counter(), time.time()
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env=env)
    root = psutil.Process(process.pid)
    peak = [0]
    done = threading.Event()

    def sample():
        while not done.wait(SAMPLE_SECONDS):
            peak[0] = max(peak[0], tree_pss_bytes(root))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        out, err = process.communicate(timeout=timeout)
    finally:
        done.set()
        sampler.join()
        if process.poll() is None:
            process.kill()
    lines = [line for line in out.splitlines() if line.startswith("{")]
    if process.returncode != 0 or not lines:
        raise RuntimeError(f"{argv[:3]} failed ({process.returncode}):\n{err[-3000:]}")
    result = json.loads(lines[-1])
    result["wall_seconds"] = round(time.perf_counter() - started, 2)
    done_unix = result.pop("pipeline_done_unix", None)
    result["pipeline_seconds"] = (round(done_unix - started_unix, 2) if done_unix is not None
                                  else result["wall_seconds"])
    result["peak_tree_pss_mb"] = round(peak[0] / 2 ** 20)
    return result
