"""The Kubeflow Pipelines run and task a training step runs as, for a pipeline that passed neither.

kfdist's pipelines pass `run_id` and `task_name` (KFP's placeholders); a pipeline of a user's own
may not. Without them every run's job would get the same name: a second run would meet the
first run's job (Argo keeps a run's step pods, and the job they own, until the run is deleted),
and a retried step would not find its own. A KFP step's pod says both: KFP's API server labels
every pod of a run with its id, and Argo names the pod's node after the task
(`<workflow>.<dag>...<task>.executor`, `(n)` appended for a retry's attempt).
"""

from __future__ import annotations

import dataclasses
import os
import re
from typing import Any, Dict, Optional, Tuple

from kfdist.components.train_distributed.kubernetes.client.kube_errors import NotFoundError
from kfdist.components.train_distributed.kubernetes.client.pod_identity import (
    POD_NAME_ENV, own_namespace)

#: The label KFP's API server puts on every pod of a run: the run's id.
RUN_ID_LABEL = "pipeline/runid"
#: The annotation Argo names a step pod's node with.
NODE_NAME_ANNOTATION = "workflows.argoproj.io/node-name"
_EXECUTOR_NODE = re.compile(r"\.(?P<task>[^.]+)\.executor(\(\d+\))?$")


def task_of(pod: Dict[str, Any]) -> Optional[Tuple[str, str]]:
    """(run id, task name) of a KFP step's pod, or None when the pod is not one (pure)."""
    metadata = pod.get("metadata") or {}
    run_id = (metadata.get("labels") or {}).get(RUN_ID_LABEL)
    node = _EXECUTOR_NODE.search((metadata.get("annotations") or {}).get(NODE_NAME_ANNOTATION, ""))
    return (run_id, node.group("task")) if run_id and node else None


def with_own_task(options, api):
    """`options` (`ClusterOptions`) with the run id and task name of the KFP step this process
    runs as, where the pipeline passed no run id; else `options` itself (outside a KFP step's
    pod too: kfp.local, `kfdist train`)."""
    namespace, name = own_namespace(), os.environ.get(POD_NAME_ENV)
    if options.run_id or not namespace or not name:
        return options
    try:
        found = task_of(api.get_pod(namespace, name))
    except NotFoundError:
        return options
    if found is None:
        return options
    return dataclasses.replace(options, run_id=found[0], task_name=options.task_name or found[1])
