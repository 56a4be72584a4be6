"""kfdist's container images: their names, and compiled pipelines pointed at another registry.

Every image is `<registry>/kfdist-<name>:<tag>`; `containers/build.sh --registry R --tag T` builds
and pushes them under those names. A compiled pipeline names the runtime image in every step, and
the training step picks its replicas' default image (runtime or Horovod) when it runs: the step
reads the registry and tag from `KFDIST_IMAGE_REGISTRY` and `KFDIST_IMAGE_TAG`, which
`retarget_pipeline` sets on every step of a pipeline compiled with `--registry`.
"""

from __future__ import annotations

import contextlib
import os
import re
from typing import Callable, Iterator, List, Optional, Tuple

import yaml

from kfdist import DEFAULT_REGISTRY, __version__
from kfdist.components.common.errors import InvalidInputError, require
from kfdist.environ_block import variables_set
from kfdist.yaml_text import to_yaml_all

#: Every image containers/build.sh builds (a folder under containers/ each).
IMAGE_NAMES = ("runtime", "horovod", "beam-worker", "training-gpu")
REGISTRY_ENV = "KFDIST_IMAGE_REGISTRY"
TAG_ENV = "KFDIST_IMAGE_TAG"

# Docker's reference grammar: a lower-case host (with an optional port) and path components.
_REGISTRY = re.compile(r"[a-z0-9]([a-z0-9._-]*[a-z0-9])?(:[0-9]+)?(/[a-z0-9]([a-z0-9._-]*[a-z0-9])?)*")
_TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")


def check_registry(registry: str) -> str:
    """Returns `registry` without a trailing slash, or raises InvalidInputError naming it."""
    value = (registry or "").rstrip("/")
    require(bool(_REGISTRY.fullmatch(value)),
            f"registry {registry!r} is not a registry: lower-case host[:port][/namespace], "
            f"e.g. {DEFAULT_REGISTRY} or registry.example.com:5000/ml")
    return value


def check_tag(tag: str) -> str:
    """Returns `tag`, or raises InvalidInputError naming it."""
    require(bool(_TAG.fullmatch(tag or "")),
            f"tag {tag!r} is not an image tag: letters, digits, '_', '.' and '-', at most 128, "
            f"not starting with '.' or '-' (e.g. {__version__})")
    return tag


def image(name: str, registry: Optional[str] = None, tag: Optional[str] = None) -> str:
    """The reference of kfdist image `name`.

    Args:
      name: One of IMAGE_NAMES.
      registry: Registry and namespace; default `KFDIST_IMAGE_REGISTRY`, else DEFAULT_REGISTRY.
      tag: Image tag; default `KFDIST_IMAGE_TAG`, else kfdist's version.

    Returns:
      `<registry>/kfdist-<name>:<tag>`.
    """
    require(name in IMAGE_NAMES, f"image {name!r} is not a kfdist image; valid: {IMAGE_NAMES}")
    registry = check_registry(registry or os.environ.get(REGISTRY_ENV) or DEFAULT_REGISTRY)
    tag = check_tag(tag or os.environ.get(TAG_ENV) or __version__)
    return f"{registry}/kfdist-{name}:{tag}"


@contextlib.contextmanager
def images_from(registry: Optional[str], tag: Optional[str]) -> Iterator[None]:
    """Within the block, `image()` defaults to `registry` and `tag` (None: unchanged)."""
    with variables_set({REGISTRY_ENV: registry, TAG_ENV: tag}):
        yield


def kfdist_image_name(reference: str) -> Optional[str]:
    """Which of kfdist's images (`IMAGE_NAMES`) `reference` names, in any registry and with any
    tag or digest; None for another image."""
    repository = reference.split("@", 1)[0].rsplit("/", 1)[-1].split(":", 1)[0]
    name = repository[len("kfdist-"):] if repository.startswith("kfdist-") else None
    return name if name in IMAGE_NAMES else None


def _registry_and_tag(reference: str) -> Tuple[str, str]:
    """The registry and tag of kfdist image `reference` (kfdist's version when pinned by
    digest)."""
    registry, _, repository = reference.split("@", 1)[0].rpartition("/")
    tag = repository.split(":", 1)[1] if ":" in repository and "@" not in reference else __version__
    return registry or DEFAULT_REGISTRY, tag


def sibling_image(reference: str, name: str) -> str:
    """kfdist image `name` from the registry and tag of kfdist image `reference`."""
    return image(name, *_registry_and_tag(reference))


