"""The local stand-in for an MPIJob's launcher: `mpirun` over localhost "workers".

The MPI Operator (v2beta1, OpenMPI) gives its launcher pod a hostfile with
one line per worker pod, `<job>-worker-<i>.<job>.<ns>.svc slots=<slotsPerWorker>`,
and points OpenMPI at it through the environment. Locally every worker is
`localhost`, which OpenMPI accepts once in a hostfile, so the hostfile has
one line `localhost slots=<workers x slots>`, and `mpirun` starts the ranks
as local processes; the ranks inherit the launcher's environment, as
`mpirun -x` forwards it on a cluster.
"""

from __future__ import annotations

import os
import shutil
from typing import Dict, List, Mapping, Sequence, Tuple

from kfdist.components.common.errors import InvalidInputError
from kfdist.components.train_distributed.job import config

HOSTFILE = "hostfile"


def hostfile_text(workers: int, slots_per_worker: int) -> str:
    """The local hostfile: every worker's slots on `localhost`."""
    return f"localhost slots={workers * slots_per_worker}\n"


def operator_launcher_env(hostfile: str, slots_per_worker: int) -> Dict[str, str]:
    """What the MPI Operator sets on an OpenMPI launcher (mpi-operator v2beta1 controller)."""
    return {
        "OMPI_MCA_orte_keep_fqdn_hostnames": "true",
        "OMPI_MCA_orte_default_hostfile": hostfile,
        "OMPI_MCA_plm_rsh_args": "-o ConnectionAttempts=10",
        "OMPI_MCA_orte_set_default_slots": str(slots_per_worker),
        "K_MPI_JOB_ROLE": "launcher",
    }


def launcher(spec: config.JobSpec, rank_argv: Sequence[str], work_dir: str,
             base_env: Mapping[str, str]) -> Tuple[List[str], Dict[str, str]]:
    """The local launcher's command and environment for `spec.workers x slots` ranks.

    Args:
      spec: The job (workers, slots_per_worker).
      rank_argv: The program every rank runs.
      work_dir: Job directory; the hostfile is written there.
      base_env: The environment every rank gets (TF_CONFIG unset).

    Raises:
      InvalidInputError: If `mpirun` is not installed.
    """
    mpirun = shutil.which("mpirun")
    if mpirun is None:
        raise InvalidInputError("strategy horovod needs OpenMPI's mpirun on PATH: "
                                "apt-get install openmpi-bin libopenmpi-dev")
    hostfile = os.path.join(work_dir, HOSTFILE)
    with open(hostfile, "w") as f:
        f.write(hostfile_text(spec.workers, spec.slots_per_worker))
    env = dict(base_env)
    env.update(operator_launcher_env(hostfile, spec.slots_per_worker))
    # The ranks share this machine's cores with each other's TensorFlow threads: an idle
    # rank yields its core instead of busy-polling MPI (about 2x faster fit on 2 cores).
    env.setdefault("OMPI_MCA_mpi_yield_when_idle", "1")
    if os.geteuid() == 0:  # containers often run as root; OpenMPI refuses it unless told
        env.update({"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"})
    ranks = spec.workers * spec.slots_per_worker
    argv = [mpirun, "-np", str(ranks), "--bind-to", "none", "--map-by", "slot", "--tag-output",
            *rank_argv]
    return argv, env
