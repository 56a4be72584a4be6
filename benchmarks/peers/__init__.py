"""The peers kfdist is measured against: TFX's component libraries, in their own environment.

`peer_python()` makes (once, and again when `requirements.txt` changes) a virtual environment
at the repository's root, `.venv-peers`, holding the pinned peer libraries, and returns its
interpreter. The peer
programs (`tfx_*.py`) run there, never in kfdist's environment. `run_tree()` runs any program
and samples the summed memory of its whole process tree (Beam's worker processes included), the
same way for kfdist's contenders and the peer's.
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


def _tree_rss(root) -> int:
    import psutil

    total = 0
    try:
        for process in [root, *root.children(recursive=True)]:
            try:
                total += process.memory_info().rss
            except psutil.Error:
                pass
    except psutil.Error:
        pass
    return total


def run_tree(argv: List[str], env: Optional[Dict[str, str]] = None,
             timeout: float = 7200) -> Dict[str, object]:
    """Runs `argv`; returns the JSON object its last stdout line holds, with `wall_seconds` and
    `peak_tree_rss_mb` (the largest sum of RSS over its process tree, sampled every 0.2 s).

    Raises:
      RuntimeError: If it fails or prints no JSON.
    """
    import psutil

    started = time.perf_counter()
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env=env)
    root = psutil.Process(process.pid)
    peak = [0]
    done = threading.Event()

    def sample():
        while not done.wait(SAMPLE_SECONDS):
            peak[0] = max(peak[0], _tree_rss(root))

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
    result["peak_tree_rss_mb"] = round(peak[0] / 2 ** 20)
    return result
