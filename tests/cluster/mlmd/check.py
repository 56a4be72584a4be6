"""Checks the mlmd stand-in server (server.py) with MLMD's own gRPC client.

Run it with the mlmd environment's python (install.sh prints its path):

    python=$(bash tests/cluster/mlmd/install.sh)
    "$python" tests/cluster/mlmd/check.py

It starts the server on a free port with a SQLite file in a temporary directory, then, through
`metadata_store.MetadataStore(MetadataStoreClientConfig(...))`, writes the records a Kubeflow
Pipelines run writes (types, a pipeline-run context, an execution with an output artifact, its
event, association and attribution) and reads them back the ways the driver and launcher do. It
checks that a missing type surfaces as the client's `NotFoundError`, that a method the store
library does not expose answers UNIMPLEMENTED, and that SIGTERM stops the server with status 0.
It prints one line per check and exits non-zero on the first mismatch.
"""

from __future__ import annotations

import selectors
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import grpc
from ml_metadata import errors
from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import (
    metadata_store_pb2 as pb,
    metadata_store_service_pb2 as service_pb,
    metadata_store_service_pb2_grpc as service_grpc,
)

SERVER = Path(__file__).resolve().parent / "server.py"
READY_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 15.0


class Mismatch(AssertionError):
    """A response differs from what the check expects."""


def expect(what: str, actual: Any, expected: Any) -> None:
    """Prints `ok WHAT`, or raises `Mismatch` when `actual` differs from `expected`.

    Args:
        what: What is checked, for the printed line.
        actual: The value read back.
        expected: The value it should be.

    Raises:
        Mismatch: The two differ.
    """
    if actual != expected:
        raise Mismatch(f"{what}: got {actual!r}, expected {expected!r}")
    print(f"ok {what}", flush=True)


def start_server(db: Path, log: Path) -> tuple[subprocess.Popen, int]:
    """Starts server.py on a port of its choosing and waits for its ready line.

    Args:
        db: The SQLite file to serve.
        log: Where the server's stderr goes.

    Returns:
        The server's process and the port it serves on.

    Raises:
        Mismatch: It exited, or printed no ready line in time.
    """
    with open(log, "wb") as stderr:
        process = subprocess.Popen(
            [sys.executable, str(SERVER), "--port", "0", "--host", "127.0.0.1", "--db", str(db),
             "--verbose"],
            stdout=subprocess.PIPE,
            stderr=stderr,
        )
    selector = selectors.DefaultSelector()
    selector.register(process.stdout, selectors.EVENT_READ)
    deadline = time.monotonic() + READY_TIMEOUT_S
    line = b""
    while time.monotonic() < deadline and process.poll() is None:
        if selector.select(timeout=0.5):
            line = process.stdout.readline()
            if line.startswith(b"mlmd: serving on "):
                return process, int(line.split()[-1])
    process.kill()
    process.wait()
    raise Mismatch(f"server not ready (last line {line!r}): {log.read_text()[-2000:]}")


