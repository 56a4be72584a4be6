"""`shard_dataset(runner="beam")` with workers that are not this machine's processes.

A local Beam runner (FnApiRunner, DirectRunner, PrismRunner: Beam's
`StandardOptions.LOCAL_RUNNERS`) runs its workers here: they read the
driver's staged copy of the source and write into the temporary directory
beside a local `output_dir` (or under the step's work directory for a `gs://`
one), and the driver publishes as the local path does.

Any other runner (Dataflow, Flink, Spark, a portable job server) may run
them on other machines, so whatever they touch is on `gs://`, which every
party can reach:

* the workers write the run files, the shards and the summary through
  Beam's FileSystems under a shared build prefix: `<output_dir>.tmp-<id>/` for a `gs://`
  `output_dir`; `<temp_location>/kfdist-shard-<id>/` for a local one (a KFP
  step's artifact path, a `kfdist run` directory), given a `gs://`
  `temp_location` beam option;
* a worker reads a unit of the source from the driver's staged copy when it
  shares the driver's disk, else it first copies the unit's files from the
  `gs://` source to the same local paths (and deletes them after);
* the driver reads the summary back, deletes the run files and checks the
  summary, then moves the shards:
  server-side copies into a `gs://` `output_dir` (`metadata.json` is written
  after them), or a download into the local temporary directory, published
  as usual. The shared prefix is always deleted; on a failure, so is what
  was copied under `output_dir`.

A remote runner with a local source, or with a local `output_dir` and no
`gs://` `temp_location`, is refused before anything runs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import uuid
from typing import Callable, Dict, Iterator, Mapping, Optional, Sequence

from kfdist.components.common import storage
from kfdist.components.common.errors import require

#: Bytes per read when a worker copies a source file.
FETCH_CHUNK_BYTES = 1 << 22


def option_value(argv: Sequence[str], key: str) -> Optional[str]:
    """The last value of `--key=VALUE` among pipeline options `argv`, or None."""
    values = [a.split("=", 1)[1] for a in argv if a.split("=", 1)[0] == f"--{key}"]
    return values[-1] if values else None


def is_local_runner(runner: str) -> bool:
    """Whether Beam runner `runner` (`FnApiRunner`, `direct`, a dotted class path) runs here."""
    from apache_beam.options.pipeline_options import StandardOptions

    name = runner.rsplit(".", 1)[-1].lower()
    local = {n.lower() for n in StandardOptions.LOCAL_RUNNERS}
    return name in local or name + "runner" in local


@dataclasses.dataclass
class SharedBuild:
    """A dataset built by remote workers under a shared `gs://` prefix (see the module).

    Attributes:
      root: The shared build prefix the workers write under.
      output_dir: Where the dataset is published (`gs://` or local).
      source_uri: The `gs://` source the workers read.
      publishing: Whether shards may have been copied under a `gs://` `output_dir`.
    """

    root: str
    output_dir: str
    source_uri: str
    publishing: bool = False

    def origins(self, local_source: str, files: Sequence[str]) -> Dict[str, str]:
        """Each local file of the staged source with the object it was staged from
        (the names `storage.stage_locally` gives)."""
        if os.path.isfile(local_source):
            return {local_source: self.source_uri}
        base = self.source_uri.rstrip("/") + "/"
        by_path = {}
        for uri in storage.list_uris(self.source_uri):
            relative = uri[len(base):] if uri.startswith(base) else os.path.basename(uri)
            by_path[os.path.normpath(os.path.join(local_source, *relative.split("/")))] = uri
        return {f: by_path[os.path.normpath(f)] for f in files}

    def collect(self, build_dir: str, log: Callable[[str], None]) -> None:
        """Moves the shards to their place, then deletes the shared prefix: copies them
        server-side under a `gs://` `output_dir`, or downloads them into `build_dir`."""
        if storage.is_gcs(self.output_dir):
            self.publishing = True
            copied = storage.copy_tree(self.root, self.output_dir)
            log(f"beam: copied {len(copied)} shard(s) from {self.root} to {self.output_dir}")
        else:
            storage.copy_dir_from(self.root, build_dir)
            log(f"beam: downloaded the shards from {self.root}")
        storage.remove_tree(self.root)

    def discard(self, log: Callable[[str], None]) -> None:
        """After a failure: deletes the shared prefix and any shard copied under `output_dir`
        (checked empty before the run); a failure to delete is logged, not raised (the
        failure being handled is what the caller reports)."""
        for uri in [self.root] + ([self.output_dir] if self.publishing else []):
            try:
                storage.remove_tree(uri)
            except Exception as e:  # noqa: BLE001 -- any storage error: the original one is raised
                log(f"beam: could not delete {uri} after the failure ({type(e).__name__}: {e}); "
                    "delete it by hand")


def plan(source_uri: str, output_dir: str, beam_options: Sequence[str]) -> Optional[SharedBuild]:
    """Where the workers of the pipeline `beam_options` build the dataset.

    Returns:
      None for a local runner (the local temporary directory), else the
      `SharedBuild` of a fresh shared prefix.

    Raises:
      InvalidInputError: If the remote workers could not read the source or
        write the shards (see the module).
    """
    from kfdist.components.shard_dataset.beam_pipeline import pipeline_options

    argv = pipeline_options(beam_options)
    runner = option_value(argv, "runner") or ""
    if is_local_runner(runner):
        return None
    elsewhere = f"runner={runner} runs the Beam workers on other machines"
    require(storage.is_gcs(source_uri),
            f"source_uri {source_uri!r} is on this machine but {elsewhere}, which cannot read "
            "it; copy the source to gs://BUCKET/PATH and pass that, or leave out runner= "
            "(Beam's local runner)")
    run_id = uuid.uuid4().hex[:12]
    if storage.is_gcs(output_dir):
        require(storage.split_gcs(output_dir)[1].strip("/") != "",
                f"output_dir {output_dir!r} is a whole bucket; pass a folder in it, "
                "gs://BUCKET/PATH")
        return SharedBuild(f"{output_dir.rstrip('/')}.tmp-{run_id}", output_dir, source_uri)
    temp_location = option_value(argv, "temp_location")
    require(temp_location is not None and storage.is_gcs(temp_location),
            f"output_dir {output_dir!r} is on this machine but {elsewhere}, which cannot write "
            "there; pass a gs://BUCKET/PATH output_dir, or a beam option "
            "temp_location=gs://BUCKET/PATH for the workers to write to before the shards are "
            "downloaded" + (f" (temp_location={temp_location!r} is not on gs://)"
                            if temp_location is not None else ""))
    return SharedBuild(storage.join(temp_location, f"kfdist-shard-{run_id}"), output_dir,
                       source_uri)


def unit_files(source, unit: int) -> Sequence[str]:
    """The files of the source's unit `unit`: from its name, its first file, to the next unit's."""
    files = list(source.files)
    start = files.index(source.units[unit])
    end = files.index(source.units[unit + 1]) if unit + 1 < len(source.units) else len(files)
    return files[start:end]


def _fetch(uri: str, path: str) -> None:
    from apache_beam.io.filesystem import CompressionTypes
    from apache_beam.io.filesystems import FileSystems

    os.makedirs(os.path.dirname(path), exist_ok=True)
    partial = f"{path}.part-{uuid.uuid4().hex[:8]}"
    # UNCOMPRESSED: the bytes as stored (AUTO would gunzip a `.gz` source file).
    with FileSystems.open(uri, compression_type=CompressionTypes.UNCOMPRESSED) as remote, \
            open(partial, "wb") as local:
        shutil.copyfileobj(remote, local, FETCH_CHUNK_BYTES)
    os.replace(partial, path)  # whole or absent, even with a second worker on this disk


@contextlib.contextmanager
def local_copies(origins: Mapping[str, str]) -> Iterator[None]:
    """Makes each local path of `origins` exist, copying it from its `gs://` object when absent;
    deletes the copies it made on exit."""
    fetched = []
    try:
        for path, uri in origins.items():
            if not os.path.exists(path):
                _fetch(uri, path)
                fetched.append(path)
        yield
    finally:
        for path in fetched:
            with contextlib.suppress(OSError):
                os.remove(path)


def on_unit(unit: int, work: Callable[..., Iterator], source, origins: Mapping[str, str],
            *args) -> Iterator:
    """`work(unit, source, *args)` (a `beam_transforms` reader), the unit's files first copied
    here when this worker lacks them (`origins`: each local file of the staged source with its
    `gs://` object)."""
    with local_copies({f: origins[f] for f in unit_files(source, unit) if f in origins}):
        yield from work(unit, source, *args)
