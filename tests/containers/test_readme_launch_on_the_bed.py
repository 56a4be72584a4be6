"""The README's "one flag" walk-through, run as written: each `kfdist launch` command with
`--backend local`, then with each cluster backend of its framework on the test bed (the real
Training Operator and Trainer), changing that flag alone.

The commands ship `examples/` with `--program-dir`, keep every directory on `gs://` and `--stage`
them, so the same program writes its model to the same place whichever backend ran it. The
`gs://` store is a GCS emulator the bed's pods reach, its address given to every container by
the cluster (as a platform gives its pods their object store); the `--image` the PyTorch command
names is the bed's PyTorch image (the README's Dockerfile on kfdist's runtime image), tagged so.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys

import pytest

from cluster import node, pod_env_policy
from cluster.fixture import wait_for
from component.test_launch_examples import _saved_model_predicts
from fakes import gcs_emulator
from kfdist.components.common import storage
from kfdist.components.launch_program.program_cluster import CLUSTER_BACKENDS_OF

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), os.pardir, os.pardir))
SECTION = "### From your laptop to the cluster: one flag"


def readme_commands():
    """The `kfdist launch` commands of the section's first shell block, as argument lists."""
    with open(os.path.join(ROOT, "README.md")) as f:
        text = f.read()
    section = text[text.index(SECTION):]
    block = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    return [shlex.split(line) for line in block.replace("\\\n", " ").splitlines() if line.strip()]


def _option(command, name: str) -> str:
    return command[command.index(name) + 1]


def _with_backend(command, backend: str):
    changed = list(command)
    changed[changed.index("--backend") + 1] = backend
    return changed


def _check_model(framework: str, model_uri: str, local_dir) -> None:
    storage.copy_dir_from(model_uri, str(local_dir))
    if framework == "tensorflow":
        assert abs(_saved_model_predicts(local_dir, 1.0) - 5.0) < 0.5
        return
    import torch

    weights = torch.load(local_dir / "model.pt")
    assert abs(float(weights["weight"]) - 3) < 0.3 and abs(float(weights["bias"]) - 2) < 0.3


def test_the_readme_shows_one_command_per_framework_on_the_local_backend():
    commands = readme_commands()
    assert [_option(c, "--framework") for c in commands] == ["tensorflow", "pytorch"]
    for command in commands:
        assert command[:2] == ["kfdist", "launch"] and _option(command, "--backend") == "local"
        assert _option(command, "--output").startswith("gs://") and "--stage" in command


@pytest.fixture
def readme_image(node_bed, pytorch_image):
    """The image the README's PyTorch command names: the bed's PyTorch image, tagged so, in the
    node's containerd (as a registry would serve it)."""
    [command] = [c for c in readme_commands() if _option(c, "--framework") == "pytorch"]
    name = _option(command, "--image")
    subprocess.run(["podman", "tag", pytorch_image, name], check=True, capture_output=True)
    node.import_images(node_bed, [name])
    yield name
    subprocess.run(["podman", "untag", pytorch_image, name], capture_output=True)  # that name only


@pytest.fixture
def bed_gcs_emulator(node_bed, node_namespace, monkeypatch):
    """A GCS emulator the node's pods reach at the node's address, which the namespace's pods
    get as `STORAGE_EMULATOR_HOST` from the cluster (`pod_env_policy`), as a cluster gives its
    pods their object store without the job naming it; this process reaches it on 127.0.0.1."""
    port = gcs_emulator.free_port()
    endpoint = f"http://127.0.0.1:{port}"
    server, log = gcs_emulator.start_server("0.0.0.0", port)  # the node's bridge address too
    env = {"STORAGE_EMULATOR_HOST": f"http://{node_bed.layout.api_host}:{port}",
           "GOOGLE_CLOUD_PROJECT": gcs_emulator.PROJECT}
    try:
        gcs_emulator.wait_until_serving(server, endpoint, log)
        node_bed.kubectl_run("apply", "--server-side", "-f", "-", stdin=json.dumps(
            pod_env_policy.objects(node_namespace.name, env)))
        wait_for(lambda: _pod_env(node_namespace) == env, 30, "the policy to set the pods' env",
                 every=0.5)
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", endpoint)
        monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", gcs_emulator.PROJECT)
        yield gcs_emulator.GcsEmulator(endpoint=endpoint)
    finally:
        node_bed.kubectl_run("delete", *pod_env_policy.names(node_namespace.name), check=False)
        gcs_emulator.stop_server(server, log)


def _pod_env(ns) -> dict:
    """The env a pod created in `ns` gets (a server-side dry run: admission runs, nothing
    is stored)."""
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "env-probe"},
           "spec": {"containers": [{"name": "probe", "image": "probe:1"}]}}
    done = ns.kubectl("create", "--dry-run=server", "-o", "json", "-f", "-",
                      stdin=json.dumps(pod), check=False)
    if done.returncode != 0:
        return {}
    [container] = json.loads(done.stdout)["spec"]["containers"]
    return {e["name"]: e.get("value") for e in container.get("env", ())}


@pytest.mark.slow
@pytest.mark.parametrize("framework", ["tensorflow", "pytorch"])
def test_the_readme_command_runs_on_every_backend_changing_only_the_backend(
        framework, node_namespace, bed_gcs_emulator, kfdist_images, readme_image, tmp_path):
    command = next(c for c in readme_commands() if _option(c, "--framework") == framework)
    output = _option(command, "--output")
    bucket = storage.split_gcs(output)[0]
    if not bed_gcs_emulator.client().lookup_bucket(bucket):
        bed_gcs_emulator.create_bucket(bucket)
    for backend in ("local", *CLUSTER_BACKENDS_OF[framework]):
        storage.remove_tree(output)
        done = subprocess.run([sys.executable, "-m", "kfdist", *_with_backend(command, backend)[1:]],
                              capture_output=True, text=True, timeout=400, cwd=ROOT)
        assert done.returncode == 0, backend + done.stdout[-3000:] + done.stderr[-3000:]
        assert "job succeeded" in done.stderr, backend
        _check_model(framework, f"{output}/model", tmp_path / backend)
        script = next(a for a in command[command.index("--"):] if a.endswith(".py"))
        assert storage.exists(f"{output}/program/{script}"), backend  # shipped, as it ran
        if backend != "local":
            assert "kfdist: " + ("TrainJob" if backend == "trainjob" else
                                 {"tfjob": "TFJob", "pytorchjob": "PyTorchJob"}[backend]) \
                in done.stdout, done.stdout[-2000:]