def check(store: metadata_store.MetadataStore, port: int) -> None:
    """Writes a pipeline run's records through the server and reads them back.

    Args:
        store: MLMD's gRPC client, connected to the server.
        port: The server's port, for a raw stub's call.

    Raises:
        Mismatch: A response differs from what was written, or an error from what MLMD answers.
    """
    artifact_type = pb.ArtifactType(name="system.Model")
    artifact_type.properties["framework"] = pb.STRING
    artifact_type_id = store.put_artifact_type(artifact_type)
    execution_type_id = store.put_execution_type(pb.ExecutionType(name="system.ContainerExecution"))
    context_type_id = store.put_context_type(pb.ContextType(name="system.PipelineRun"))
    expect("type ids are distinct", len({artifact_type_id, execution_type_id, context_type_id}), 3)
    expect(
        "put_artifact_type is idempotent",
        store.put_artifact_type(artifact_type),
        artifact_type_id,
    )

    context = pb.Context(type_id=context_type_id, name="run-1")
    context.custom_properties["namespace"].string_value = "team-a"
    [context_id] = store.put_contexts([context])

    execution = pb.Execution(type_id=execution_type_id, last_known_state=pb.Execution.RUNNING)
    execution.custom_properties["task_name"].string_value = "train"
    artifact = pb.Artifact(type_id=artifact_type_id, uri="minio://bucket/run-1/model")
    artifact.properties["framework"].string_value = "tensorflow"
    artifact.custom_properties["accuracy"].double_value = 0.97
    event = pb.Event(type=pb.Event.OUTPUT)
    event.path.steps.add().key = "model"
    stored_context = pb.Context(id=context_id, type_id=context_type_id, name="run-1")
    stored_context.custom_properties["namespace"].string_value = "team-a"
    execution_id, [artifact_id], [put_context_id] = store.put_execution(
        execution, [(artifact, event)], [stored_context]
    )
    expect("put_execution keeps the context's id", put_context_id, context_id)

    contexts = store.get_contexts_by_type("system.PipelineRun")
    expect("get_contexts_by_type ids", [c.id for c in contexts], [context_id])
    expect(
        "context custom property",
        contexts[0].custom_properties["namespace"].string_value,
        "team-a",
    )
    found = store.get_context_by_type_and_name("system.PipelineRun", "run-1")
    expect("get_context_by_type_and_name id", found.id if found else None, context_id)
    expect(
        "get_context_by_type_and_name of a missing name",
        store.get_context_by_type_and_name("system.PipelineRun", "run-2"),
        None,
    )

    executions = store.get_executions_by_context(context_id)
    expect("get_executions_by_context ids (association)", [e.id for e in executions],
           [execution_id])
    expect("execution state", executions[0].last_known_state, pb.Execution.RUNNING)
    expect("execution type", executions[0].type, "system.ContainerExecution")
    expect(
        "execution custom property",
        executions[0].custom_properties["task_name"].string_value,
        "train",
    )

    [read] = store.get_artifacts_by_id([artifact_id])
    expect("artifact uri", read.uri, "minio://bucket/run-1/model")
    expect("artifact property", read.properties["framework"].string_value, "tensorflow")
    expect("artifact custom property", read.custom_properties["accuracy"].double_value, 0.97)
    expect("artifact type", read.type, "system.Model")
    expect(
        "get_artifacts_by_context ids (attribution)",
        [a.id for a in store.get_artifacts_by_context(context_id)],
        [artifact_id],
    )

    events = store.get_events_by_execution_ids([execution_id])
    expect(
        "get_events_by_execution_ids",
        [(e.artifact_id, e.execution_id, e.type, e.path.steps[0].key) for e in events],
        [(artifact_id, execution_id, pb.Event.OUTPUT, "model")],
    )

    execution.id = execution_id
    execution.last_known_state = pb.Execution.COMPLETE
    store.put_execution(execution, [], [stored_context])
    [updated] = store.get_executions_by_id([execution_id])
    expect("put_execution updates the state", updated.last_known_state, pb.Execution.COMPLETE)

    try:
        store.get_artifact_type("system.Missing")
    except errors.NotFoundError as error:
        expect("get_artifact_type of a missing name raises NotFoundError", True, True)
        print(f"   ({error})", flush=True)
    else:
        raise Mismatch("get_artifact_type of a missing name returned a type")

    try:
        store.put_contexts([pb.Context(type_id=context_type_id, name="run-1")])
    except errors.AlreadyExistsError:
        expect("a second context of the same name raises AlreadyExistsError", True, True)
    else:
        raise Mismatch("a second context named run-1 was stored")

    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = service_grpc.MetadataStoreServiceStub(channel)
        try:
            stub.GetLineageGraph(service_pb.GetLineageGraphRequest(), timeout=10)
        except grpc.RpcError as error:
            expect("GetLineageGraph answers UNIMPLEMENTED", error.code(),
                   grpc.StatusCode.UNIMPLEMENTED)
        else:
            raise Mismatch("GetLineageGraph answered")


def main() -> int:
    """Runs the check against a server of its own.

    Returns:
        0 when every check passed, 1 otherwise.
    """
    with tempfile.TemporaryDirectory(prefix="mlmd-check-") as tmp:
        log = Path(tmp) / "server.log"
        started = time.monotonic()
        process, port = start_server(Path(tmp) / "mlmd.sqlite", log)
        print(f"server ready on {port} in {time.monotonic() - started:.1f} s", flush=True)
        failed = None
        try:
            store = metadata_store.MetadataStore(
                pb.MetadataStoreClientConfig(host="127.0.0.1", port=port, client_timeout_sec=30)
            )
            check(store, port)
        except (Mismatch, errors.StatusError) as error:
            failed = f"{type(error).__name__}: {error}"
        finally:
            process.send_signal(signal.SIGTERM)
            try:
                status = process.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                status = process.wait()
                failed = failed or "the server did not stop on SIGTERM"
        if failed is None:
            try:
                expect("SIGTERM stops the server with status 0", status, 0)
            except Mismatch as error:
                failed = str(error)
        requests = sum(" mlmd DEBUG " in line for line in log.read_text().splitlines())
        print(f"server logged {requests} requests", flush=True)
        if failed:
            print(f"FAILED {failed}\nserver log:\n{log.read_text()[-4000:]}", file=sys.stderr)
            return 1
    print("mlmd check passed", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
