"""`kfdist run --runner docker`: every step in the runtime image, through kfp.local's DockerRunner.

The steps run as they do on Kubeflow Pipelines: in the image the compiled pipeline names, as its
user (uid 1000), with only the run's directories visible. DockerRunner needs a Docker API: the
one `DOCKER_HOST` (or Docker's default socket) names, else a `podman system service` started for
the run and stopped after it. The run's directories are bind-mounted at their own paths, so the
paths kfp.local hands the steps are valid inside the containers. Every container is labelled
with the run, and whatever is still running when the run ends (Ctrl-C, SIGTERM, a failed step)
is removed.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
import time
import uuid
from typing import Iterable, Iterator, List, Optional, Sequence, Tuple

from kfdist import IMAGE_GID, IMAGE_UID, RUNTIME_IMAGE
from kfdist.components.common.errors import InvalidInputError
from kfdist.docker_api_relay import DockerApiRelay
from kfdist.stopping import end_process

#: Label of every container a run starts (its value: the run's id).
RUN_LABEL = "kfdist.run"
DOCKER_SOCKET = "/var/run/docker.sock"
SERVICE_START_SECONDS = 30
REMOVE_ATTEMPTS = 3


def _answers(host: str) -> bool:
    import docker

    try:
        client = docker.DockerClient(base_url=host, timeout=10)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except Exception:  # noqa: BLE001 - any failure means: not this endpoint
        return False


@contextlib.contextmanager
def docker_api() -> Iterator[Tuple[str, Optional[str]]]:
    """The Docker API to run the steps with, for the duration of the block.

    `DOCKER_HOST` when set (it must answer), else Docker's socket when it answers, else a
    Podman service on a private socket, which ends with the block (and by itself after 60 s
    without a client, should this process be killed), reached through `DockerApiRelay`.

    Yields:
      (the API's address, the podman binary when it is a Podman service kfdist started: the
      service is one of this command's processes, which Ctrl-C stops with the rest).

    Raises:
      InvalidInputError: If there is no Docker API and no podman to serve one.
    """
    configured = os.environ.get("DOCKER_HOST")
    if configured:
        if not _answers(configured):
            raise InvalidInputError(f"DOCKER_HOST={configured!r} does not answer as a Docker "
                                    "API; start the engine, or unset DOCKER_HOST to use podman")
        yield configured, None
        return
    if os.path.exists(DOCKER_SOCKET) and _answers(f"unix://{DOCKER_SOCKET}"):
        yield f"unix://{DOCKER_SOCKET}", None
        return
    podman = shutil.which("podman")
    if not podman:
        raise InvalidInputError("--runner docker needs Docker or Podman: no Docker API answers "
                                "and podman is not installed (Debian: apt-get install podman)")
    folder = tempfile.mkdtemp(prefix="kfdist-podman-")
    engine_socket = os.path.join(folder, "podman.sock")
    host = f"unix://{engine_socket}"
    # Its own session: a Ctrl-C at the terminal reaches kfdist, which still needs the service
    # to remove the run's containers, and ends it afterwards.
    service = subprocess.Popen([podman, "system", "service", "--time=60", host],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               start_new_session=True)
    try:
        deadline = time.monotonic() + SERVICE_START_SECONDS
        while not _answers(host):
            if service.poll() is not None or time.monotonic() > deadline:
                raise InvalidInputError(f"`podman system service` did not start (exit "
                                        f"{service.poll()}); run `podman info` to see why")
            time.sleep(0.2)
        relay = DockerApiRelay(engine_socket, os.path.join(folder, "docker.sock"))
        try:
            yield relay.url, podman
        finally:
            relay.close()
    finally:
        end_process(service)
        shutil.rmtree(folder, ignore_errors=True)


def check_image(host: str, image: str = RUNTIME_IMAGE) -> None:
    """Pulls `image` unless the engine has it; says how to build it when neither works."""
    import docker

    from kfdist.images import build_command

    client = docker.DockerClient(base_url=host, timeout=600)
    try:
        try:
            client.images.get(image)
            return
        except docker.errors.ImageNotFound:
            pass
        try:
            client.images.pull(image)
        except docker.errors.APIError as err:
            raise InvalidInputError(
                f"image {image} is neither on this machine nor pullable ({err.explanation}); "
                f"build it: {build_command(image)}") from None
    finally:
        client.close()


def user_for(writable: Iterable[str]) -> str:
    """The steps' user: the image's (uid 1000), which gets the run's writable directories when
    this process is root; else this process's own, as DockerRunner users run it."""
    if os.geteuid() == 0:
        for top in writable:
            for folder, _, files in os.walk(top):
                os.chown(folder, IMAGE_UID, IMAGE_GID)
                for name in files:
                    os.chown(os.path.join(folder, name), IMAGE_UID, IMAGE_GID)
        return f"{IMAGE_UID}:{IMAGE_GID}"
    return f"{os.geteuid()}:{os.getegid()}"


def mounts(writable: Iterable[str], readable: Iterable[str]) -> List["object"]:
    """Bind mounts of each directory at its own path (read-only for `readable`), nested ones
    dropped."""
    from docker.types import Mount

    result, seen = [], []
    for path, read_only in sorted([(os.path.realpath(p), False) for p in writable]
                                  + [(os.path.realpath(p), True) for p in readable]):
        if any(path == s or path.startswith(s.rstrip("/") + "/") for s in seen):
            continue
        seen.append(path)
        result.append(Mount(target=path, source=path, type="bind", read_only=read_only))
    return result


@contextlib.contextmanager
def docker_runner(writable: List[str], readable: List[str],
                  images: Sequence[str] = (RUNTIME_IMAGE,)) -> Iterator[object]:
    """A `kfp.local.DockerRunner` whose steps see `writable` and `readable` at their paths.

    Args:
      writable: Directories the steps write (the pipeline root, the export base); created.
      readable: Directories or files the steps only read (a local source).
      images: The images the steps run in: pulled first unless the engine has them.

    Yields:
      The runner, with `DOCKER_HOST` set for kfp.local for the duration of the block.
    """
    try:
        import docker  # noqa: F401
    except ImportError:
        raise InvalidInputError("--runner docker needs the Docker client library: "
                                "pip install 'kfdist[docker]'") from None
    from kfp import local

    for folder in writable:
        os.makedirs(folder, exist_ok=True)
    run_id = uuid.uuid4().hex[:12]
    with docker_api() as (host, podman):
        for image in images:
            check_image(host, image)
        user = user_for(writable)
        runner = local.DockerRunner(
            mounts=mounts(writable, [p for p in readable if os.path.exists(p)]),
            user=user, network_mode="host", labels={RUN_LABEL: run_id},
            environment={"HOME": "/tmp"} if user != f"{IMAGE_UID}:{IMAGE_GID}" else {})
        saved = os.environ.get("DOCKER_HOST")
        os.environ["DOCKER_HOST"] = host
        try:
            yield runner
        finally:
            _remove_containers(host, podman, run_id)
            if saved is None:
                os.environ.pop("DOCKER_HOST", None)
            else:
                os.environ["DOCKER_HOST"] = saved


def _remove_containers(host: str, podman: Optional[str], run_id: str) -> None:
    """Removes the run's containers: with podman itself where kfdist started its service (which
    a Ctrl-C may have stopped already), else through the Docker API. Podman's removal is
    repeated while any is left: the relay may be removing a container that has just exited
    (its status was read) at the same moment, and Podman then keeps it."""
    label = f"{RUN_LABEL}={run_id}"
    if podman:
        for _ in range(REMOVE_ATTEMPTS):
            listed = subprocess.run([podman, "ps", "--all", "--quiet", "--filter",
                                     f"label={label}"], capture_output=True, text=True,
                                    timeout=120).stdout.split()
            if not listed:
                return
            subprocess.run([podman, "rm", "--force", "--time", "5", *listed],
                           capture_output=True, timeout=300)
        return
    import docker

    client = docker.DockerClient(base_url=host, timeout=60)
    try:
        for container in client.containers.list(all=True,
                                                filters={"label": label}):
            with contextlib.suppress(docker.errors.NotFound):
                container.remove(force=True)
    finally:
        client.close()