def build_command(reference: str) -> str:
    """The `containers/build.sh` command that builds kfdist image `reference`."""
    registry, tag = _registry_and_tag(reference)
    flags = ([f"--registry {registry}"] if registry != DEFAULT_REGISTRY else []) + (
        [f"--tag {tag}"] if tag != __version__ else [])
    return " ".join(["bash containers/build.sh", *flags, kfdist_image_name(reference) or ""])


def cpu_image_warning(gpus_per_worker: int, replica_image: str,
                      spell: Callable[[str, object], str]) -> Optional[str]:
    """What to tell a user who asks for GPUs for replicas of one of kfdist's CPU images.

    The runtime and Horovod images hold TensorFlow's CPU build, which does not use a GPU;
    `kfdist-training-gpu` (containers/training-gpu) is the one built for NVIDIA GPUs.

    Args:
      gpus_per_worker: The GPUs asked for per worker.
      replica_image: The image the replicas run.
      spell: How the command spells a setting and its value (`--gpus-per-worker 2`).

    Returns:
      One line, or None when no GPU is asked for or the image is not a CPU image of kfdist's.
    """
    name = kfdist_image_name(replica_image)
    if not gpus_per_worker or name not in ("runtime", "horovod"):
        return None
    gpu_image = sibling_image(replica_image, "training-gpu")
    advice = (f"pass {spell('image', gpu_image)} ({build_command(gpu_image)} builds it)"
              if name == "runtime" else
              f"{gpu_image} has no Horovod: build a Horovod image on it and pass "
              f"{spell('image', 'IMAGE')}")
    return (f"{spell('gpus_per_worker', gpus_per_worker)} with {replica_image}, kfdist's CPU "
            f"image: its TensorFlow leaves the GPUs unused; {advice}")


def is_kfdist_image(reference: str) -> bool:
    """Whether `reference` names one of kfdist's images, in any registry and with any tag."""
    return kfdist_image_name(reference) is not None


def default_images() -> List[str]:
    """The references a pipeline compiled without `--registry` names."""
    return [f"{DEFAULT_REGISTRY}/kfdist-{name}:{__version__}" for name in IMAGE_NAMES]


def retarget_pipeline(text: str, registry: str, tag: Optional[str] = None) -> str:
    """Points a compiled pipeline (KFP YAML) at the images of another registry and tag.

    Every kfdist image the YAML names becomes `<registry>/kfdist-<name>:<tag>`, and every step's
    container gets `KFDIST_IMAGE_REGISTRY`/`KFDIST_IMAGE_TAG`, so that the training step's
    default replica images come from there too. Images that are not kfdist's stay as they are.

    Args:
      text: The pipeline YAML `kfp.compiler` wrote (its leading comment block is kept).
      registry: Registry and namespace, e.g. `registry.example.com/ml`.
      tag: Tag of the images; default kfdist's version.

    Returns:
      The YAML, in the compiler's own layout.

    Raises:
      InvalidInputError: If `registry` or `tag` is not valid, or `text` is not a KFP pipeline.
    """
    registry, tag = check_registry(registry), check_tag(tag or __version__)
    for name, old in zip(IMAGE_NAMES, default_images()):
        text = text.replace(old, f"{registry}/kfdist-{name}:{tag}")
    lines = text.splitlines(keepends=True)
    header = "".join(line for line in lines[:_header_length(lines)])
    try:
        documents = list(yaml.safe_load_all(text))
    except yaml.YAMLError as err:
        raise InvalidInputError(f"the pipeline is not YAML ({err}); compile it with "
                                "`kfdist compile`") from None
    require(bool(documents) and isinstance(documents[0], dict)
            and "deploymentSpec" in documents[0],
            "the file is not a compiled KFP pipeline (no deploymentSpec); compile it with "
            "`kfdist compile`")
    for executor in documents[0]["deploymentSpec"].get("executors", {}).values():
        container = executor.get("container")
        if container is not None:
            env = [e for e in container.get("env", []) if e.get("name") not in (REGISTRY_ENV, TAG_ENV)]
            container["env"] = env + [{"name": REGISTRY_ENV, "value": registry},
                                      {"name": TAG_ENV, "value": tag}]
    return header + to_yaml_all(documents, sort_keys=True)


def _header_length(lines: List[str]) -> int:
    count = 0
    while count < len(lines) and lines[count].startswith("#"):
        count += 1
    return count
