"""`python -m kfdist.components.train_distributed.replica`: see `main`.

A local replica (its launcher's pid in the environment) first has the kernel
end it when its parent ends: the local supervisor's wrapper did so already
for a TensorFlow replica, and this covers a Horovod rank, whose parent is
`mpirun`. It is done before TensorFlow is imported, so that no window is left
where a dead launcher's replica would go on importing and then training.
"""

import os
import sys

from kfdist.components.common import parent_death
from kfdist.components.train_distributed.job import exit_codes, work_files

_LAUNCHER = os.environ.get(work_files.LAUNCHER_PID_ENV)
if _LAUNCHER:
    # A rank's parent is mpirun (OpenMPI sets OMPI_COMM_WORLD_RANK), a replica's the launcher.
    _PARENT = None if "OMPI_COMM_WORLD_RANK" in os.environ else int(_LAUNCHER)
    if not parent_death.die_with_parent(_PARENT):
        sys.exit(exit_codes.LAUNCHER_GONE)

from kfdist.components.train_distributed.replica.main import main  # noqa: E402

sys.exit(main())
