"""The images' size budget: what every fresh node pulls before a pipeline step or replica starts.

The budgets (docs/guide/images.md, "Publish the images"): the runtime image at most 3.8 GB in
at most 10 layers, and the Horovod image at most 0.3 GB and 6 layers more, on top of every layer
of the runtime image, so a node that has pulled one pulls only the difference for the other.
"""

from __future__ import annotations

import json
import subprocess

GB = 10**9
BUDGETS = {"runtime": (3.8 * GB, 10)}
HOROVOD_EXTRA = (0.3 * GB, 6)


def _inspect(podman: str, ref: str) -> dict:
    result = subprocess.run([podman, "image", "inspect", ref], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)[0]


def test_images_stay_within_their_budget(kfdist_images, podman):
    runtime = _inspect(podman, kfdist_images["runtime"])
    horovod = _inspect(podman, kfdist_images["horovod"])
    size, layers = BUDGETS["runtime"]
    assert runtime["Size"] <= size and len(runtime["RootFS"]["Layers"]) <= layers, (
        runtime["Size"], len(runtime["RootFS"]["Layers"]))
    base_layers = runtime["RootFS"]["Layers"]
    assert horovod["RootFS"]["Layers"][:len(base_layers)] == base_layers, (
        "the Horovod image does not reuse every layer of the runtime image")
    extra_size, extra_layers = HOROVOD_EXTRA
    assert horovod["Size"] - runtime["Size"] <= extra_size
    assert len(horovod["RootFS"]["Layers"]) - len(base_layers) <= extra_layers
