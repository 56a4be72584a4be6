"""What the operators add to a rendered job's pods, from their Go source, for `pods.PodRunner`.

TFJob (Training Operator v1.9, `pkg/controller.v1/tensorflow`): one pod and one headless service
`<job>-<type>-<i>` per replica, reached as `<job>-<type>-<i>.<ns>.svc`; `TF_CONFIG` injected into
the container named `tensorflow` (`genTFConfigJSONStr`: every replica type, lower-case, the port
of the container's `tfjob-port`).

MPIJob (MPI Operator v0.8, `pkg/controller/mpi_job_controller.go`): pods `<job>-launcher` and
`<job>-worker-<i>`, hostname their name, subdomain the job's service `<job>`; a Secret `<job>-ssh`
of an ECDSA P-521 key pair (`newSSHAuthSecret`) mounted at `sshAuthMountPath` as `id_rsa`,
`id_rsa.pub` and `authorized_keys` (mode 0644 unless the path is /root/.ssh); a ConfigMap
`<job>-config` with the `hostfile` (`<job>-worker-<i>.<job>.<ns>.svc slots=<n>`) mounted at
/etc/mpi on the launcher; a worker without command or args runs `/usr/sbin/sshd -De`;
the launcher's environment gets the OpenMPI variables below.
"""

from __future__ import annotations

import copy
from typing import Any, Dict, List, Mapping, Tuple

from kfdist.components.train_distributed.job import tf_config

from containers.pods import KeyFiles, pod_name_of

TF_CONTAINER = "tensorflow"
TF_PORT_NAME = "tfjob-port"
TF_DEFAULT_PORT = 2222
MPI_CONFIG_MOUNT = "/etc/mpi"


def tfjob_pods(job: Mapping[str, Any]) -> List[Tuple[str, Dict[str, Any], Dict[str, str], List[str]]]:
    """Every replica pod of a TFJob: (name, pod spec, injected env, DNS names of its service)."""
    namespace, specs = job["metadata"]["namespace"], job["spec"]["tfReplicaSpecs"]
    addresses: Dict[str, List[str]] = {}
    for rtype, replica in sorted(specs.items()):
        container = replica["template"]["spec"]["containers"][0]
        port = next((p["containerPort"] for p in container.get("ports", [])
                     if p.get("name") == TF_PORT_NAME), TF_DEFAULT_PORT)
        addresses[rtype.lower()] = [f"{pod_name_of(job, rtype, i)}.{namespace}.svc:{port}"
                                    for i in range(replica.get("replicas", 1))]
    configs = dict(tf_config.tf_configs(tf_config.build_cluster(addresses)))
    pods = []
    for rtype, replica in specs.items():
        for i in range(replica.get("replicas", 1)):
            pod = copy.deepcopy(replica["template"]["spec"])
            env = {}
            value = configs.get(tf_config.Task(rtype.lower(), i))
            if value is not None and pod["containers"][0]["name"] == TF_CONTAINER:
                env[tf_config.TF_CONFIG_ENV] = tf_config.to_env_value(value)
            name = pod_name_of(job, rtype, i)
            pods.append((name, pod, env, [name, f"{name}.{namespace}.svc"]))
    return pods


def mpi_ssh_secret() -> KeyFiles:
    """The job's SSH Secret, made as the MPI Operator makes it (ECDSA P-521, PEM, authorized key)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP521R1())
    private = key.private_bytes(serialization.Encoding.PEM,
                                serialization.PrivateFormat.TraditionalOpenSSL,
                                serialization.NoEncryption()).decode()
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH,
                                           serialization.PublicFormat.OpenSSH).decode() + "\n"
    return KeyFiles({"ssh-privatekey": private, "ssh-publickey": public})


def mpijob_pods(job: Mapping[str, Any]) -> Tuple[List[Tuple[str, Dict[str, Any], Dict[str, str], List[str]]],
                                                   Dict[str, KeyFiles]]:
    """The launcher and worker pods of an MPIJob v2beta1, and the Secret and ConfigMap they mount.

    Returns:
      ([(name, pod spec, injected env, DNS names)], {object name: KeyFiles}), the launcher first.
    """
    name, namespace, spec = job["metadata"]["name"], job["metadata"]["namespace"], job["spec"]
    slots = spec.get("slotsPerWorker", 1)
    workers = spec["mpiReplicaSpecs"]["Worker"]["replicas"]
    worker_names = [pod_name_of(job, "worker", i) for i in range(workers)]
    hostfile = "".join(f"{w}.{name}.{namespace}.svc slots={slots}\n" for w in worker_names)
    objects = {f"{name}-ssh": mpi_ssh_secret(),
               f"{name}-config": KeyFiles({"hostfile": hostfile, "discover_hosts.sh": ""})}
    ssh_path = spec.get("sshAuthMountPath", "/root/.ssh")
    ssh_volume = {"name": "ssh-auth", "secret": {"secretName": f"{name}-ssh", "items": [
        {"key": "ssh-privatekey", "path": "id_rsa"}, {"key": "ssh-publickey", "path": "id_rsa.pub"},
        {"key": "ssh-publickey", "path": "authorized_keys"}]}}
    if ssh_path == "/root/.ssh":
        ssh_volume["secret"]["defaultMode"] = 0o600

    def with_ssh(pod: Dict[str, Any]) -> Dict[str, Any]:
        pod.setdefault("volumes", []).append(ssh_volume)
        pod["containers"][0].setdefault("volumeMounts", []).append(
            {"name": "ssh-auth", "mountPath": ssh_path})
        return pod

    launcher = with_ssh(copy.deepcopy(spec["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]))
    launcher["volumes"].append({"name": "mpi-job-config", "configMap": {
        "name": f"{name}-config", "items": [{"key": "hostfile", "path": "hostfile", "mode": 0o444},
                                           {"key": "discover_hosts.sh", "path": "discover_hosts.sh",
                                            "mode": 0o555}]}})
    launcher["containers"][0]["volumeMounts"].append(
        {"name": "mpi-job-config", "mountPath": MPI_CONFIG_MOUNT})
    launcher_env = {"K_MPI_JOB_ROLE": "launcher", "OMPI_MCA_orte_keep_fqdn_hostnames": "true",
                    "OMPI_MCA_orte_default_hostfile": f"{MPI_CONFIG_MOUNT}/hostfile",
                    "OMPI_MCA_plm_rsh_args": "-o ConnectionAttempts=10",
                    "OMPI_MCA_orte_set_default_slots": str(slots),
                    "NVIDIA_VISIBLE_DEVICES": "", "NVIDIA_DRIVER_CAPABILITIES": ""}
    launcher_name = f"{name}-launcher"
    pods = [(launcher_name, launcher, launcher_env,
             [launcher_name, f"{launcher_name}.{name}.{namespace}.svc"])]
    for worker_name in worker_names:
        pod = with_ssh(copy.deepcopy(spec["mpiReplicaSpecs"]["Worker"]["template"]["spec"]))
        container = pod["containers"][0]
        if not container.get("command") and not container.get("args"):
            container["command"] = ["/usr/sbin/sshd", "-De"]
        pods.append((worker_name, pod, {"K_MPI_JOB_ROLE": "worker"},
                     [worker_name, f"{worker_name}.{name}.{namespace}.svc"]))
    return pods, objects
