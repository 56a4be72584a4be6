"""The variables kfdist's own processes set for themselves, and never for a user's program.

kfdist's models train with tf-keras (legacy Keras): distributed Keras training
(MultiWorkerMirrored, ParameterServer, Horovod) needs it in TensorFlow 2.16+.
Each of kfdist's own processes chooses it before TensorFlow loads
(`use_own_env`, which `legacy_keras` runs when imported first): the CLI, the
replicas, the pipeline steps. A value already in the environment is kept.

A user's program (`kfdist launch`, the `train_program` step) gets none of
them: `user_environ` is the environment less every variable a kfdist process
set, whichever one it was (the names travel to kfdist's child processes in
`SET_BY_KFDIST_ENV`). So the program sees the Keras its own code asks for,
locally as in its own image on a cluster; a variable the user exported passes
through unchanged.
"""

from __future__ import annotations

import os
from typing import Dict, Mapping, MutableMapping, Optional

LEGACY_KERAS_ENV = "TF_USE_LEGACY_KERAS"
#: What kfdist's own processes set before TensorFlow loads: tf-keras; no C++ INFO lines.
OWN_ENV = {LEGACY_KERAS_ENV: "1", "TF_CPP_MIN_LOG_LEVEL": "1"}
#: The names of the OWN_ENV variables a kfdist process set (the user did not), comma-separated.
SET_BY_KFDIST_ENV = "KFDIST_SET_ENV"


def use_own_env(environ: Optional[MutableMapping[str, str]] = None) -> None:
    """Sets each OWN_ENV variable that `environ` lacks, and records that kfdist set it.

    Args:
      environ: The environment to change; default this process's (call it before
        TensorFlow is imported).
    """
    environ = os.environ if environ is None else environ
    set_here = [name for name in OWN_ENV if name not in environ]
    for name in set_here:
        environ[name] = OWN_ENV[name]
    if set_here:
        recorded = [name for name in environ.get(SET_BY_KFDIST_ENV, "").split(",") if name]
        environ[SET_BY_KFDIST_ENV] = ",".join(dict.fromkeys(recorded + set_here))


def user_environ(environ: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
    """`environ` as the user gave it: without the variables a kfdist process set.

    Args:
      environ: Default this process's environment.
    """
    environ = os.environ if environ is None else environ
    ours = {SET_BY_KFDIST_ENV, *environ.get(SET_BY_KFDIST_ENV, "").split(",")}
    return {name: value for name, value in environ.items() if name not in ours}
