"""The cluster fixtures reach the test API server whatever the caller's environment holds: a
`KUBECONFIG` (and a `~/.kube/config`) naming another cluster, set before `kubernetes` is imported,
neither skips the tests nor reaches that cluster."""

import os
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir)
ONE_CLUSTER_TEST = ("tests/kubernetes/test_launcher.py::"
                    "test_watch_gone_relists_and_still_completes")
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
    env = dict(os.environ, KUBECONFIG=str(tmp_path / ".kube" / "config"), HOME=str(tmp_path))
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           ONE_CLUSTER_TEST], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "1 passed" in done.stdout and "skipped" not in done.stdout, done.stdout[-2000:]
