"""Who the training step's process is on a cluster: its pod's variables, as the pipeline gives
them, the service account's namespace file, and outside a pod the kubeconfig's current context
(read here; no API call)."""

from __future__ import annotations

import os
from typing import Optional

#: The kubeconfig read when `KUBECONFIG` is unset, as kubectl does.
DEFAULT_KUBECONFIG = "~/.kube/config"
#: Where a pod finds its own namespace.
SERVICE_ACCOUNT_NAMESPACE_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
#: The step pod's own identity, as the pipeline exposes it (Downward API) to the training step.
POD_NAME_ENV, POD_UID_ENV, POD_NAMESPACE_ENV = "KFP_POD_NAME", "KFP_POD_UID", "KFP_POD_NAMESPACE"
#: (variable, pod field path) pairs the pipeline sets on the training step.
STEP_POD_FIELDS = ((POD_NAME_ENV, "metadata.name"), (POD_UID_ENV, "metadata.uid"),
                   (POD_NAMESPACE_ENV, "metadata.namespace"))


def own_namespace() -> Optional[str]:
    """The namespace this process's pod runs in (`KFP_POD_NAMESPACE`, else the service
    account's namespace file); None outside a cluster."""
    if os.environ.get(POD_NAMESPACE_ENV):
        return os.environ[POD_NAMESPACE_ENV]
    try:
        with open(SERVICE_ACCOUNT_NAMESPACE_FILE, encoding="utf-8") as f:
            return f.read().strip() or None
    except OSError:
        return None


def kubeconfig_location() -> str:
    """The kubeconfig kfdist reads: `KUBECONFIG` as it is now (a `:`-separated list of files),
    else `~/.kube/config`."""
    return os.environ.get("KUBECONFIG") or os.path.expanduser(DEFAULT_KUBECONFIG)


def context_namespace() -> Optional[str]:
    """The namespace of the kubeconfig's current context (the first file of
    `kubeconfig_location`), as kubectl takes it; None without one."""
    import yaml

    try:
        with open(kubeconfig_location().split(os.pathsep)[0], encoding="utf-8") as f:
            config = yaml.safe_load(f) or {}
        contexts = {c.get("name"): c.get("context") or {} for c in config.get("contexts") or []}
        return contexts.get(config.get("current-context"), {}).get("namespace") or None
    except (OSError, yaml.YAMLError, AttributeError, TypeError):
        return None


def default_namespace() -> str:
    """Where a job goes when no namespace is given: this pod's, else the kubeconfig context's,
    else `default`."""
    return own_namespace() or context_namespace() or "default"
