"""What `kfdist submit` asks a Kubeflow Pipelines API besides creating the run: its health,
and the run's state until it ends; and how the API's errors read to a person."""

from __future__ import annotations

import dataclasses
import json
import time
from typing import Callable, Optional, Tuple

from kfdist.components.common.errors import KfdistError

#: Environment variable read for the bearer token when --existing-token is not given.
TOKEN_ENV = "KF_PIPELINES_TOKEN"

#: Run states after which a run never changes again.
TERMINAL_STATES = frozenset({"SUCCEEDED", "FAILED", "CANCELED", "SKIPPED"})


#: Seconds between two polls of the run while waiting (default).
DEFAULT_POLL_INTERVAL_S = 10.0


#: While waiting, a "still <STATE>" line is logged this often when nothing changes.
HEARTBEAT_S = 300.0


#: Seconds the first request (the health check) may take.
HEALTH_TIMEOUT_S = 30.0


#: Consecutive transient errors (connection errors, HTTP 5xx) tolerated while polling.
MAX_POLL_ERRORS = 5
#: How long a FAILED run's failed step is looked for after the run's state says FAILED: the
#: persistence agent can report the run's state before its steps' (seen on KFP 2.17).
STEPS_SETTLE_S = 20.0


def describe_api_error(err: Exception, host: str, action: str) -> KfdistError:
    """A KfdistError for a failed request, saying what the server answered."""
    import kfp_server_api
    import urllib3

    if isinstance(err, kfp_server_api.ApiException):
        body = err.body.decode("utf-8", "replace") if isinstance(err.body, bytes) else err.body
        detail = ""
        if body:
            try:
                parsed = json.loads(body)
                detail = parsed.get("message") or parsed.get("error") or body
            except (ValueError, AttributeError):
                detail = body
            detail = ": " + " ".join(str(detail).split())[:500]
        hint = ""
        if err.status in (401, 403):
            hint = f" (check the token: --existing-token or ${TOKEN_ENV})"
        elif err.status == 404:
            hint = " (check --host: it must be the address the KFP API answers on)"
        return KfdistError(
            f"{action} failed: the KFP API at {host} answered HTTP {err.status} "
            f"{err.reason or ''}{detail}{hint}".rstrip())
    if isinstance(err, urllib3.exceptions.HTTPError):
        return KfdistError(f"{action} failed: cannot reach the KFP API at {host}: {err}")
    if isinstance(err, TimeoutError):  # kfp.Client's healthz retries ran out
        return KfdistError(
            f"{action} failed: the KFP API at {host} did not answer its health check "
            f"(check --host and the token)")
    return KfdistError(f"{action} failed: {type(err).__name__}: {err}")


def is_transient(err: Exception) -> bool:
    """Whether a failed request is worth repeating (a dropped connection, a 5xx)."""
    import kfp_server_api
    import urllib3

    if isinstance(err, kfp_server_api.ApiException):
        return err.status in (0, 429) or (err.status or 0) >= 500
    return isinstance(err, urllib3.exceptions.HTTPError)


def api_errors():
    """The exception types a request through `kfp.Client` raises when the API fails."""
    import kfp_server_api
    import urllib3

    return (kfp_server_api.ApiException, urllib3.exceptions.HTTPError, TimeoutError)


def check_health(host: str, token: Optional[str]) -> bool:
    """One GET of the API's healthz; returns whether the deployment is multi-user.

    kfp.Client asks healthz too, but retries any refusal five times, 5 s apart,
    and then reports only "Failed getting healthz endpoint": this check turns a
    wrong --host or token into a clear error at once.
    """
    import kfp_server_api

    config = kfp_server_api.Configuration(host=host)
    if token:
        config.api_key["authorization"] = token
        config.api_key_prefix["authorization"] = "Bearer"
    try:
        with kfp_server_api.ApiClient(config) as api_client:
            response = kfp_server_api.HealthzServiceApi(api_client).healthz_service_get_healthz(
                _request_timeout=HEALTH_TIMEOUT_S, _preload_content=False)
            body = response.data
            content_type = response.headers.get("Content-Type") or "an unknown content type"
    except api_errors() as err:
        raise describe_api_error(err, host, "checking the KFP API") from None
    try:
        health = json.loads(body)
    except ValueError:
        health = None
    if not isinstance(health, dict):
        # What an authenticating proxy in front of Kubeflow answers (after a
        # redirect) to a request without a valid token: its login page.
        raise KfdistError(
            f"checking the KFP API failed: {host}/apis/v2beta1/healthz answered "
            f"{content_type}, not the KFP API's JSON (a login page? check the token "
            f"and that --host is the KFP API address)")
    return health.get("multi_user") is True


