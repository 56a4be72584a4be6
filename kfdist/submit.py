"""`kfdist submit`: runs a compiled pipeline on a Kubeflow Pipelines cluster.

    kfdist submit pipelines/mnist.yaml --host https://kfp.example.com/pipeline \\
        --param source_uri=gs://bucket/mnist --param export_base=gs://bucket/serving \\
        --param workers=4 --experiment ci --wait --timeout 3600

Made for CI: every input is checked *before* any request reaches the cluster
(the file is a compiled KFP pipeline spec, every `--param` names a declared
pipeline input and parses to its declared type, every required input is
given), then the run is created through `kfp.Client` and, with `--wait`,
followed until it finishes.

Output: progress lines (the run id and UI link as soon as the run exists, each
state change, the final state) go to stderr; one JSON object
`{"run_id", "state", "url"}` goes to stdout at the end.

Exit status:
  0  the run was created (without --wait) or SUCCEEDED (with --wait)
  1  the run ended FAILED, CANCELED or SKIPPED; or the cluster refused a request
  2  invalid input (nothing was sent to the cluster)
  3  --timeout passed before the run finished (the run keeps going)

Authentication: `--existing-token`, else the `KF_PIPELINES_TOKEN` environment
variable, is sent as `Authorization: Bearer <token>` (prefer the variable: a
command-line argument shows in process listings). The UI link is built from
`KF_PIPELINES_UI_ENDPOINT` when set, else from `--host`.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import logging
import os
import sys
import urllib.parse
from typing import Any, Callable, Dict, Mapping, Optional, Tuple


from kfdist.components.common.errors import InvalidInputError, KfdistError
from kfdist.kfp_run_api import (DEFAULT_POLL_INTERVAL_S, TERMINAL_STATES, TOKEN_ENV, api_errors,
                                check_health, describe_api_error, wait_for_run)
from kfdist.pipeline_params import (  # noqa: F401  (re-exported: part of this command's API)
    PipelineInput, load_pipeline_spec, parse_param_args, parse_param_value, pipeline_inputs,
    resolve_arguments)

#: Environment variable kfp.Client reads for the UI address (default: the host).
UI_ENDPOINT_ENV = "KF_PIPELINES_UI_ENDPOINT"

EXIT_SUCCEEDED = 0
EXIT_RUN_FAILED = 1
EXIT_INVALID_INPUT = 2
EXIT_TIMEOUT = 3


_logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class SubmitResult:
    """What `submit_pipeline` did.

    Attributes:
      run_id: The id of the created run.
      state: The last state seen: the state at creation without `wait`, the
        final state (SUCCEEDED, FAILED, CANCELED, SKIPPED) after waiting, or the
        state when the timeout passed.
      url: The run's page in the Kubeflow Pipelines UI.
      terminated: After waiting, whether the run was terminated (KFP 2.17 then reports it
        FAILED, having reported it CANCELING).
      failed_steps: After waiting, the display names of the steps that FAILED.
    """

    run_id: str
    state: str
    url: str
    terminated: bool = False
    failed_steps: Tuple[str, ...] = ()

    @property
    def finished(self) -> bool:
        """Whether `state` is terminal."""
        return self.state in TERMINAL_STATES

    @property
    def succeeded(self) -> bool:
        """Whether the run SUCCEEDED."""
        return self.state == "SUCCEEDED"


def _check_host(host: str) -> str:
    parts = urllib.parse.urlsplit(host or "")
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise InvalidInputError(
            f"--host must be the KFP API address as an http:// or https:// URL "
            f"(such as https://kubeflow.example.com/pipeline); got {host!r}")
    return host.rstrip("/")


def _check_optional_name(flag: str, value: Optional[str]) -> Optional[str]:
    if value is not None and not value.strip():
        raise InvalidInputError(f"{flag} must not be empty")
    return value


def _check_waiting(timeout: Optional[float], poll_interval: float) -> None:
    if timeout is not None and not (timeout > 0):
        raise InvalidInputError(f"--timeout must be a positive number of seconds; got {timeout}")
    if not (poll_interval > 0):
        raise InvalidInputError(f"--poll-interval must be positive; got {poll_interval}")


# --------------------------------------------------------------------------- talking to KFP


def submit_pipeline(
    package_path: str,
    host: str,
    params: Optional[Mapping[str, Any]] = None,
    experiment: Optional[str] = None,
    run_name: Optional[str] = None,
    namespace: Optional[str] = None,
    wait: bool = False,
    timeout: Optional[float] = None,
    token: Optional[str] = None,
    log: Optional[Callable[[str], None]] = None,
    *,
    poll_interval: float = DEFAULT_POLL_INTERVAL_S,
) -> SubmitResult:
    """Creates a run of a compiled pipeline on Kubeflow Pipelines.

    Everything is validated before the first request. Then the experiment is
    looked up by name and created when missing, the run is created from the
    package, and, with `wait`, polled until it finishes or `timeout` passes.

    Args:
      package_path: A compiled pipeline YAML (`kfdist compile`).
      host: The KFP API address, such as `https://kubeflow.example.com/pipeline`.
      params: Pipeline arguments by name: command-line strings (parsed to the
        declared types) or Python values of the declared types.
      experiment: Experiment name (default: kfp's, `Default`).
      run_name: Run name (default: kfp's, the file name and the time).
      namespace: Kubernetes namespace of a multi-user deployment.
      wait: Whether to wait until the run finishes.
      timeout: Seconds to wait at most (None: no limit); only with `wait`.
      token: Bearer token for the API (None: no Authorization header).
      log: Receives one progress line at a time (default: this module's logger).
      poll_interval: Seconds between polls while waiting.

    Returns:
      A SubmitResult. After waiting, `finished` is False when the timeout
      passed; `succeeded` tells whether the run SUCCEEDED.

    Raises:
      InvalidInputError: On invalid input; nothing has been sent then.
      KfdistError: When the cluster cannot be reached or refuses a request.
    """
    log = log or _logger.info
    host = _check_host(host)
    arguments = resolve_arguments(load_pipeline_spec(package_path), params or {})
    experiment = _check_optional_name("--experiment", experiment)
    run_name = _check_optional_name("--run-name", run_name)
    namespace = _check_optional_name("--namespace", namespace)
    _check_waiting(timeout, poll_interval)

    import kfp

    multi_user = check_health(host, token)
    client_kwargs: Dict[str, Any] = {"host": host, "existing_token": token or None}
    if namespace:
        client_kwargs["namespace"] = namespace
    log(f"submitting {package_path} to {host}"
        + (f" (experiment {experiment})" if experiment else ""))
    # kfp.Client prints its own "Experiment details"/"Run details" lines: keep
    # stdout for our result.
    with contextlib.redirect_stdout(sys.stderr):
        try:
            client = kfp.Client(**client_kwargs)
            created = client.create_run_from_pipeline_package(
                package_path, arguments=arguments, run_name=run_name,
                experiment_name=experiment, namespace=namespace)
        except api_errors() as err:
            error = describe_api_error(err, host, "submitting the run")
            if multi_user and not namespace:
                error = KfdistError(f"{error} (the deployment is multi-user: pass --namespace)")
            raise error from None
    run_id = created.run_id
    ui_base = (os.environ.get(UI_ENDPOINT_ENV) or host).rstrip("/")
    url = f"{ui_base}/#/runs/details/{run_id}"
    state = created.run_info.state or "RUNTIME_STATE_UNSPECIFIED"
    log(f"run {run_id} created ({state}): {url}")
    if not wait:
        return SubmitResult(run_id=run_id, state=state, url=url)
    outcome = wait_for_run(client, run_id, state, timeout, poll_interval, log, host)
    log(f"run {run_id} finished: {outcome.state}" if outcome.state in TERMINAL_STATES
        else f"run {run_id} did not finish in time: {outcome.state}")
    if outcome.failed_steps:
        log(f"run {run_id}: failed steps: {', '.join(outcome.failed_steps)} (each step's log is "
            f"on the run's page)")
    return SubmitResult(run_id=run_id, url=url, **dataclasses.asdict(outcome))


# --------------------------------------------------------------------------- command line


def add_submit_parser(subparsers) -> argparse.ArgumentParser:
    """Adds the `submit` command to the `kfdist` subparsers; returns its parser."""
    p = subparsers.add_parser(
        "submit", help="run a compiled pipeline on a Kubeflow Pipelines cluster (for CI)",
        description="Run a compiled pipeline on a Kubeflow Pipelines cluster and, with "
                    "--wait, follow it to the end.",
        epilog="Exit status: 0 created or SUCCEEDED, 1 the run FAILED/was CANCELED/SKIPPED "
               "or the cluster refused a request, 2 invalid input, 3 --timeout passed.")
    p.add_argument("package", metavar="PIPELINE.yaml", help="compiled pipeline (kfdist compile)")
    p.add_argument("--host", required=True,
                   help="KFP API address, such as https://kubeflow.example.com/pipeline")
    p.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                   help="pipeline argument; repeat for several (parsed to the declared type)")
    p.add_argument("--experiment", default=None, help="experiment name (created when missing)")
    p.add_argument("--run-name", default=None, help="run name (default: file name and time)")
    p.add_argument("--namespace", default=None,
                   help="Kubernetes namespace (multi-user deployments)")
    p.add_argument("--wait", action="store_true",
                   help="wait for the run to finish; exit non-zero unless it SUCCEEDED")
    p.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                   help="with --wait: give up waiting after this long (exit 3); default: no limit")
    p.add_argument("--poll-interval", type=float, default=DEFAULT_POLL_INTERVAL_S,
                   metavar="SECONDS", help="with --wait: seconds between polls "
                                           "(default: %(default)s)")
    from kfdist.cli import add_image_flags

    add_image_flags(p)
    p.add_argument("--existing-token", default=None, metavar="TOKEN",
                   help=f"bearer token for the API (default: ${TOKEN_ENV}; prefer the variable)")
    p.set_defaults(func=_cmd_submit)
    return p


def _retargeted_copy(package: str, registry: str, tag: Optional[str]) -> str:
    """A copy of `package` whose kfdist images are `registry`'s (a temporary file, kept until
    the process ends, named as the package so the run's pipeline keeps its name)."""
    import atexit
    import shutil
    import tempfile

    from kfdist.images import retarget_pipeline

    try:
        with open(package) as f:
            text = retarget_pipeline(f.read(), registry, tag)
    except OSError as err:
        raise InvalidInputError(f"cannot read the pipeline {package!r}: {err.strerror}") from None
    folder = tempfile.mkdtemp(prefix="kfdist-submit-")
    atexit.register(shutil.rmtree, folder, True)
    path = os.path.join(folder, os.path.basename(package))
    with open(path, "w") as f:
        f.write(text)
    return path


def _cmd_submit(args) -> int:
    from kfdist.cli import image_target

    def log(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    params = parse_param_args(args.param)
    token = args.existing_token or os.environ.get(TOKEN_ENV) or None
    if args.timeout is not None and not args.wait:
        raise InvalidInputError("--timeout only applies with --wait")
    package = args.package
    target = image_target(args)
    if target is not None:
        package = _retargeted_copy(args.package, *target)
    result = submit_pipeline(
        package, args.host, params, experiment=args.experiment, run_name=args.run_name,
        namespace=args.namespace, wait=args.wait, timeout=args.timeout, token=token, log=log,
        poll_interval=args.poll_interval)
    print(json.dumps(dataclasses.asdict(result), sort_keys=True), flush=True)
    if not args.wait or result.succeeded:
        return EXIT_SUCCEEDED
    if not result.finished:
        return EXIT_TIMEOUT
    ended = (f"was terminated (it ended {result.state})" if result.terminated else
             f"ended {result.state}")
    print(f"kfdist: error: run {result.run_id} {ended}: {result.url}", file=sys.stderr)
    return EXIT_RUN_FAILED
