"""The test bed's fixtures reach the bed whatever the caller's environment holds: a `KUBECONFIG`
(and a `~/.kube/config`) naming another cluster, set before `kubernetes` is imported, neither
skips the tests nor reaches that cluster (one test on the bare control plane, in a pytest of its
own)."""

import os
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir)
ONE_CLUSTER_TEST = ("tests/containers/test_backend_choice_on_the_bed.py::"
                    "test_without_trainer_the_trainjob_backend_says_what_to_install")
ELSEWHERE = """apiVersion: v1
kind: Config
clusters: [{name: real, cluster: {server: "https://127.0.0.1:9"}}]
users: [{name: real, user: {token: not-for-tests}}]
contexts: [{name: real, context: {cluster: real, user: real, namespace: default}}]
current-context: real
"""


def test_a_callers_kubeconfig_neither_skips_nor_is_reached(tmp_path):
    (tmp_path / ".kube").mkdir()
    (tmp_path / ".kube" / "config").write_text(ELSEWHERE)
    home = os.path.expanduser("~")
    env = dict(os.environ, KUBECONFIG=str(tmp_path / ".kube" / "config"), HOME=str(tmp_path),
               # the bed's binaries and Go's caches stay where they are (not under HOME)
               XDG_CACHE_HOME=os.environ.get("XDG_CACHE_HOME", os.path.join(home, ".cache")),
               GOPATH=os.environ.get("GOPATH", os.path.join(home, "go")))
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           ONE_CLUSTER_TEST], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "1 passed" in done.stdout and "skipped" not in done.stdout, done.stdout[-2000:]
