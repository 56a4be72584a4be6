"""How `kfdist run`'s steps run: the pipeline kfp.local runs and the runner it runs it with.

`subprocess`: each step a process of this Python (kfp.local's SubprocessRunner);
`docker`: each step in its image, as Kubeflow Pipelines runs it (`docker_run`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from typing import Tuple

from kfdist.environ_block import variables_set

PIPELINE_ROOT_DIR = "pipeline_root"
#: How the steps run: as processes of this Python, or in their image (kfp.local's runners).
RUNNERS = ("subprocess", "docker")


def engine_errors() -> tuple:
    """What the Docker client raises when the engine fails a call (kfp.local lets it through);
    none without the client, which `docker_run` then asks for."""
    try:
        import docker
        import requests
    except ImportError:
        return ()
    return docker.errors.DockerException, requests.exceptions.RequestException


def pipeline_to_run(opts):
    """The pipeline kfp.local runs for `opts` (`local_run.RunOptions`): the shipped one, or
    with `opts.images` the one `kfdist compile --registry R --tag T` writes (every step in
    `R/kfdist-runtime:T`, carrying R and T to the training step's replica images)."""
    from kfdist.pipelines import registry

    if opts.images is None:
        return registry.get_pipeline(opts.pipeline)
    from kfp import components

    with tempfile.TemporaryDirectory(prefix="kfdist-run-") as folder:
        return components.load_component_from_file(
            registry.compile_pipeline(opts.pipeline, folder, images=opts.images))


def step_images(pipeline) -> Tuple[str, ...]:
    """The images `pipeline`'s steps run in (what `--runner docker` starts), sorted."""
    from google.protobuf import json_format

    executors = json_format.MessageToDict(pipeline.pipeline_spec.deployment_spec)["executors"]
    return tuple(sorted({e["container"]["image"] for e in executors.values()
                         if "container" in e}))


@contextlib.contextmanager
def steps_temp_dir():
    """Gives the steps started in this block a TMPDIR of their own, removed after the block with
    whatever they left there: kfp.local's lightweight steps each write their code to a `mktemp
    -d` directory and never remove it, and a stopped step leaves its scratch. The port locks of
    local jobs stay machine-wide (`ports.LOCK_DIR_ENV`)."""
    from kfdist.components.train_distributed.local import ports

    folder = tempfile.mkdtemp(prefix="kfdist-steps-")
    try:
        with variables_set({ports.LOCK_DIR_ENV: ports.port_lock_dir(), "TMPDIR": folder}):
            yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def step_runner(opts, output_dir: str, source_uri: str, export_base: str, pipeline):
    """The kfp.local runner of `opts.runner` (`opts`: `local_run.RunOptions`): a subprocess one
    gives the steps a temporary directory of the run's own (`steps_temp_dir`); a docker one sees
    the run's directories and has the images of `pipeline`'s steps."""
    from kfp import local

    from kfdist.components.common import storage

    if opts.runner != "docker":
        with steps_temp_dir():
            yield local.SubprocessRunner(use_venv=False)
        return
    from kfdist import docker_run

    # The pipeline root exists before the image's user is given the run's directories.
    writable = [output_dir, os.path.join(output_dir, PIPELINE_ROOT_DIR)] + (
        [export_base] if not storage.is_remote(export_base) else [])
    readable = [source_uri] if not storage.is_remote(source_uri) else []
    with docker_run.docker_runner(writable, readable, step_images(pipeline)) as runner:
        yield runner
