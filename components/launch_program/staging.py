"""Local directories for a program that only reads and writes local paths (`kfdist launch --stage`).

Runs in every replica, inside `pod_entry`, the way a managed training service stages a job's
channels. Before the program starts, each remote (`gs://`, `s3://`, `minio://`) KFDIST_*
location becomes a directory of the replica's scratch space:

- `KFDIST_DATA_DIR`: downloaded whole (every replica has its own copy);
- `KFDIST_CHECKPOINT_DIR`: what the location holds is downloaded (so a restarted replica resumes
  from it); the leader's directory is then mirrored back every `sync_seconds` and once more when
  the program ends, however it ends (files named `checkpoint`, the index a restore reads first,
  are uploaded after the files they name; files the program deleted are deleted there too);
- `KFDIST_MODEL_DIR`: an empty directory the leader's is uploaded from once the program
  succeeded (a failed run uploads no model).

The program is then this process's child: SIGTERM and SIGINT are passed on to it, it is killed
when this process is, and its exit status (128 + N when signal N ended it, as a shell reports
it) is this process's, so each operator's restart policy reads it as before.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from typing import Dict, List, Optional, Tuple

from kfdist import program as program_env
from kfdist.components.common import parent_death, storage
from kfdist.components.common.errors import KfdistError
from kfdist.components.launch_program import operator_env

#: Files named so are written last by a checkpoint's writer and read first by its reader.
INDEX_FILE = "checkpoint"
#: How often the leader's checkpoints are uploaded while the program runs, by default.
DEFAULT_SYNC_SECONDS = 30.0
#: Exit status when an upload after the program failed.
UPLOAD_FAILED = 1
#: Exit status when the directories could not be staged (the program did not start).
CANNOT_STAGE = 2


def _say(message: str) -> None:
    print(f"kfdist-program: {message}", flush=True)


def _local_files(root: str) -> Dict[str, Tuple[int, int]]:
    """`relative path -> (size, mtime_ns)` of every file below `root`."""
    found = {}
    for parent, _, names in os.walk(root):
        for name in names:
            path = os.path.join(parent, name)
            try:
                status = os.stat(path)
            except FileNotFoundError:  # renamed away while listed (a checkpoint's temp file)
                continue
            found[os.path.relpath(path, root).replace(os.sep, "/")] = (status.st_size,
                                                                       status.st_mtime_ns)
    return found


class DirectoryMirror:
    """Makes a remote prefix hold what a local directory holds, uploading only what changed."""

    def __init__(self, local_dir: str, uri: str):
        self.local_dir = local_dir
        self.uri = uri.rstrip("/")
        self._lock = threading.Lock()
        self._sent: Dict[str, Tuple[int, int]] = {}

    def download(self) -> int:
        """Copies what the prefix holds into the local directory; returns how many files."""
        os.makedirs(self.local_dir, exist_ok=True)
        base = self.uri + "/"
        names = [u[len(base):] for u in storage.list_uris(base)]
        for name in names:
            storage.download(base + name, os.path.join(self.local_dir, name))
        self._sent = {n: s for n, s in _local_files(self.local_dir).items() if n in names}
        return len(names)

    def sync(self) -> int:
        """Uploads the files that changed since the last sync and deletes the ones that are
        gone; returns how many objects it wrote or deleted."""
        with self._lock:
            now = _local_files(self.local_dir)
            changed = [n for n, s in now.items() if self._sent.get(n) != s]
            changed.sort(key=lambda n: (n.rsplit("/", 1)[-1] == INDEX_FILE, n))
            written = 0
            for name in changed:
                try:
                    storage.upload_file(os.path.join(self.local_dir, name), f"{self.uri}/{name}")
                except FileNotFoundError:
                    now.pop(name)
                    continue
                self._sent[name] = now[name]
                written += 1
            gone = [n for n in self._sent if n not in now]
            for name in gone:
                storage.delete(f"{self.uri}/{name}")
                del self._sent[name]
            return written + len(gone)


class _Syncer(threading.Thread):
    """Calls `mirror.sync()` every `seconds` until stopped."""

    def __init__(self, mirror: DirectoryMirror, seconds: float):
        super().__init__(name="kfdist-checkpoint-sync", daemon=True)
        self.mirror, self.seconds = mirror, seconds
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(self.seconds):
            try:
                self.mirror.sync()
            except Exception as err:  # noqa: BLE001  (retried at the next tick and at the end)
                _say(f"checkpoint upload to {self.mirror.uri} failed, retried later: {err}")


class StagedDirectories:
    """The KFDIST_* locations of one replica, local while its program runs."""

    def __init__(self, env: Dict[str, str], scratch: str):
        self.leader = program_env.is_leader(env)
        self.checkpoints: Optional[DirectoryMirror] = None
        self.model: Optional[Tuple[str, str]] = None
        data = env.get(operator_env.DATA_DIR_ENV)
        if data and storage.is_remote(data):
            local = os.path.join(scratch, "data")
            storage.copy_dir_from(data, local)
            _say(f"downloaded {data} to {local}")
            env[operator_env.DATA_DIR_ENV] = local
        checkpoints = env.get(operator_env.CHECKPOINT_DIR_ENV)
        if checkpoints and storage.is_remote(checkpoints):
            self.checkpoints = DirectoryMirror(os.path.join(scratch, "checkpoints"), checkpoints)
            count = self.checkpoints.download()
            _say(f"checkpoints: {count} file(s) from {checkpoints}")
            env[operator_env.CHECKPOINT_DIR_ENV] = self.checkpoints.local_dir
        model = env.get(operator_env.MODEL_DIR_ENV)
        if model and storage.is_remote(model):
            local = os.path.join(scratch, "model")
            os.makedirs(local, exist_ok=True)
            self.model = (local, model)
            env[operator_env.MODEL_DIR_ENV] = local

    def finish(self, status: int) -> int:
        """The leader's last checkpoint sync and, after a success, its model's upload; returns
        the replica's exit status (UPLOAD_FAILED when an upload failed)."""
        if not self.leader:
            return status
        try:
            if self.checkpoints is not None:
                count = self.checkpoints.sync()
                _say(f"checkpoints: {count} change(s) uploaded to {self.checkpoints.uri}")
            if status == 0 and self.model is not None:
                local, uri = self.model
                storage.upload_dir(local, uri)
                _say(f"uploaded the model ({len(_local_files(local))} file(s)) to {uri}")
        except Exception as err:  # noqa: BLE001  (any storage failure fails the replica)
            _say(f"upload failed: {type(err).__name__}: {err}")
            return UPLOAD_FAILED
        return status


