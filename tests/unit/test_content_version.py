"""The shard step's cache key, `storage.content_version`, covers exactly the files the shard
step reads and what identifies their content: for a local file its inode and ctime beside its
size and mtime (a rewrite that keeps size and mtime still changes it), for a `gs://` object its
generation and checksums from the same listing that `list_uris` makes (wildcards, a prefix
without `/` that must not count its siblings)."""

from __future__ import annotations

import os

from kfdist.components.common import storage
from kfdist.components.shard_dataset import readers

ROWS = "species,bill_length_mm\nAdelie,39.1\nAdelie,39.5\nChinstrap,46.5\n"
RELABELLED = ROWS.replace("Adelie", "Gentoo")  # same size


def _rewrite_keeping_size_and_mtime(path: str, text: str) -> None:
    before = os.stat(path)
    with open(path, "w") as f:
        f.write(text)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = os.stat(path)
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)


def test_a_local_rewrite_keeping_size_and_mtime_gets_a_new_version(tmp_path):
    path = tmp_path / "penguins.csv"
    path.write_text(ROWS)
    first = storage.content_version(str(path))
    assert storage.content_version(str(path)) == first  # stable while nothing changes
    _rewrite_keeping_size_and_mtime(str(path), RELABELLED)
    assert storage.content_version(str(path)) != first
    assert storage.content_version(str(tmp_path)) != storage.content_version(str(tmp_path / "x"))


def test_a_local_version_covers_the_files_the_shard_step_reads(tmp_path):
    (tmp_path / "a.csv").write_text(ROWS)
    (tmp_path / ".notes.csv").write_text("hidden, never read")
    assert readers.list_source_files(str(tmp_path)) == [str(tmp_path / "a.csv")]
    first = storage.content_version(str(tmp_path))
    (tmp_path / ".notes.csv").write_text("hidden, still never read")
    assert storage.content_version(str(tmp_path)) == first
    (tmp_path / "b.csv").write_text(ROWS)
    assert storage.content_version(str(tmp_path)) != first


def _put(gcs_emulator, uri: str, text: str) -> None:
    bucket, _, key = uri[len("gs://"):].partition("/")
    gcs_emulator.client().bucket(bucket).blob(key).upload_from_string(text)


def test_a_changed_object_under_a_gs_wildcard_gets_a_new_version(gcs_emulator):
    gcs_emulator.create_bucket("cv-wild")
    _put(gcs_emulator, "gs://cv-wild/data/a.csv", ROWS)
    _put(gcs_emulator, "gs://cv-wild/data/b.csv", ROWS)
    _put(gcs_emulator, "gs://cv-wild/data/notes.txt", "not matched")
    wildcard = "gs://cv-wild/data/*.csv"
    assert storage.list_uris(wildcard) == ["gs://cv-wild/data/a.csv", "gs://cv-wild/data/b.csv"]
    first = storage.content_version(wildcard)
    assert storage.content_version(wildcard) == first
    _put(gcs_emulator, "gs://cv-wild/data/notes.txt", "changed, still not matched")
    assert storage.content_version(wildcard) == first
    _put(gcs_emulator, "gs://cv-wild/data/b.csv", RELABELLED)  # same size, new content
    second = storage.content_version(wildcard)
    assert second != first
    _put(gcs_emulator, "gs://cv-wild/data/c.csv", ROWS)
    assert storage.content_version(wildcard) not in (first, second)


def test_a_gs_prefix_without_a_slash_does_not_count_its_siblings(gcs_emulator):
    gcs_emulator.create_bucket("cv-prefix")
    _put(gcs_emulator, "gs://cv-prefix/data/a.csv", ROWS)
    _put(gcs_emulator, "gs://cv-prefix/data-old/a.csv", ROWS)
    assert storage.list_uris("gs://cv-prefix/data") == ["gs://cv-prefix/data/a.csv"]
    first = storage.content_version("gs://cv-prefix/data")
    assert storage.content_version("gs://cv-prefix/data/") == first
    _put(gcs_emulator, "gs://cv-prefix/data-old/a.csv", RELABELLED)
    _put(gcs_emulator, "gs://cv-prefix/data-old/b.csv", ROWS)
    assert storage.content_version("gs://cv-prefix/data") == first
    _put(gcs_emulator, "gs://cv-prefix/data/a.csv", RELABELLED)
    assert storage.content_version("gs://cv-prefix/data") != first


def test_a_rewritten_gs_object_gets_a_new_version(gcs_emulator):
    gcs_emulator.create_bucket("cv-object")
    _put(gcs_emulator, "gs://cv-object/penguins.csv", ROWS)
    _put(gcs_emulator, "gs://cv-object/penguins.csv.bak", ROWS)
    assert storage.list_uris("gs://cv-object/penguins.csv") == ["gs://cv-object/penguins.csv"]
    first = storage.content_version("gs://cv-object/penguins.csv")
    _put(gcs_emulator, "gs://cv-object/penguins.csv.bak", RELABELLED)
    assert storage.content_version("gs://cv-object/penguins.csv") == first
    _put(gcs_emulator, "gs://cv-object/penguins.csv", ROWS)  # same bytes, a new generation
    assert storage.content_version("gs://cv-object/penguins.csv") != first
