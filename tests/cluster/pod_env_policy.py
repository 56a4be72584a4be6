"""Environment variables a cluster gives every pod of a namespace, as a MutatingAdmissionPolicy
(the API server's own admission, in CEL: no webhook to run) and its binding: how a platform hands
its pods the address of their object store without a job naming it.

Pure functions; a test applies the objects with kubectl and deletes them by `names`.
"""

from __future__ import annotations

import json
from typing import Dict, List

API_VERSION = "admissionregistration.k8s.io/v1"


def _env_expression(env: Dict[str, str]) -> str:
    """The CEL apply configuration that adds `env` to each container (merged by name, as a
    server-side apply merges a container's env)."""
    entries = ", ".join(f"Object.spec.containers.env{{name: {json.dumps(name)}, "
                        f"value: {json.dumps(value)}}}" for name, value in sorted(env.items()))
    return ("Object{spec: Object.spec{containers: object.spec.containers.map(c, "
            f"Object.spec.containers{{name: c.name, env: [{entries}]}})}}}}")


def names(namespace: str) -> List[str]:
    """The policy's and the binding's `kind/name` (they share the name)."""
    name = f"pod-env-{namespace}"
    return [f"mutatingadmissionpolicy/{name}", f"mutatingadmissionpolicybinding/{name}"]


def objects(namespace: str, env: Dict[str, str]) -> Dict:
    """A List of the policy that sets `env` in each container of a pod created in `namespace`,
    and its binding."""
    name = names(namespace)[0].split("/")[1]
    rules = [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
              "resources": ["pods"]}]
    return {"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": API_VERSION, "kind": "MutatingAdmissionPolicy",
         "metadata": {"name": name},
         "spec": {"matchConstraints": {"resourceRules": rules}, "failurePolicy": "Fail",
                  "reinvocationPolicy": "Never",
                  "mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration": {
                      "expression": _env_expression(env)}}]}},
        {"apiVersion": API_VERSION, "kind": "MutatingAdmissionPolicyBinding",
         "metadata": {"name": name},
         "spec": {"policyName": name, "matchResources": {"namespaceSelector": {
             "matchLabels": {"kubernetes.io/metadata.name": namespace}}}}}]}
