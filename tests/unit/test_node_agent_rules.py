"""The node agent's kubelet rules, as pure functions: a pod's environment (downward API,
`$(VAR)` expansion, ConfigMap and Secret references), its podman command line, restarts under a
restartPolicy, and the cluster DNS names of Services and pods."""

from __future__ import annotations

import pytest

from cluster.node_agent import names, podspec

POD = {"metadata": {"name": "job-worker-1", "namespace": "team", "uid": "0123456789abcdef",
                    "labels": {"role": "worker"},
                    "annotations": {"batch.kubernetes.io/job-completion-index": "1"}},
       "spec": {"nodeName": "node-a", "serviceAccountName": "runner", "hostname": "job-worker-1",
                "subdomain": "job", "restartPolicy": "Never",
                "securityContext": {"runAsUser": 1000, "runAsGroup": 1000, "fsGroup": 1000,
                                    "runAsNonRoot": True},
                "containers": []},
       "status": {"podIP": "10.89.0.7"}}


def test_env_follows_the_kubelet_order_and_sources():
    container = {"name": "main", "envFrom": [{"configMapRef": {"name": "settings"},
                                              "prefix": "CFG_"}],
                 "env": [{"name": "NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                         {"name": "INDEX", "valueFrom": {"fieldRef": {"fieldPath":
                          "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}},
                         {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                         {"name": "HOST", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}},
                         {"name": "GREETING", "value": "hi $(NAME) $$(NAME) $(MISSING)"},
                         {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "s", "key": "t"}}},
                         {"name": "MEM", "valueFrom": {"resourceFieldRef": {
                             "resource": "limits.memory", "divisor": "1Mi"}}}],
                 "resources": {"limits": {"memory": "512Mi"}}}
    data = {("configMap", "settings"): {"MODE": "fast"}, ("secret", "s"): {"t": "secret-value"}}
    env = podspec.env_of(POD, container, "127.0.0.1", lambda kind, name: data.get((kind, name)))
    assert env == {"CFG_MODE": "fast", "NAME": "job-worker-1", "INDEX": "1", "IP": "10.89.0.7",
                   "HOST": "127.0.0.1", "GREETING": "hi job-worker-1 $(NAME) $(MISSING)",
                   "TOKEN": "secret-value", "MEM": "512"}


def test_a_missing_secret_key_is_the_kubelets_config_error_unless_optional():
    container = {"name": "main", "env": [{"name": "T", "valueFrom": {"secretKeyRef": {
        "name": "s", "key": "t"}}}]}
    with pytest.raises(podspec.PodSpecError, match="couldn't find key t in secret team/s"):
        podspec.env_of(POD, container, "127.0.0.1", lambda kind, name: None)
    container["env"][0]["valueFrom"]["secretKeyRef"]["optional"] = True
    assert podspec.env_of(POD, container, "127.0.0.1", lambda kind, name: None) == {}


def test_run_argv_carries_the_pods_settings():
    container = {"name": "tensorflow", "image": "r/i:1", "command": ["python", "$(SCRIPT)"],
                 "args": ["--name=$(NAME)"], "workingDir": "/w",
                 "volumeMounts": [{"name": "work", "mountPath": "/mnt/kfdist"},
                                  {"name": "ssh", "mountPath": "/ssh", "subPath": "keys"}],
                 "resources": {"limits": {"memory": "1Gi", "cpu": "500m"}},
                 "securityContext": {"allowPrivilegeEscalation": False,
                                     "capabilities": {"drop": ["ALL"]}}}
    placement = podspec.Placement("bed", "net", "10.89.0.7", "10.89.0.1",
                                  names.search_domains("team"),
                                  {"work": "/claims/work", "ssh": "/pods/ssh"},
                                  frozenset({"ssh"}))
    argv = podspec.run_argv(POD, container, {"SCRIPT": "train.py", "NAME": "w1"}, placement, 2)
    joined = " ".join(argv)
    assert argv[argv.index("--name") + 1] == "k8s_tensorflow_job-worker-1_team_01234567_2"
    for flags in (["--ip", "10.89.0.7"], ["--user", "1000:1000"], ["--group-add", "1000"],
                  ["--memory", str(2**30)], ["--cpus", "0.5"], ["--cap-drop", "ALL"],
                  ["--security-opt", "no-new-privileges"], ["--dns", "10.89.0.1"],
                  ["--dns-search", "team.svc.cluster.local"], ["--hostname", "job-worker-1"],
                  ["--volume", "/claims/work:/mnt/kfdist"], ["--volume", "/pods/ssh/keys:/ssh:ro"],
                  ["--workdir", "/w"], ["--entrypoint", '["python", "train.py"]']):
        assert " ".join(flags) in joined, flags
    assert argv[-2:] == ["r/i:1", "--name=w1"]


def test_run_as_non_root_without_a_user_is_refused():
    pod = {**POD, "spec": {**POD["spec"], "securityContext": {"runAsNonRoot": True}}}
    with pytest.raises(podspec.PodSpecError, match="runAsNonRoot"):
        podspec.security_flags(pod["spec"], {"name": "main"})


@pytest.mark.parametrize("policy,code,restart", [
    ("Never", 1, False), ("Never", 0, False), ("OnFailure", 1, True), ("OnFailure", 0, False),
    ("Always", 0, True), (None, 137, True)])
def test_restarts_follow_the_restart_policy(policy, code, restart):
    assert podspec.restart_wanted(policy, code) is restart


def test_services_and_pod_hostnames_resolve_to_pod_addresses():
    pods = [POD, {**POD, "metadata": {**POD["metadata"], "name": "job-worker-0", "uid": "u0"},
                  "spec": {**POD["spec"], "hostname": "job-worker-0"}},
            {**POD, "metadata": {**POD["metadata"], "name": "gone", "uid": "u2",
                                 "deletionTimestamp": "2026-01-01T00:00:00Z"}}]
    services = [{"metadata": {"name": "job", "namespace": "team"},
                 "spec": {"clusterIP": "None", "selector": {"role": "worker"}}},
                {"metadata": {"name": "other", "namespace": "elsewhere"},
                 "spec": {"selector": {"role": "worker"}}}]
    addresses = {"0123456789abcdef": "10.89.0.7", "u0": "10.89.0.6", "u2": "10.89.0.9"}
    table = names.name_table(pods, services, addresses)
    assert table == {"job-worker-1.job.team.svc.cluster.local": ["10.89.0.7"],
                     "job-worker-0.job.team.svc.cluster.local": ["10.89.0.6"],
                     "job.team.svc.cluster.local": ["10.89.0.6", "10.89.0.7"]}


def test_the_name_server_answers_from_its_table():
    from dnslib import DNSRecord, RCODE

    server = names.NameServer.__new__(names.NameServer)
    server.table = {"job.team.svc.cluster.local": ["10.89.0.6"]}
    found = server.answer(DNSRecord.question("job.team.svc.cluster.local"))
    assert [str(r.rdata) for r in found.rr] == ["10.89.0.6"]
    missing = server.answer(DNSRecord.question("job.team.svc.cluster.local.team.svc.cluster.local"))
    assert missing.header.rcode == RCODE.NXDOMAIN
    empty = server.answer(DNSRecord.question("job.team.svc.cluster.local", "AAAA"))
    assert empty.header.rcode == RCODE.NOERROR and not empty.rr