def run_staged(argv: List[str], env: Dict[str, str], scratch: str, sync_seconds: float) -> int:
    """Runs the program with staged directories; returns the replica's exit status.

    Args:
      argv: The program (its executable resolved) and its arguments.
      env: The replica's environment; its remote KFDIST_* locations are replaced here.
      scratch: This replica's own directory.
      sync_seconds: How often the leader's checkpoints are uploaded while the program runs.
    """
    try:
        staged = StagedDirectories(env, scratch)
    except KfdistError as err:
        _say(f"cannot stage the job's directories: {err}")
        return CANNOT_STAGE
    child = subprocess.Popen(parent_death.with_parent_death_signal(argv, signal.SIGKILL, 1),
                             env=env)
    forward = {sig: signal.signal(sig, lambda s, _f: child.send_signal(s))
               for sig in (signal.SIGTERM, signal.SIGINT)}
    syncer = None
    if staged.leader and staged.checkpoints is not None:
        syncer = _Syncer(staged.checkpoints, sync_seconds)
        syncer.start()
    try:
        code = child.wait()
    finally:
        if syncer is not None:
            syncer.stopped.set()
            syncer.join()
        for sig, previous in forward.items():
            signal.signal(sig, previous)
    return staged.finish(128 - code if code < 0 else code)
