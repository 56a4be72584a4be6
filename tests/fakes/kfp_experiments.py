"""The experiments of the fake KFP server (`kfp_server`): list with filters, create."""

from __future__ import annotations

import datetime
import json
import uuid
from typing import Any, Dict


class ApiError(Exception):
    """An error the server answers with: HTTP status, gRPC code, message."""

    def __init__(self, status: int, code: int, message: str):
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def now() -> str:
    """The server's timestamp format."""
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def list_experiments(experiments: Dict[str, Dict[str, Any]], multi_user: bool,
                     query: Dict[str, str]) -> Dict[str, Any]:
    """GET /experiments: filtered by namespace and EQUALS predicates."""
    namespace = query.get("namespace", "")
    if multi_user and not namespace:
        raise ApiError(400, 3, "Invalid input error: In multi-user mode, "
                                "ListExperiment requires filtering by namespace")
    found = [e for e in experiments.values()
             if not namespace or e.get("namespace", "") == namespace]
    if query.get("filter"):
        for pred in json.loads(query["filter"]).get("predicates", []):
            if pred.get("operation") not in (1, "EQUALS") or "stringValue" not in pred:
                raise ApiError(400, 3, f"fake KFP server: unsupported predicate {pred}")
            key = pred.get("key")
            found = [e for e in found if e.get(key) == pred["stringValue"]]
    if not found:
        return {}  # protobuf JSON leaves empty fields out
    return {"experiments": found, "total_size": len(found)}

def create_experiment(experiments: Dict[str, Dict[str, Any]], multi_user: bool,
                      body: Any) -> Dict[str, Any]:
    """POST /experiments: stores and returns the new experiment."""
    if not isinstance(body, dict) or not body.get("display_name"):
        raise ApiError(400, 3, "Invalid input error: Experiment name is empty")
    namespace = body.get("namespace") or ""
    if multi_user and not namespace:
        raise ApiError(400, 3, "Invalid input error: multi-user mode requires a namespace")
    for e in experiments.values():
        if e["display_name"] == body["display_name"] and e.get("namespace", "") == namespace:
            raise ApiError(409, 6, f"Already exist error: experiment "
                                    f"{body['display_name']!r} exists")
    exp = {
        "experiment_id": str(uuid.uuid4()),
        "display_name": body["display_name"],
        "created_at": now(),
        "storage_state": "AVAILABLE",
    }
    if body.get("description"):
        exp["description"] = body["description"]
    if namespace:
        exp["namespace"] = namespace
    experiments[exp["experiment_id"]] = exp
    return exp
