"""The training step in a pod, as a pipeline runs it, on the genuine node: kfdist's runtime image
under the pipeline runner's ServiceAccount (manifests/base), its own pod's name and uid from the
Downward API (the variables the pipeline sets), no kubeconfig and no namespace flag. It creates
the TFJob through the in-cluster configuration, streams the chief's log into its own, and when
the step's pod goes, the real garbage collector takes the job and its replicas along.
"""

from __future__ import annotations

import json
import re

import pytest

from cluster import node
from cluster.fixture import wait_for
from cluster.namespaces import RUNNER
from kfdist.components.train_distributed.kubernetes.client.pod_identity import STEP_POD_FIELDS

pytestmark = pytest.mark.slow
CLAIM, MOUNT = "team-work", "/mnt/kfdist"
#: The program of `kfdist launch`: says it is up, then trains forever.
FOREVER = "import time\nprint('up', flush=True)\ntime.sleep(600)\n"


def _step_pod(image: str) -> dict:
    """The step's pod: `kfdist launch` of the program on the claim, as a TFJob of 2 workers."""
    command = ["kfdist", "launch", "--framework", "tensorflow", "--workers", "2", "--backend",
               "tfjob", "--name", "owned", "--pvc-name", CLAIM, "--pvc-mount-path", MOUNT,
               "--output", f"{MOUNT}/owned", "--program-dir", f"{MOUNT}/program",
               "--timeout", "500", "--", "python", "forever.py"]
    env = [{"name": variable, "valueFrom": {"fieldRef": {"fieldPath": field}}}
           for variable, field in STEP_POD_FIELDS]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "step"}, "spec": {
        "restartPolicy": "Never", "serviceAccountName": RUNNER,
        "containers": [{"name": "main", "image": image, "imagePullPolicy": "Never",
                        "command": command, "env": env,
                        "volumeMounts": [{"name": "work", "mountPath": MOUNT}]}],
        "volumes": [{"name": "work", "persistentVolumeClaim": {"claimName": CLAIM}}]}}


def _replicas(ns) -> list:
    return [p for p in ns.get("pod") if p["metadata"]["name"].startswith("owned-")]


def test_the_step_in_a_pod_creates_its_tfjob_in_cluster_and_the_job_goes_with_the_pod(
        node_bed, node_namespace, kfdist_images):
    ns = node_namespace
    program = ns.claim_path(CLAIM) / "program"
    program.mkdir()
    (program / "forever.py").write_text(FOREVER)
    ns.kubectl("create", "-f", "-", stdin=json.dumps(_step_pod(kfdist_images["runtime"])))

    def streamed():
        """The step's log once it carries the chief's `up` (streamed through pods/log) and both
        replicas run."""
        log = ns.kubectl("logs", "step", check=False).stdout
        running = [p["status"].get("phase") for p in _replicas(ns)] == ["Running"] * 2
        return log if running and re.search(r"^\[worker-0\] up$", log, re.M) else None

    try:
        log = wait_for(streamed, seconds=300, what="the chief's 'up' in the step's log")
    except AssertionError as timed_out:
        raise AssertionError(f"{timed_out}:\n{ns.kubectl('logs', 'step', check=False).stdout}"
                             f"\n{ns.kubectl('get', 'pods', '-o', 'wide').stdout}") from None
    step = ns.get("pod", "step")
    [job] = ns.get("tfjob")
    assert [(o["kind"], o["name"], o["uid"]) for o in job["metadata"]["ownerReferences"]] == [
        ("Pod", "step", step["metadata"]["uid"])], log
    [created] = [e for e in ns.api_calls() if e["verb"] == "create"
                 and e["objectRef"].get("resource") == "tfjobs"]
    assert created["sourceIPs"] == [step["status"]["podIP"]], created["sourceIPs"]

    # The step ends without a word (its container SIGKILLed): nothing of kfdist deletes the job.
    [status] = step["status"]["containerStatuses"]
    node.kill_container(node_bed, status["containerID"])
    wait_for(lambda: ns.get("pod", "step")["status"].get("phase") == "Failed", seconds=60,
             what="the step's pod to fail")
    assert [j["metadata"]["uid"] for j in ns.get("tfjob")] == [job["metadata"]["uid"]]

    ns.kubectl("delete", "pod", "step", "--wait=false")
    wait_for(lambda: not ns.get("tfjob"), seconds=120, what="the TFJob to be collected")
    wait_for(lambda: not _replicas(ns), seconds=120, what="the replicas to go")
