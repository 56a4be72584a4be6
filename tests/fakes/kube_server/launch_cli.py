"""Runs the launcher as a KFP step would, in its own process: `python -m fakes.kube_server.launch_cli URL NAME`.

Used to test what only a real process shows: SIGTERM handling (exit status
143, job deleted) and a launcher killed outright (SIGKILL) whose retry re-attaches.
"""

from __future__ import annotations

import argparse
import sys

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


if __name__ == "__main__":
    sys.exit(main())
