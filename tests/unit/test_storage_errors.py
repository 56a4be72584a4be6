"""A `gs://` source that cannot be read ends in one clear line, never a traceback: a bucket that
does not exist is bad input naming it (`kfdist: invalid input:`, exit 2), missing Google
credentials an error that says how to authenticate (`kfdist: error:`, exit 1). Nothing is
written either way."""

from __future__ import annotations

import os

import pytest

from cli_lines import kfdist, only_line
from kfdist.components.common import storage
from kfdist.components.common.errors import InvalidInputError, KfdistError

AUTH_HINTS = ("gcloud auth application-default login", "GOOGLE_APPLICATION_CREDENTIALS",
              "STORAGE_EMULATOR_HOST")


def _no_credentials_env(monkeypatch, tmp_path) -> None:
    """No emulator, no key file, no gcloud configuration, no metadata server."""
    for name in ("STORAGE_EMULATOR_HOST", "GOOGLE_APPLICATION_CREDENTIALS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path / "gcloud"))
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("NO_GCE_CHECK", "True")


@pytest.mark.parametrize("uri", ["gs://missing-bucket/x.csv", "gs://missing-bucket/data/*.csv"])
def test_a_missing_bucket_is_invalid_input_naming_it(gcs_emulator, uri):
    for call in (storage.list_uris, storage.content_version):
        with pytest.raises(InvalidInputError, match="bucket 'missing-bucket'") as raised:
            call(uri)
        assert uri in str(raised.value)


def test_kfdist_run_refuses_a_missing_bucket_in_one_line(gcs_emulator, tmp_path):
    out = tmp_path / "out"
    proc = kfdist("run", "tabular", "--data", "gs://missing-bucket/x.csv", "--output", str(out))
    assert proc.returncode == 2, proc.stderr
    line = only_line(proc, "kfdist: invalid input:")
    assert "missing-bucket" in line and "gs://missing-bucket/x.csv" in line
    assert not out.exists()


def test_no_credentials_says_how_to_authenticate(monkeypatch, tmp_path):
    _no_credentials_env(monkeypatch, tmp_path)
    with pytest.raises(KfdistError) as raised:
        storage.list_uris("gs://some-bucket/x.csv")
    assert not isinstance(raised.value, InvalidInputError)
    for hint in AUTH_HINTS:
        assert hint in str(raised.value)


def test_kfdist_run_without_credentials_ends_in_one_line(monkeypatch, tmp_path):
    _no_credentials_env(monkeypatch, tmp_path)
    out = tmp_path / "out"
    proc = kfdist("run", "tabular", "--data", "gs://some-bucket/x.csv", "--output", str(out))
    assert proc.returncode == 1, proc.stderr
    line = only_line(proc, "kfdist: error:")
    assert "gs://some-bucket/x.csv" in line
    for hint in AUTH_HINTS:
        assert hint in line
    assert not out.exists()
