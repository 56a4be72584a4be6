"""TensorFlow's start-up lines about a GPU it cannot use, said once in plain words.

As they load, TensorFlow's wheels look for CUDA. On a machine or node without a GPU driver each
process prints, before any of TensorFlow's logging settings apply (`TF_CPP_MIN_LOG_LEVEL` does not
reach them): `WARNING: All log messages before absl::InitializeLog() is called are written to
STDERR`, `I0000 ... cudart_stub.cc:31] Could not find cuda drivers on your machine, GPU will not be
used.` and `E0000 ... cuda_platform.cc:52] failed call to cuInit: ...`. Log viewers that colour
`E` lines (Kubeflow Pipelines' UI paints them red) then show a replica that trains on its CPUs as
failing (Kubeflow Pipelines' log viewer paints any line that says "error" or "fail"). In a
replica's stream the notice and the driver line are left out, and the cuInit failure that means
"no driver here" (CUDA's code 303, what its stub library answers without a driver) becomes one
plain line. Any other cuInit failure (a GPU node whose driver is broken) stays as TensorFlow
printed it.
"""

from __future__ import annotations

import re
from typing import Optional

#: absl's notice that early lines go to stderr (it says nothing about the replica).
ABSL_NOTICE = ("WARNING: All log messages before absl::InitializeLog() is called are written to "
               "STDERR")
#: TensorFlow's "no CUDA driver" line (INFO level, printed regardless of its log level).
NO_DRIVER = re.compile(r"^I\d{4} .*\] Could not find cuda drivers on your machine")
#: TensorFlow's cuInit failure without a driver, at ERROR level.
CUINIT_NO_DRIVER = re.compile(r"^E\d{4} .*cuda_platform\.cc:\d+\] failed call to cuInit:.*\(303\)$")
#: What it becomes.
NO_GPU = "TensorFlow finds no CUDA driver here, so it runs on the CPU (cuInit: 303)"


def quieted(line: str) -> Optional[str]:
    """`line` as a replica's log shows it: None to leave it out, the cuInit failure of a
    machine without a driver reworded, any other line unchanged."""
    if line.strip() == ABSL_NOTICE or NO_DRIVER.match(line):
        return None
    return NO_GPU if CUINIT_NO_DRIVER.match(line) else line
