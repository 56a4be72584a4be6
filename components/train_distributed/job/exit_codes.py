"""What a replica's exit code means, to the local supervisor and to the operators.

One policy for every replica, local or in a pod (`replica.main`). Under the
`ExitCode` restart policy the Training Operator restarts a replica whose
container exited with a retryable code and fails the job on any other; the
local supervisor applies the same rule.
"""

SUCCEEDED = 0
#: Any error that a restart would not fix (bad data, a bug, a missing file).
FAILED = 1
#: The replica's launcher (the local supervisor, or `mpirun`) went away: the replica ends itself.
LAUNCHER_GONE = 3
#: A peer went away mid-collective (killed, or restarted): retryable, so the cluster
#: re-forms and resumes from the last backup.
PEER_LOST = 138
#: Exit codes the Training Operator treats as retryable: 128 + n for a process killed by
#: signal n (SIGKILL: 137), and `PEER_LOST`; 1-127 are permanent errors.
RETRYABLE = range(128, 256)


def is_retryable(code: int) -> bool:
    """Whether the `ExitCode` restart policy restarts a replica that exited with `code`."""
    return code in RETRYABLE


def should_restart(policy: str, code: int) -> bool:
    """Whether a replica that exited with non-zero `code` is restarted under `policy`.

    As the operators: `OnFailure` (and `Always`) always, `ExitCode` for
    retryable codes, `Never` never.
    """
    return policy in ("OnFailure", "Always") or (policy == "ExitCode" and is_retryable(code))


def container_exit_code(returncode: int) -> int:
    """A process's exit status as a container reports it: killed by signal N is 128 + N."""
    return 128 - returncode if returncode < 0 else returncode
