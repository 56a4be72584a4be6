"""The genuine node's add-ons as the API objects their upstream manifests make: CoreDNS in
kube-system (the cluster DNS, `kube-dns`) and local-path-provisioner (the default StorageClass).
Pure functions; `node.py` applies them.

CoreDNS answers the cluster domain only: there is no upstream resolver to forward to.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Dict, List

from cluster.node_config import CLUSTER_DNS_IP, CLUSTER_DOMAIN

#: Where a PersistentVolumeClaim's directory is, under the node's volumes directory: the
#: provisioner's `pathPattern`, so a claim is `volumes/<namespace>/<claim>`, as a person looks
#: for it.
CLAIM_PATH_PATTERN = "{{ .PVC.Namespace }}/{{ .PVC.Name }}"
#: The StorageClass every claim without one gets (the provisioner's, made the default).
STORAGE_CLASS = "local-path"
#: The kind of PersistentVolume the provisioner makes: `local`, whose kubelet plugin gives a pod's
#: `fsGroup` the volume (group ownership, group write, setgid directories) when it mounts it, as
#: a cluster's block and file volumes do; the provisioner's default `hostPath` never does.
VOLUME_TYPE = "local"
#: Where the provisioner runs: kube-system, with CoreDNS, as a cluster's own add-ons do (k3s runs
#: the same provisioner there), not its upstream manifest's namespace of its own.
PROVISIONER_NAMESPACE = "kube-system"

COREFILE = """.:53 {
    errors
    health {
        lameduck 5s
    }
    ready
    kubernetes %s in-addr.arpa ip6.arpa {
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 30
    }
    cache 30
    loop
    loadbalance
}
""" % CLUSTER_DOMAIN


def coredns_objects(coredns_image: str) -> List[Dict]:
    """CoreDNS in kube-system as its upstream deployment (coredns/deployment) runs it: its
    ServiceAccount and ClusterRole, the Corefile, a Deployment and the `kube-dns` Service."""
    labels = {"k8s-app": "kube-dns"}
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount",
         "metadata": {"name": "coredns", "namespace": "kube-system"}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
         "metadata": {"name": "system:coredns"},
         "rules": [{"apiGroups": [""], "resources": ["endpoints", "services", "pods",
                                                      "namespaces"],
                    "verbs": ["list", "watch"]},
                   {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"],
                    "verbs": ["list", "watch"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": {"name": "system:coredns"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                     "name": "system:coredns"},
         "subjects": [{"kind": "ServiceAccount", "name": "coredns",
                       "namespace": "kube-system"}]},
        {"apiVersion": "v1", "kind": "ConfigMap",
         "metadata": {"name": "coredns", "namespace": "kube-system"},
         "data": {"Corefile": COREFILE}},
        {"apiVersion": "apps/v1", "kind": "Deployment",
         "metadata": {"name": "coredns", "namespace": "kube-system", "labels": labels},
         "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                  "template": {"metadata": {"labels": labels}, "spec": {
                      "serviceAccountName": "coredns", "dnsPolicy": "Default",
                      "priorityClassName": "system-cluster-critical",
                      "containers": [{
                          "name": "coredns", "image": coredns_image,
                          "imagePullPolicy": "Never",
                          "args": ["-conf", "/etc/coredns/Corefile"],
                          "volumeMounts": [{"name": "config", "mountPath": "/etc/coredns",
                                            "readOnly": True}],
                          "ports": [{"containerPort": 53, "name": "dns", "protocol": "UDP"},
                                    {"containerPort": 53, "name": "dns-tcp",
                                     "protocol": "TCP"}],
                          "securityContext": {
                              "allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                              "capabilities": {"add": ["NET_BIND_SERVICE"], "drop": ["ALL"]}},
                          "livenessProbe": {"httpGet": {"path": "/health", "port": 8080},
                                            "initialDelaySeconds": 10, "periodSeconds": 10},
                          "readinessProbe": {"httpGet": {"path": "/ready", "port": 8181},
                                             "periodSeconds": 2}}],
                      "volumes": [{"name": "config", "configMap": {"name": "coredns"}}]}}}},
        {"apiVersion": "v1", "kind": "Service",
         "metadata": {"name": "kube-dns", "namespace": "kube-system", "labels": labels},
         "spec": {"selector": labels, "clusterIP": CLUSTER_DNS_IP,
                  "ports": [{"name": "dns", "port": 53, "protocol": "UDP"},
                            {"name": "dns-tcp", "port": 53, "protocol": "TCP"}]}}]


HELPER_SETUP = """#!/bin/sh
set -eu
mkdir -m 0777 -p "$VOL_DIR"
"""
HELPER_TEARDOWN = """#!/bin/sh
set -eu
rm -rf "$VOL_DIR"
"""


def provisioner_objects(provisioner_image: str, helper_image: str, volumes: Path) -> List[Dict]:
    """local-path-provisioner as its upstream deploy manifest (local-path-storage.yaml) installs
    it, in `PROVISIONER_NAMESPACE`: ServiceAccount, RBAC, its configuration, a Deployment, and
    the default StorageClass; a claim's directory is `volumes/<namespace>/<claim>`."""
    namespace, account = PROVISIONER_NAMESPACE, "local-path-provisioner-service-account"
    labels = {"app": "local-path-provisioner"}
    config = {"nodePathMap": [{"node": "DEFAULT_PATH_FOR_NON_LISTED_NODES",
                               "paths": [str(volumes)]}]}
    helper_pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "helper-pod"},
                  "spec": {"priorityClassName": "system-node-critical",
                           "tolerations": [{"key": "node.kubernetes.io/disk-pressure",
                                            "operator": "Exists", "effect": "NoSchedule"}],
                           "containers": [{"name": "helper-pod", "image": helper_image,
                                           "imagePullPolicy": "Never"}]}}
    rbac_rules = [
        {"apiGroups": [""], "resources": ["nodes", "persistentvolumeclaims", "configmaps",
                                          "pods", "pods/log"],
         "verbs": ["get", "list", "watch"]},
        {"apiGroups": [""], "resources": ["persistentvolumes"],
         "verbs": ["get", "list", "watch", "create", "patch", "update", "delete"]},
        {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]},
        {"apiGroups": ["storage.k8s.io"], "resources": ["storageclasses"],
         "verbs": ["get", "list", "watch"]}]
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount",
         "metadata": {"name": account, "namespace": namespace}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
         "metadata": {"name": "local-path-provisioner-role", "namespace": namespace},
         "rules": [{"apiGroups": [""], "resources": ["pods"],
                    "verbs": ["get", "list", "watch", "create", "patch", "update", "delete"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
         "metadata": {"name": "local-path-provisioner-role"}, "rules": rbac_rules},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
         "metadata": {"name": "local-path-provisioner-bind", "namespace": namespace},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                     "name": "local-path-provisioner-role"},
         "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": {"name": "local-path-provisioner-bind"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                     "name": "local-path-provisioner-role"},
         "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}]},
        {"apiVersion": "v1", "kind": "ConfigMap",
         "metadata": {"name": "local-path-config", "namespace": namespace},
         "data": {"config.json": json.dumps(config), "setup": HELPER_SETUP,
                  "teardown": HELPER_TEARDOWN, "helperPod.yaml": json.dumps(helper_pod)}},
        {"apiVersion": "apps/v1", "kind": "Deployment",
         "metadata": {"name": "local-path-provisioner", "namespace": namespace},
         "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                  "template": {"metadata": {"labels": labels}, "spec": {
                      "serviceAccountName": account,
                      "containers": [{
                          "name": "local-path-provisioner", "image": provisioner_image,
                          "imagePullPolicy": "Never",
                          "command": ["/local-path-provisioner", "--debug", "start",
                                      "--config", "/etc/config/config.json",
                                      "--helper-image", helper_image],
                          "volumeMounts": [{"name": "config-volume",
                                            "mountPath": "/etc/config/"}],
                          "env": [{"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {
                                      "fieldPath": "metadata.namespace"}}},
                                  {"name": "CONFIG_MOUNT_PATH", "value": "/etc/config/"}]}],
                      "volumes": [{"name": "config-volume",
                                   "configMap": {"name": "local-path-config"}}]}}}},
        {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
         "metadata": {"name": STORAGE_CLASS, "annotations": {
             "storageclass.kubernetes.io/is-default-class": "true",
             "defaultVolumeType": VOLUME_TYPE}},
         "provisioner": "rancher.io/local-path", "volumeBindingMode": "WaitForFirstConsumer",
         "reclaimPolicy": "Delete", "parameters": {"pathPattern": CLAIM_PATH_PATTERN}}]
