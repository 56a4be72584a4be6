"""Runs the launcher as a KFP step would, in its own process: `python -m fakes.kube_server.launch_cli URL NAME`.

Used to test what only a real process shows: SIGTERM handling (exit status
143, job deleted) and a launcher killed outright (SIGKILL) whose retry re-attaches.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

import kubernetes

from kfdist.components.train_distributed.kubernetes.client.kube_api import KubeApi, OwnerRef
from kfdist.components.train_distributed.kubernetes.lifecycle.launcher import cancel_on_sigterm, launch_and_wait
from fakes.kube_server.sample_jobs import sample_tfjob, sample_trainjob


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("server_url")
    parser.add_argument("job_name")
    parser.add_argument("--owner-uid", default=None)
    parser.add_argument("--timeout", type=float, default=None)
    parser.add_argument("--trainjob-namespace", default=None,
                        help="launch `sample_trainjob` in this namespace instead of a TFJob")
    args = parser.parse_args(argv)
    configuration = kubernetes.client.Configuration()
    configuration.host = args.server_url
    api = KubeApi(kubernetes.client.ApiClient(configuration))
    job = (sample_trainjob(args.job_name, args.trainjob_namespace, SLEEP_0=3)
           if args.trainjob_namespace else sample_tfjob(args.job_name))
    owner = OwnerRef(job.namespace, "step-pod-1", args.owner_uid) if args.owner_uid else None
    with cancel_on_sigterm():
        print("launcher: started", flush=True)
        outcome = launch_and_wait(job, api, timeout_seconds=args.timeout,
                                  log=lambda line: print(line, flush=True), owner=owner)
    print(f"launcher: outcome {outcome.reason} adopted={outcome.adopted}", flush=True)
    return 0


_TESTS_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def start(server_url: str, job_name: str, *args: str) -> subprocess.Popen:
    """Starts this program as a process (output piped, line by line)."""
    env = dict(os.environ, PYTHONPATH=_TESTS_DIR + os.pathsep + os.environ.get("PYTHONPATH", ""))
    command = [sys.executable, "-u", "-m", "fakes.kube_server.launch_cli", server_url, job_name,
               *args]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=env)


def wait_for_line(process: subprocess.Popen, fragment: str, timeout: float = 10.0) -> None:
    """Reads the process's output until a line holds `fragment`; kills it and fails otherwise."""
    deadline = time.monotonic() + timeout
    seen = []
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        seen.append(line)
        if fragment in line:
            return
    process.kill()
    raise AssertionError(f"launcher never printed {fragment!r}; it printed:\n{''.join(seen)}")


if __name__ == "__main__":
    sys.exit(main())
