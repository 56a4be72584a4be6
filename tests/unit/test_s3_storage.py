"""`s3://` and `minio://` (the same S3 protocol, as Kubeflow Pipelines names its MinIO artifacts)
work as `gs://` does for every storage function, against a real S3 server (MinIO): listing with
wildcards matched level by level, a name that is not an object is a prefix (never its siblings),
the content version, staging, uploads, directory copies, server-side copies, deletes."""

from __future__ import annotations

import os

import pytest

from kfdist.components.common import storage

ROWS = "species,bill_length_mm\nAdelie,39.1\nAdelie,39.5\nChinstrap,46.5\n"
RELABELLED = ROWS.replace("Adelie", "Gentoo")  # same size

SCHEMES = ("s3", "minio")


@pytest.fixture(params=SCHEMES)
def bucket(request, s3_server) -> str:
    """A new bucket's URI, `s3://NAME` or `minio://NAME`, with a few objects."""
    name = f"{request.node.name.split('[')[0][5:35].replace('_', '-')}-{request.param}"
    s3_server.create_bucket(name)
    uri = f"{request.param}://{name}"
    for key, text in (("data/a.csv", ROWS), ("data/b.csv", ROWS), ("data/sub/c.csv", ROWS),
                      ("data/notes.txt", "not a table"), ("data-old/a.csv", ROWS)):
        s3_server.put(f"{uri}/{key}", text)
    return uri


def test_remote_schemes_are_told_from_local_paths():
    for uri in ("gs://b/k", "s3://b/k", "minio://b/k"):
        assert storage.is_remote(uri)
    assert not storage.is_remote("/data/s3://x") and not storage.is_remote("data/x.csv")
    assert storage.is_gcs("gs://b/k") and not storage.is_gcs("s3://b/k")
    assert storage.split_remote("minio://mlpipeline/v2/artifacts/x") == (
        "mlpipeline", "v2/artifacts/x")
    assert storage.join("s3://b/dir/", "/x/", "y") == "s3://b/dir/x/y"


def test_listing_a_prefix_an_object_and_a_wildcard(bucket):
    assert storage.list_uris(f"{bucket}/data") == [
        f"{bucket}/data/a.csv", f"{bucket}/data/b.csv", f"{bucket}/data/notes.txt",
        f"{bucket}/data/sub/c.csv"]
    assert storage.list_uris(f"{bucket}/data/") == storage.list_uris(f"{bucket}/data")
    assert storage.list_uris(f"{bucket}/data/a.csv") == [f"{bucket}/data/a.csv"]
    assert storage.list_uris(f"{bucket}/data/*.csv") == [f"{bucket}/data/a.csv",
                                                         f"{bucket}/data/b.csv"]
    assert storage.list_uris(f"{bucket}/data/*/c.csv") == [f"{bucket}/data/sub/c.csv"]
    assert storage.list_uris(f"{bucket}/nothing") == []
    assert len(storage.list_uris(bucket)) == 5


def test_the_content_version_changes_with_a_matched_object_only(bucket, s3_server):
    wildcard = f"{bucket}/data/*.csv"
    first = storage.content_version(wildcard)
    assert storage.content_version(wildcard) == first
    s3_server.put(f"{bucket}/data/notes.txt", "changed, still not matched")
    s3_server.put(f"{bucket}/data-old/a.csv", RELABELLED)
    assert storage.content_version(wildcard) == first
    assert storage.content_version(f"{bucket}/data") != first
    prefix = storage.content_version(f"{bucket}/data")
    s3_server.put(f"{bucket}/data-old/b.csv", ROWS)  # a sibling of the prefix
    assert storage.content_version(f"{bucket}/data") == prefix
    s3_server.put(f"{bucket}/data/b.csv", RELABELLED)  # same size, new content
    second = storage.content_version(wildcard)
    assert second != first
    s3_server.put(f"{bucket}/data/d.csv", ROWS)
    assert storage.content_version(wildcard) not in (first, second)


def test_exists_download_and_upload(bucket, s3_server, tmp_path):
    assert storage.exists(f"{bucket}/data/a.csv")
    assert not storage.exists(f"{bucket}/data")  # a prefix is not a file
    assert not storage.exists(f"{bucket}/data/a.cs")
    local = storage.download(f"{bucket}/data/a.csv", str(tmp_path / "down" / "a.csv"))
    assert open(local).read() == ROWS
    (tmp_path / "up.csv").write_text(RELABELLED)
    storage.upload_file(str(tmp_path / "up.csv"), f"{bucket}/up/x.csv")
    assert s3_server.get(f"{bucket}/up/x.csv") == RELABELLED


def test_staging_an_object_and_a_prefix(bucket, tmp_path):
    one = storage.stage_locally(f"{bucket}/data/a.csv", str(tmp_path / "one"))
    assert one == str(tmp_path / "one" / "a.csv") and open(one).read() == ROWS
    staged = storage.stage_locally(f"{bucket}/data", str(tmp_path / "many"))
    found = sorted(os.path.relpath(os.path.join(d, f), staged)
                   for d, _, files in os.walk(staged) for f in files)
    assert found == ["a.csv", "b.csv", "notes.txt", os.path.join("sub", "c.csv")]
    with pytest.raises(storage.InvalidInputError, match="no such file or prefix"):
        storage.stage_locally(f"{bucket}/absent", str(tmp_path / "none"))


def test_directories_go_up_and_come_back(bucket, s3_server, tmp_path):
    local = tmp_path / "model"
    (local / "variables").mkdir(parents=True)
    (local / "saved_model.pb").write_text("graph")
    (local / "variables" / "variables.index").write_text("index")
    storage.copy_dir_to(str(local), f"{bucket}/models/m")
    storage.publish_dir(str(local), f"{bucket}/models/p/")
    for prefix in ("m", "p"):
        assert s3_server.list(f"{bucket}/models/{prefix}/") == [
            f"{bucket}/models/{prefix}/saved_model.pb",
            f"{bucket}/models/{prefix}/variables/variables.index"]
    back = storage.copy_dir_from(f"{bucket}/models/m", str(tmp_path / "back"))
    assert open(os.path.join(back, "variables", "variables.index")).read() == "index"
    with pytest.raises(storage.InvalidInputError, match="nothing exists under"):
        storage.copy_dir_from(f"{bucket}/models/none", str(tmp_path / "none"))


def test_copy_tree_delete_and_remove_tree(bucket, s3_server):
    written = storage.copy_tree(f"{bucket}/data", f"{bucket}/copy")
    assert written == s3_server.list(f"{bucket}/copy/") == [
        f"{bucket}/copy/a.csv", f"{bucket}/copy/b.csv", f"{bucket}/copy/notes.txt",
        f"{bucket}/copy/sub/c.csv"]
    assert s3_server.get(f"{bucket}/copy/sub/c.csv") == ROWS
    storage.delete(f"{bucket}/copy/a.csv")
    storage.delete(f"{bucket}/copy/a.csv")  # already gone: no error
    assert not storage.exists(f"{bucket}/copy/a.csv")
    assert storage.remove_tree(f"{bucket}/copy") == 3
    assert s3_server.list(f"{bucket}/copy") == []
    assert storage.remove_tree(f"{bucket}/copy") == 0
    assert len(s3_server.list(f"{bucket}/data/")) == 4  # the source is kept
