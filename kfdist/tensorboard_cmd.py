"""`kfdist tensorboard PATH`: TensorBoard on a run's training curves, while it trains or after.

PATH is anything holding a training step's `tensorboard/` directories: a `kfdist run` or
`kfdist train` output directory, a Model artifact, or a cluster job's work location (a directory
on a shared volume, or `gs://`, `s3://` or `minio://`). Every `tensorboard/` below PATH becomes
one TensorBoard run group, named by where it is. A remote location is mirrored into a local
directory every `--refresh` seconds with the client kfdist uses for all its data there
(google-cloud-storage, boto3), so curves keep growing as a cluster job trains. Ctrl-C stops
TensorBoard and the mirroring.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
from typing import Dict, List, Optional

from kfdist.components.common import model_artifact, storage
from kfdist.components.common.errors import InvalidInputError
from kfdist.stopping import end_process

DEFAULT_PORT = 6006
DEFAULT_REFRESH_SECONDS = 30.0
EVENT_FILE_MARK = "tfevents"


def add_tensorboard_parser(sub) -> None:
    p = sub.add_parser("tensorboard", help="serve a run's TensorBoard curves (as it trains, too)")
    p.add_argument("path", metavar="PATH",
                   help="a run's output directory, a Model artifact or a cluster job's work "
                        "location (a directory, or gs://, s3:// or minio://): every tensorboard/ "
                        "directory below it is shown")
    p.add_argument("--port", type=int, default=DEFAULT_PORT,
                   help="the port TensorBoard listens on (default: %(default)s)")
    p.add_argument("--host", default="127.0.0.1",
                   help="the address TensorBoard listens on (default: %(default)s; 0.0.0.0 "
                        "serves other machines)")
    p.add_argument("--refresh", type=float, default=DEFAULT_REFRESH_SECONDS, metavar="SECONDS",
                   help="remote PATH only: seconds between copies of new event files "
                        "(default: %(default)s)")
    p.set_defaults(func=_cmd_tensorboard)


def event_directories(paths: List[str]) -> Dict[str, str]:
    """{run group name: its `tensorboard/` directory} from every path below a root (file paths
    or URIs, `/`-separated after the root); the name is the directory's parent, relative."""
    found: Dict[str, str] = {}
    marker = "/" + model_artifact.TENSORBOARD_DIR + "/"
    for path in paths:
        if EVENT_FILE_MARK not in os.path.basename(path) or marker not in "/" + path:
            continue
        head = ("/" + path).rsplit(marker, 1)[0].lstrip("/")
        found[head or "."] = (head + "/" if head else "") + model_artifact.TENSORBOARD_DIR
    return found


def _relative_files(root: str) -> List[str]:
    if storage.is_remote(root):
        base = root.rstrip("/") + "/"
        return [uri[len(base):] for uri in storage.list_uris(base)]
    return [os.path.relpath(os.path.join(d, f), root)
            for d, _, files in os.walk(root) for f in files]


def _logdir_spec(local_root: str, groups: Dict[str, str]) -> str:
    return ",".join(f"{name}:{os.path.join(local_root, directory)}"
                    for name, directory in sorted(groups.items()))


class _Mirror:
    """Copies the event files below a remote location into a local directory, now and then."""

    def __init__(self, uri: str, groups: Dict[str, str], local: str, refresh: float):
        self.uri, self.groups, self.local, self.refresh = uri, groups, local, refresh
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="gcs-mirror", daemon=True)

    def copy(self) -> None:
        for directory in self.groups.values():
            storage.copy_dir_from(storage.join(self.uri, directory),
                                  os.path.join(self.local, directory))

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.wait(self.refresh):
            try:
                self.copy()
            except Exception as error:  # a failed copy is retried at the next refresh
                print(f"kfdist: copying new event files from {self.uri} failed: {error}",
                      file=sys.stderr)


def _cmd_tensorboard(args) -> int:
    path = args.path.rstrip("/") or "/"
    if args.refresh <= 0:
        raise InvalidInputError(f"--refresh {args.refresh}: expected seconds > 0")
    if not (0 < args.port < 65536):
        raise InvalidInputError(f"--port {args.port}: expected a port in 1-65535")
    if not storage.is_remote(path) and not os.path.isdir(path):
        raise InvalidInputError(f"PATH {args.path!r} is not a directory: give a run's output "
                                "directory, a Model artifact or a work location (dir, gs://, "
                                "s3:// or minio://)")
    groups = event_directories(_relative_files(path))
    if not groups:
        raise InvalidInputError(
            f"PATH {args.path!r} holds no TensorBoard event files (a training step writes them "
            f"under {model_artifact.TENSORBOARD_DIR}/ of its Model artifact after each epoch)")
    mirror: Optional[_Mirror] = None
    with tempfile.TemporaryDirectory(prefix="kfdist-tensorboard-") as cache:
        local_root = path
        if storage.is_remote(path):
            mirror = _Mirror(path, groups, cache, args.refresh)
            mirror.copy()
            mirror.start()
            local_root = cache
        print(f"TensorBoard on {len(groups)} run(s) of {args.path}: "
              + ", ".join(sorted(groups)), flush=True)
        print(f"TensorBoard at http://{args.host}:{args.port}/ (Ctrl-C stops it)", flush=True)
        board = subprocess.Popen([sys.executable, "-m", "tensorboard.main",
                                  "--logdir_spec", _logdir_spec(local_root, groups),
                                  "--host", args.host, "--port", str(args.port),
                                  "--reload_interval", "5"])
        try:
            return board.wait()
        finally:
            if mirror is not None:
                mirror.stop()
            end_process(board)
