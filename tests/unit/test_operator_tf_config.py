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
from kfdist.components.train_distributed.job import tf_config


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