@dataclasses.dataclass(frozen=True)
class RunOutcome:
    """How a run ended, as far as waiting saw.

    Attributes:
      state: The last state seen.
      terminated: Whether the run was terminated (through the API or the UI): KFP 2.17 reports
        such a run CANCELING, then FAILED.
      failed_steps: The display names of the pipeline's steps that FAILED.
    """

    state: str
    terminated: bool = False
    failed_steps: Tuple[str, ...] = ()


def was_terminated(run) -> bool:
    """Whether `run` (a V2beta1Run) was terminated: CANCELED, or CANCELING on its way to its end."""
    return run.state == "CANCELED" or any(
        entry.state in ("CANCELING", "CANCELED") for entry in run.state_history or ())


def failed_steps(run) -> Tuple[str, ...]:
    """The pipeline steps (tasks) of `run` that FAILED, without the run's own DAG nodes: the
    workflow, `root` and each step's `executor` node, which fail with the step they hold."""
    tasks = (run.run_details.task_details or ()) if run.run_details else ()
    workflows = {task.display_name for task in tasks if any(
        (child.pod_name or "").startswith(f"{task.display_name}-")
        for child in task.child_tasks or ())}
    return tuple(sorted({task.display_name for task in tasks if task.state == "FAILED"
                         and task.display_name not in ("root", "executor", *workflows)}))


def settled_run(client, run_id: str, run, poll_interval: float,
                settle_s: float = STEPS_SETTLE_S):
    """`run` (FAILED, no step shown FAILED yet) read again until a step shows FAILED or
    `settle_s` passes; the last read (or `run`, if no read answers)."""
    deadline = time.monotonic() + settle_s
    while time.monotonic() < deadline:
        time.sleep(min(poll_interval, max(0.0, deadline - time.monotonic())))
        try:
            run = client.get_run(run_id)
        except api_errors():
            continue
        if failed_steps(run):
            break
    return run


def wait_for_run(client, run_id: str, initial_state: str, timeout: Optional[float],
                 poll_interval: float, log: Callable[[str], None], host: str) -> RunOutcome:
    """Polls the run until it reaches a terminal state or `timeout` passes.

    Returns the last state seen, and for a finished run whether it was terminated and which
    steps failed.
    """
    start = time.monotonic()
    deadline = None if timeout is None else start + timeout
    state, last_line, errors = initial_state, start, 0
    while True:
        try:
            run = client.get_run(run_id)
            errors = 0
        except api_errors() as err:
            errors += 1
            if not is_transient(err) or errors > MAX_POLL_ERRORS:
                raise describe_api_error(err, host, f"checking run {run_id}") from None
            log(f"run {run_id}: could not check its state ({errors}/{MAX_POLL_ERRORS}): "
                f"{describe_api_error(err, host, 'polling')}")
        else:
            now = time.monotonic()
            new_state = run.state or "RUNTIME_STATE_UNSPECIFIED"
            if new_state != state:
                log(f"run {run_id}: {state} -> {new_state} ({now - start:.0f}s)")
                state, last_line = new_state, now
            elif now - last_line >= HEARTBEAT_S:
                log(f"run {run_id}: still {state} ({now - start:.0f}s)")
                last_line = now
            if state in TERMINAL_STATES:
                if state != "SUCCEEDED" and run.error is not None and run.error.message:
                    log(f"run {run_id}: error: {run.error.message}")
                if state == "FAILED" and not failed_steps(run):
                    run = settled_run(client, run_id, run, poll_interval)
                return RunOutcome(state, was_terminated(run), failed_steps(run))
        now = time.monotonic()
        if deadline is not None and now >= deadline:
            log(f"run {run_id}: timed out after {timeout:g}s waiting; it is {state} "
                "and keeps going on the cluster")
            return RunOutcome(state)
        time.sleep(poll_interval if deadline is None else max(0.0, min(poll_interval,
                                                                       deadline - now)))
