"""Validates objects against a CustomResourceDefinition's structural schema, strictly.

The API server silently prunes fields a CRD's `openAPIV3Schema` does not
declare (unless `x-kubernetes-preserve-unknown-fields: true`): a misplaced or
misspelled field (`activeDeadlineSecond`, runPolicy fields at the spec root)
is accepted and then has no effect. Here every such field is an error, as are
wrong types, enums, patterns, missing required fields, and duplicate keys of
`x-kubernetes-list-type: map`/`set` lists. Root `metadata` (which CRD schemas
leave undescribed) is checked by `validate_metadata`.

Usage: `errors = load_crd(crd_path_for(kind)).validate(obj)`; each error is
`<JSON path>: <what is wrong>`.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
from typing import Any, Dict, List, Optional

import yaml

from kfdist.components.train_distributed.kubernetes.build import k8s_syntax as k8s
from kfdist.components.train_distributed.kubernetes.build.job_kinds import JobKind

#: Where the CRDs are looked for, first match wins: $KFDIST_CRD_DIR, then the copies in
#: tests/data/crds (Training Operator v1.9, MPI Operator v0.8.2, Kubeflow Trainer v2.3.0 and
#: the v2.1.0 TrainJob, Flink Kubernetes Operator 1.15.0's FlinkDeployment, unmodified).
CRD_DIRS = tuple(d for d in (os.environ.get("KFDIST_CRD_DIR"),
                             os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                          "data", "crds"))
                 if d)
#: CRD file of each served kind.
CRD_FILES = {
    ("TFJob", "v1"): "tfjobs.kubeflow.org.v1.training-operator-v1.9.yaml",
    ("MPIJob", "v2beta1"): "mpijobs.kubeflow.org.v2beta1.mpi-operator-v0.8.2.yaml",
    ("MPIJob", "v1"): "mpijobs.kubeflow.org.v1.training-operator-v1.9.yaml",
    ("PyTorchJob", "v1"): "pytorchjobs.kubeflow.org.v1.training-operator-v1.9.yaml",
    ("TrainJob", "v1alpha1"): "trainer.kubeflow.org_trainjobs.trainer-v2.3.0.yaml",
    ("ClusterTrainingRuntime", "v1alpha1"):
        "trainer.kubeflow.org_clustertrainingruntimes.trainer-v2.3.0.yaml",
    ("FlinkDeployment", "v1beta1"):
        "flinkdeployments.flink.apache.org.v1beta1.flink-kubernetes-operator-1.15.0.yaml",
}
#: The TrainJob CRD of Trainer v2.1 (`podTemplateOverrides` instead of `runtimePatches`).
TRAINJOB_V2_1_CRD = "trainer.kubeflow.org_trainjobs.trainer-v2.1.0.yaml"
_INT_RANGES = {"int32": (-2 ** 31, 2 ** 31 - 1), "int64": (-2 ** 63, 2 ** 63 - 1)}


def crd_path_for(kind: JobKind) -> str:
    """Path of the CRD YAML serving `kind`.

    Raises:
      FileNotFoundError: If no copy is found (a test must fail, not skip, then).
    """
    return crd_path(CRD_FILES[(kind.kind, kind.version)], f"of {kind.kind} {kind.version}")


def crd_path(name: str, what: str = "") -> str:
    """Path of the CRD file `name` (one of `CRD_FILES`' values or `TRAINJOB_V2_1_CRD`).

    Raises:
      FileNotFoundError: If no copy is found.
    """
    for directory in CRD_DIRS:
        if os.path.exists(os.path.join(directory, name)):
            return os.path.join(directory, name)
    raise FileNotFoundError(f"CRD {name} {what} not found in {CRD_DIRS}")


@dataclasses.dataclass(frozen=True)
class Crd:
    """A CRD's group, kind and the structural schema of each served version."""

    group: str
    kind: str
    schemas: Dict[str, Dict[str, Any]]

    def validate(self, obj: Dict[str, Any]) -> List[str]:
        """All schema errors of `obj` (apiVersion and kind included); empty if valid."""
        api_version = f"{self.group}/"
        version = str(obj.get("apiVersion", ""))[len(api_version):]
        if not str(obj.get("apiVersion", "")).startswith(api_version) or version not in self.schemas:
            return [f"$.apiVersion: {obj.get('apiVersion')!r} is not served; valid: "
                    f"{[api_version + v for v in self.schemas]}"]
        errors = [] if obj.get("kind") == self.kind else [f"$.kind: {obj.get('kind')!r} is not {self.kind!r}"]
        errors += validate_value(self.schemas[version], obj, "$", root=True)
        return errors + validate_metadata(obj.get("metadata", {}), "$.metadata")


@functools.lru_cache(maxsize=None)
def load_crd(path: str) -> Crd:
    """Loads a CRD YAML file (cached: the files are large)."""
    with open(path) as f:
        crd = yaml.load(f, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    spec = crd["spec"]
    schemas = {v["name"]: v["schema"]["openAPIV3Schema"] for v in spec["versions"] if v.get("served")}
    return Crd(group=spec["group"], kind=spec["names"]["kind"], schemas=schemas)


def _type_error(schema: Dict[str, Any], value: Any) -> Optional[str]:
    if schema.get("x-kubernetes-int-or-string"):
        ok = isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))
        return None if ok else f"must be an integer or a string, got {value!r}"
    expected = schema.get("type")
    checks = {"object": lambda v: isinstance(v, dict), "array": lambda v: isinstance(v, list),
              "string": lambda v: isinstance(v, str), "boolean": lambda v: isinstance(v, bool),
              "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
              "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)}
    if expected is None or checks[expected](value):
        return None
    return f"must be of type {expected}, got {type(value).__name__} {value!r}"


def _scalar_errors(schema: Dict[str, Any], value: Any, path: str) -> List[str]:
    errors = []
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{path}: {value!r} is not one of {schema['enum']}")
    if isinstance(value, str) and "pattern" in schema and not re.search(schema["pattern"], value):
        errors.append(f"{path}: {value!r} does not match pattern {schema['pattern']!r}")
    if isinstance(value, int) and not isinstance(value, bool):
        low, high = _INT_RANGES.get(schema.get("format", ""), (None, None))
        low = schema.get("minimum", low)
        high = schema.get("maximum", high)
        if (low is not None and value < low) or (high is not None and value > high):
            errors.append(f"{path}: {value} is out of range [{low}, {high}]")
    if isinstance(value, str):
        if len(value) > schema.get("maxLength", len(value)) or len(value) < schema.get("minLength", 0):
            errors.append(f"{path}: length {len(value)} is outside the allowed length")
    return errors


def _object_errors(schema: Dict[str, Any], value: Dict[str, Any], path: str, root: bool) -> List[str]:
    errors = [f"{path}: missing required field {name!r}" for name in schema.get("required", [])
              if name not in value]
    properties = schema.get("properties", {})
    additional = schema.get("additionalProperties")
    preserve = schema.get("x-kubernetes-preserve-unknown-fields", False)
    for key, item in value.items():
        child = f"{path}.{key}"
        if root and key == "metadata":
            continue  # ObjectMeta: checked by validate_metadata
        if root and key in ("apiVersion", "kind") and key not in properties:
            continue  # implicit in every CRD's root (some omit them); Crd.validate checks them
        if key in properties:
            errors += validate_value(properties[key], item, child)
        elif isinstance(additional, dict):
            errors += validate_value(additional, item, child)
        elif additional is True or preserve:
            continue
        else:
            errors.append(f"{child}: unknown field (the API server would prune it); "
                          f"known fields here: {sorted(properties)}")
    return errors


def _list_errors(schema: Dict[str, Any], value: List[Any], path: str) -> List[str]:
    errors = []
    for i, item in enumerate(value):
        errors += validate_value(schema.get("items", {}), item, f"{path}[{i}]")
    list_type = schema.get("x-kubernetes-list-type")
    if list_type == "map":
        keys = schema.get("x-kubernetes-list-map-keys", [])
        seen = [tuple(item.get(k) for k in keys) for item in value if isinstance(item, dict)]
        errors += [f"{path}: duplicate entries with key {dict(zip(keys, key))}" for key in
                   sorted({k for k in seen if seen.count(k) > 1}, key=str)]
    elif list_type == "set":
        reprs = [repr(item) for item in value]
        errors += [f"{path}: duplicate entry {r}" for r in sorted({r for r in reprs if reprs.count(r) > 1})]
    if len(value) > schema.get("maxItems", len(value)):
        errors.append(f"{path}: more than {schema['maxItems']} items")
    return errors


def validate_value(schema: Dict[str, Any], value: Any, path: str, root: bool = False) -> List[str]:
    """Errors of `value` against a structural `schema` node; unknown fields are errors.

    Args:
      schema: An openAPIV3Schema node.
      value: Plain data (as parsed from YAML/JSON).
      path: JSON path of `value`, for messages.
      root: Whether `value` is the whole object (its `metadata` is skipped).
    """
    if value is None and not schema.get("nullable"):
        return [f"{path}: null is not allowed (the API server drops it; leave the field out)"]
    if "anyOf" in schema:
        branches = [validate_value(branch, value, path) for branch in schema["anyOf"]]
        if all(branches) and not schema.get("x-kubernetes-int-or-string"):
            return [f"{path}: matches none of anyOf: {branches}"]
    error = _type_error(schema, value)
    if error:
        return [f"{path}: {error}"]
    if isinstance(value, dict):
        return _object_errors(schema, value, path, root)
    if isinstance(value, list):
        return _list_errors(schema, value, path)
    return _scalar_errors(schema, value, path)


def validate_metadata(metadata: Any, path: str = "$.metadata") -> List[str]:
    """Checks the ObjectMeta of a job: name, namespace, labels, annotations."""
    if not isinstance(metadata, dict):
        return [f"{path}: must be an object"]
    errors = []
    if not k8s.is_dns1035_label(metadata.get("name")):
        errors.append(f"{path}.name: {metadata.get('name')!r} is not a DNS-1035 label")
    if "namespace" in metadata and not k8s.is_dns1123_label(metadata["namespace"]):
        errors.append(f"{path}.namespace: {metadata['namespace']!r} is not a DNS-1123 label")
    for field in ("labels", "annotations"):
        for key, value in metadata.get(field, {}).items():
            if k8s.label_key_error(key):
                errors.append(f"{path}.{field}.{key}: invalid key: {k8s.label_key_error(key)}")
            if not isinstance(value, str) or (field == "labels" and not k8s.is_label_value(value)):
                errors.append(f"{path}.{field}.{key}: invalid value {value!r}")
    known = {"name", "namespace", "labels", "annotations", "ownerReferences", "generateName", "finalizers"}
    errors += [f"{path}.{key}: not settable by a client" for key in metadata if key not in known]
    return errors
