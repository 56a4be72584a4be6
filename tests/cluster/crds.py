"""CustomResourceDefinitions on a test bed: installed from their files, and served before use."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Iterable, List

import yaml

from cluster import processes

#: How long the API server may take to serve a new CRD.
ESTABLISHED_TIMEOUT_S = 60.0


def install(bed, files: Iterable[Path]) -> List[str]:
    """Applies the CRDs in `files` (server-side) and waits until the API server serves each;
    returns their names."""
    files = list(files)
    bed.kubectl_run("apply", "--server-side", *[f"--filename={f}" for f in files])
    names = [yaml.safe_load(Path(f).read_text())["metadata"]["name"] for f in files]
    wait_established(bed, names)
    return names


def wait_established(bed, names: Iterable[str]) -> None:
    """Waits until every CRD of `names` is Established. (`kubectl wait` fails instead when it
    reads a CRD before the API server has given it any condition, just after it was created.)"""
    waiting = [f"crd/{name}" for name in names]
    deadline = time.monotonic() + ESTABLISHED_TIMEOUT_S
    while waiting:
        read = json.loads(bed.kubectl_run("get", *waiting, "--output=json").stdout)
        listed = read.get("items", [read])  # one name gives the object, several a List
        waiting = [f"crd/{crd['metadata']['name']}" for crd in listed if not any(
            c["type"] == "Established" and c["status"] == "True"
            for c in crd.get("status", {}).get("conditions") or [])]
        if waiting and time.monotonic() > deadline:
            raise processes.StartFailed(f"not served within {ESTABLISHED_TIMEOUT_S:g} s: "
                                        f"{', '.join(waiting)}")
        if waiting:
            time.sleep(0.2)
