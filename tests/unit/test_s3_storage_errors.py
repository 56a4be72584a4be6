"""An `s3://` or `minio://` URI that cannot be used ends in one clear line naming it and what to
set, never a traceback: a bucket that does not exist is bad input (`kfdist: invalid input:`,
exit 2); a wrong secret key, no credentials at all, or no store at the endpoint an error saying
which `AWS_*` variable to set (`kfdist: error:`, exit 1). Against a real S3 server (MinIO);
nothing is written either way."""

from __future__ import annotations

import pytest

from cli_lines import kfdist, only_line
from kfdist.components.common import storage
from kfdist.components.common.errors import InvalidInputError
from kfdist.components.common.s3_access import ENDPOINT_VARIABLES, MINIO, S3, S3AccessError

CREDENTIAL_VARIABLES = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")


def _every_call(uri: str, tmp_path):
    return (storage.list_uris, storage.content_version, storage.exists,
            lambda u: storage.download(u, str(tmp_path / "x.csv")),
            lambda u: storage.upload_file(__file__, u))


@pytest.mark.parametrize("uri", ["s3://missing-bucket/x.csv", "minio://missing-bucket/d/*.csv"])
def test_a_missing_bucket_is_invalid_input_naming_it(s3_server, uri):
    for call in (storage.list_uris, storage.content_version, storage.exists):
        with pytest.raises(InvalidInputError, match="bucket 'missing-bucket'") as raised:
            call(uri)
        assert uri in str(raised.value) and s3_server.endpoint in str(raised.value)


def test_a_wrong_secret_key_says_which_variables_to_set(s3_server, monkeypatch, tmp_path):
    s3_server.create_bucket("wrong-key")
    s3_server.put("s3://wrong-key/x.csv", "a,b\n1,2\n")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
    for call in _every_call("s3://wrong-key/x.csv", tmp_path):
        with pytest.raises(S3AccessError, match="refused the credentials") as raised:
            call("s3://wrong-key/x.csv")
        assert all(name in str(raised.value) for name in CREDENTIAL_VARIABLES)
    assert not (tmp_path / "x.csv").exists()


def test_no_credentials_says_which_variables_to_set(s3_server, monkeypatch, tmp_path):
    for name in CREDENTIAL_VARIABLES:
        monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # no instance role to look for
    for call in _every_call("s3://any-bucket/x.csv", tmp_path):
        with pytest.raises(S3AccessError, match="no S3 credentials found") as raised:
            call("s3://any-bucket/x.csv")
        assert all(name in str(raised.value) for name in CREDENTIAL_VARIABLES)


def test_an_unreachable_endpoint_says_to_set_it(s3_server, monkeypatch, tmp_path):
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")  # the discard port: refused
    for call in _every_call("minio://any-bucket/x.csv", tmp_path):
        with pytest.raises(S3AccessError, match="cannot reach the S3 store at "
                                                "http://127.0.0.1:9") as raised:
            call("minio://any-bucket/x.csv")
        assert "AWS_ENDPOINT_URL" in str(raised.value)


def test_minio_without_an_endpoint_is_kubeflow_pipelines_own_store(s3_server, monkeypatch,
                                                                   tmp_path):
    for name in ENDPOINT_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    assert MINIO.endpoint() == "http://seaweedfs.kubeflow:9000" and S3.endpoint() is None
    for call in _every_call("minio://mlpipeline/x.csv", tmp_path):
        with pytest.raises(S3AccessError, match="cannot reach the S3 store at "
                                                "http://seaweedfs.kubeflow:9000 ") as raised:
            call("minio://mlpipeline/x.csv")
        assert "AWS_ENDPOINT_URL" in str(raised.value)
    proc = kfdist("run", "tabular", "--data", "minio://mlpipeline/x.csv",
                   "--output", str(tmp_path / "out"))
    assert proc.returncode == 1, proc.stderr
    assert "http://seaweedfs.kubeflow:9000" in only_line(proc, "kfdist: error:")
    assert not (tmp_path / "out").exists()


def _wrong_key(s3_server, monkeypatch) -> None:
    s3_server.create_bucket("run-wrong-key")
    s3_server.put("s3://run-wrong-key/x.csv", "a,b\n1,2\n")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")


def _no_store(s3_server, monkeypatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")


#: kfdist run on data it cannot read: (set-up, --data, exit status, line prefix, what it names).
RUN_CASES = {
    "a missing bucket": (None, "s3://missing-bucket/x.csv", 2, "kfdist: invalid input:",
                         "missing-bucket"),
    "a wrong key": (_wrong_key, "s3://run-wrong-key/x.csv", 1, "kfdist: error:",
                    "AWS_SECRET_ACCESS_KEY"),
    "no store at the endpoint": (_no_store, "minio://mlpipeline/x.csv", 1, "kfdist: error:",
                                 "AWS_ENDPOINT_URL"),
}


@pytest.mark.parametrize("case", RUN_CASES)
def test_kfdist_run_on_data_it_cannot_read_ends_in_one_line_writing_nothing(
        case, s3_server, monkeypatch, tmp_path):
    set_up, data, status, prefix, named = RUN_CASES[case]
    if set_up is not None:
        set_up(s3_server, monkeypatch)
    out = tmp_path / "out"
    proc = kfdist("run", "tabular", "--data", data, "--output", str(out))
    assert proc.returncode == status, proc.stderr
    line = only_line(proc, prefix)
    assert data in line and named in line
    assert not out.exists()
