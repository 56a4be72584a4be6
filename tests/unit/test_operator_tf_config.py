"""The local backend's TF_CONFIG is, byte for byte, what the Training Operator injects.

The oracle below follows the Training Operator v1 source
(pkg/controller.v1/tensorflow/tensorflow.go, `genTFConfigJSONStr` and
`genClusterSpec`): a Go struct `{Cluster, Task{Type, Index}, Environment}`
marshalled to JSON, the cluster a Go map (keys sorted when marshalled) of
every replica type of the job, lower-cased, each replica at
`<job>-<type>-<i>.<namespace>.svc:<port>`; and no TF_CONFIG at all unless the
job has more than one replica (`isDistributed`). The local backend puts
`localhost:<port>` where the operator puts the service name; the test maps
one onto the other and compares the exact text.
"""

from __future__ import annotations

import json
from typing import Dict, Optional

import pytest

from kfdist.components.train_distributed.job import config
from kfdist.components.train_distributed.job import strategy_rules
from kfdist.components.train_distributed.local import local_backend
from kfdist.components.train_distributed.job import jobset_cluster, tf_config


def operator_tf_config(job: str, namespace: str, replicas: Dict[str, int], rtype: str, index: int,
                       port: int = 2222) -> Optional[str]:
    """TF_CONFIG as the operator renders it for replica `rtype`/`index` (spec spelling: `Worker`)."""
    if sum(replicas.values()) <= 1:
        return None
    cluster = {t.lower(): [f"{job}-{t.lower()}-{i}.{namespace}.svc:{port}" for i in range(n)]
               for t, n in replicas.items()}
    go_struct = {"cluster": dict(sorted(cluster.items())),  # encoding/json sorts map keys
                 "task": {"type": rtype.lower(), "index": index},
                 "environment": "cloud"}
    return json.dumps(go_struct, separators=(",", ":"))


JOBS = {
    "ps with evaluator": (strategy_rules.PARAMETER_SERVER, dict(workers=2, ps=2, evaluator=True)),
    "mwms with chief and evaluator": (strategy_rules.MULTI_WORKER_MIRRORED, dict(workers=3, chief=True,
                                                                       evaluator=True)),
    "mwms workers only": (strategy_rules.MULTI_WORKER_MIRRORED, dict(workers=2)),
    "mirrored with evaluator": (strategy_rules.MIRRORED, dict(workers=1, evaluator=True)),
}


@pytest.mark.parametrize("name", sorted(JOBS))
def test_local_tf_config_equals_the_operators(name):
    strategy, settings = JOBS[name]
    spec = config.JobSpec(backend="local", **settings)
    spec.validate(strategy)
    counts = spec.replica_counts(strategy)
    ports = list(range(31000, 31000 + sum(counts.values())))
    cluster = local_backend.local_cluster(spec, strategy, ports)
    to_service = {f"localhost:{port}": f"job-{t}-{i}.team.svc:2222"
                  for t, hosts in cluster.items() for i, port in
                  enumerate(int(h.split(":")[1]) for h in hosts)}
    spec_types = {"chief": "Chief", "worker": "Worker", "ps": "PS", "evaluator": "Evaluator"}
    for task, value in tf_config.tf_configs(cluster):
        expected = operator_tf_config("job", "team", {spec_types[t]: n for t, n in counts.items()},
                                      spec_types[task.type], task.index)
        local = tf_config.to_env_value(value)
        for localhost, service in to_service.items():
            local = local.replace(f'"{localhost}"', f'"{service}"')
        assert local == expected, task


def test_a_single_replica_gets_no_tf_config_like_the_operator():
    spec = config.JobSpec(backend="local", workers=1)
    cluster = local_backend.local_cluster(spec, strategy_rules.MULTI_WORKER_MIRRORED, [31000])
    assert tf_config.tf_configs(cluster) == [(tf_config.Task("worker", 0), None)]
    assert operator_tf_config("job", "team", {"Worker": 1}, "Worker", 0) is None


