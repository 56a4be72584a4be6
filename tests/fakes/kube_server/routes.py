"""Request routing and the apiserver's answers (objects, lists, Status errors)."""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Dict, Optional

from fakes.kube_server.selectors import fields_match, labels_match
from fakes.kube_server.store import AlreadyExists, NotFound, now_rfc3339


@dataclasses.dataclass(frozen=True)
class Route:
    """What a URL path addresses."""

    group: str
    version: str
    namespace: str
    plural: str
    name: Optional[str] = None
    subresource: Optional[str] = None

    @property
    def resource(self):
        return self.group, self.version, self.plural

    @property
    def key(self):
        return self.group, self.version, self.plural, self.namespace, self.name

    @property
    def qualified(self) -> str:
        """`tfjobs.kubeflow.org`, or `pods` for the core group."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def rbac_resource(self) -> str:
        """`pods/log` for subresources, else the plural."""
        return f"{self.plural}/{self.subresource}" if self.subresource else self.plural


def parse(path: str) -> Optional[Route]:
    """`/api/v1/namespaces/ns/pods/x/log` or `/apis/g/v/namespaces/ns/plural[/name[/sub]]`."""
    parts = [p for p in path.split("/") if p]
    if parts[:2] == ["api", "v1"]:
        group, version, rest = "", "v1", parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis":
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return None
    if rest[:1] == ["namespaces"] and 3 <= len(rest) <= 5:
        return Route(group, version, rest[1], rest[2], *rest[3:5])
    return None


def verb(method: str, route: Optional[Route], query: Dict[str, str]) -> str:
    """The Kubernetes verb of a request."""
    if method == "GET":
        if route is not None and route.name is None:
            return "watch" if (query.get("watch") or "").lower() in ("true", "1") else "list"
        return "get"
    return {"POST": "create", "PATCH": "patch", "DELETE": "delete", "PUT": "update"}.get(method, method)


def status(code: int, reason: str, message: str,
           details: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """A `Status` object as the apiserver writes it."""
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "details": details or {}, "code": code}


def _details(route: Route, name: Optional[str]) -> Dict[str, Any]:
    details = {"group": route.group, "kind": route.plural}
    if name:
        details["name"] = name
    return details


def not_found(route: Route) -> Dict[str, Any]:
    message = f'{route.qualified} "{route.name}" not found'
    return status(404, "NotFound", message, _details(route, route.name))


def event_line(event_type: str, obj: Dict[str, Any]) -> bytes:
    return json.dumps({"type": event_type, "object": obj}).encode("utf-8") + b"\n"


def selected(obj: Dict[str, Any], query: Dict[str, str]) -> bool:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return (labels_match(query.get("labelSelector"), labels)
            and fields_match(query.get("fieldSelector"), obj))


def handle(handler, method: str, verb_: str, route: Route, query: Dict[str, str], body: Any) -> None:
    """Serves one request on a served, permitted resource."""
    store = handler.kube.store
    try:
        if verb_ in ("list", "watch"):
            return _list_or_watch(handler, route, query)
        if verb_ == "create":
            name = (body.get("metadata") or {}).get("name")
            created = store.create(route.key[:4] + (name,), body)
            return handler.send_json(201, created)
        if route.subresource == "log":
            return _log(handler, route, query)
        if route.subresource not in (None, "status"):
            return handler.send_json(404, not_found(route))
        if route.subresource == "status" and verb_ not in ("get", "patch"):
            return handler.send_json(405, status(405, "MethodNotAllowed",
                                                 f"{method} is not supported on status"))
        if verb_ == "get":
            return handler.send_json(200, store.get(route.key))
        if verb_ == "patch":
            return handler.send_json(200, store.update(route.key, _patcher(route, body)))
        if verb_ == "delete":
            return _delete(handler, route, query, body or {})
    except AlreadyExists:
        message = f'{route.qualified} "{name}" already exists'
        return handler.send_json(409, status(409, "AlreadyExists", message, _details(route, name)))
    except NotFound:
        return handler.send_json(404, not_found(route))
    handler.send_json(405, status(405, "MethodNotAllowed", f"{method} is not supported"))


def _list_or_watch(handler, route: Route, query: Dict[str, str]) -> None:
    store = handler.kube.store
    with store.changed:
        items = [o for o in store.items(route.resource, route.namespace) if selected(o, query)]
        current = store.resource_version
    if verb("GET", route, query) == "list":
        return handler.send_json(200, {"kind": "List", "apiVersion": route.version,
                                       "metadata": {"resourceVersion": str(current)}, "items": items})
    since = query.get("resourceVersion")
    if since in (None, "", "0"):
        return handler.stream_events(route, query, items, current)
    handler.stream_events(route, query, [], int(since))


def _delete(handler, route: Route, query: Dict[str, str], options: Dict[str, Any]) -> None:
    store = handler.kube.store
    existing = store.get(route.key)
    expected_uid = (options.get("preconditions") or {}).get("uid")
    if expected_uid and expected_uid != existing["metadata"]["uid"]:
        message = (f'Operation cannot be fulfilled on {route.qualified} "{route.name}": '
                   f'Precondition failed: UID in precondition: {expected_uid}, '
                   f'UID in object meta: {existing["metadata"]["uid"]}')
        return handler.send_json(409, status(409, "Conflict", message, _details(route, route.name)))
    policy = options.get("propagationPolicy") or query.get("propagationPolicy") or "Background"
    if policy == "Foreground":
        def mark(obj):
            obj["metadata"]["deletionTimestamp"] = now_rfc3339()
            obj["metadata"]["finalizers"] = ["foregroundDeletion"]
        store.update(route.key, mark)
    handler.send_json(200, store.delete(route.key))


def _log(handler, route: Route, query: Dict[str, str]) -> None:
    pod = handler.kube.store.get(route.key)
    names = [c["name"] for c in pod["spec"]["containers"]]
    container = query.get("container") or (names[0] if len(names) == 1 else None)
    if container is None:
        message = (f"a container name must be specified for pod {route.name}, "
                   f"choose one of: [{' '.join(names)}]")
        return handler.send_json(400, status(400, "BadRequest", message))
    if container not in names:
        message = f"container {container} is not valid for pod {route.name}"
        return handler.send_json(400, status(400, "BadRequest", message))
    states = {s["name"]: s.get("state") or {} for s in pod["status"].get("containerStatuses") or []}
    waiting = states.get(container, {}).get("waiting")
    if waiting is not None or not states.get(container):
        reason = (waiting or {}).get("reason") or "ContainerCreating"
        message = f'container "{container}" in pod "{route.name}" is waiting to start: {reason}'
        return handler.send_json(400, status(400, "BadRequest", message))
    uid = pod["metadata"]["uid"]
    if (query.get("follow") or "").lower() not in ("true", "1"):
        lines, _ = handler.kube.store.read_log(uid, 0, 0)
        return handler.send_text(200, "".join(line + "\n" for line in lines))
    handler.stream_log(uid, handler.kube.faults.take_log_drop())


def _patcher(route: Route, body: Dict[str, Any]):
    """A merge patch as the apiserver applies it to a resource with a `status` subresource.

    Every served kind has one: a patch of the object leaves its status as it
    was, and a patch of `.../status` changes only the status.
    """
    if route.subresource == "status":
        return lambda obj: _merge(obj, {"status": body.get("status") or {}})
    return lambda obj: _merge(obj, {k: v for k, v in body.items() if k != "status"})


def _merge(target: Dict[str, Any], patch: Dict[str, Any]) -> None:
    """RFC 7386 JSON merge patch, in place."""
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            _merge(target[key], value)
        else:
            target[key] = value