def test_the_evaluator_is_in_the_cluster_but_not_in_the_training_cluster():
    spec = config.JobSpec(backend="local", workers=1, ps=1, evaluator=True)
    cluster = local_backend.local_cluster(spec, strategy_rules.PARAMETER_SERVER, [1, 2, 3, 4])
    assert "evaluator" in cluster
    assert sorted(tf_config.training_cluster(cluster)) == ["chief", "ps", "worker"]


def _jobset_env(completion_index: int) -> Dict[str, str]:
    """A kfdist-tensorflow pod's environment: the runtime's downward-API variables and the index."""
    return {"KFDIST_JOBSET_NAME": "job", "KFDIST_REPLICATED_JOB": "node", "KFDIST_JOB_INDEX": "0",
            "KFDIST_NAMESPACE": "team", "JOB_COMPLETION_INDEX": str(completion_index)}


@pytest.mark.parametrize("name", sorted(JOBS))
def test_trainjob_tf_config_equals_the_operators_with_jobset_names(name):
    """Pod i of a TrainJob's `node` Job gets the operator's TF_CONFIG for the replica at index i,
    with `<job>-node-0-<i>.<job>.<ns>.svc` where the TFJob has `<job>-<type>-<k>.<ns>.svc`."""
    strategy, settings = JOBS[name]
    spec = config.JobSpec(backend="trainjob", **settings)
    spec.validate(strategy)
    counts = spec.replica_counts(strategy)
    spec_types = {"chief": "Chief", "worker": "Worker", "ps": "PS", "evaluator": "Evaluator"}
    order = [(t, k) for t in ("chief", "worker", "ps", "evaluator") for k in range(counts.get(t, 0))]
    to_service = {f"job-node-0-{i}.job.team.svc:2222": f"job-{t}-{k}.team.svc:2222"
                  for i, (t, k) in enumerate(order)}
    for index, (rtype, k) in enumerate(order):
        env = _jobset_env(index)
        value = jobset_cluster.jobset_tf_config(jobset_cluster.pod_identity(env), counts, env)
        derived = tf_config.to_env_value(value)
        for jobset_name, service in to_service.items():
            derived = derived.replace(f'"{jobset_name}"', f'"{service}"')
        assert derived == operator_tf_config("job", "team", {spec_types[t]: n for t, n in counts.items()},
                                             spec_types[rtype], k), (index, rtype, k)
    assert tf_config.current_task(json.loads(tf_config.to_env_value(
        jobset_cluster.jobset_tf_config(jobset_cluster.pod_identity(_jobset_env(0)), counts,
                                        _jobset_env(0))))) == tf_config.chief_task(
        {t: [""] * n for t, n in counts.items()})


def test_trainjob_node_addresses_can_be_given_for_pods_without_cluster_dns():
    env = dict(_jobset_env(1), KFDIST_NODE_ADDRESSES="localhost:4000,localhost:4001")
    value = jobset_cluster.jobset_tf_config(jobset_cluster.pod_identity(env), {"worker": 2}, env)
    assert value["cluster"] == {"worker": ["localhost:4000", "localhost:4001"]}
    assert value["task"] == {"type": "worker", "index": 1}


@pytest.mark.parametrize("env, fragment", [
    (dict(_jobset_env(2)), "outside the job's 2 replicas"),
    ({"KFDIST_JOBSET_NAME": "job", "JOB_COMPLETION_INDEX": "0"}, "identity is incomplete"),
    (dict(_jobset_env(0), KFDIST_NODE_ADDRESSES="localhost:1"), "must list 2 host:port"),
])
def test_a_trainjob_pod_with_a_wrong_identity_is_told_what_is_wrong(env, fragment):
    from kfdist.components.common.errors import InvalidInputError

    with pytest.raises(InvalidInputError, match=fragment):
        jobset_cluster.jobset_tf_config(jobset_cluster.pod_identity(env), {"worker": 2}, env)


def test_pods_of_other_jobs_have_no_jobset_identity():
    assert jobset_cluster.pod_identity({"JOB_COMPLETION_INDEX": "3"}) is None
    assert jobset_cluster.pod_identity({}) is None
