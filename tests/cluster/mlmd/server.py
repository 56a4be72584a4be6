"""A stand-in for `ml_metadata_store_server`, MLMD's gRPC server, for the cluster test bed.

Kubeflow Pipelines' driver and launcher record every run's contexts, executions, artifacts and
events through MLMD's gRPC service, `ml_metadata.MetadataStoreService`. MLMD's own server is a
C++ binary that is not published on PyPI (it ships in the
`gcr.io/tfx-oss-public/ml_metadata_store_server` image, which Kubeflow Pipelines 2.17's manifests
run at 1.14.0); the `ml-metadata` wheel holds the same store library, compiled into its Python
extension (1.17.1 here: PyPI has no 1.14.0 wheel for CPython 3.11). This server serves the
service's methods over gRPC and hands each request to that library the way the wheel's
`MetadataStore` calls it when given a database `ConnectionConfig`: the request goes in as its
serialized message, and the response or an absl status (whose codes are gRPC's) comes back.
The store, its schema, its queries and its errors are therefore MLMD's own; only the gRPC front
is this file's.

Every method of the service descriptor is served. The few the wheel's extension does not expose
(`GetParentContextsByContexts`, `GetChildrenContextsByContexts`, `GetLineageGraph`; none of them
is called by Kubeflow Pipelines) answer UNIMPLEMENTED. Requests run one at a time on one
connection, as the store's transactions are not made for concurrent use of one connection.

    python server.py --port 8080 --db /tmp/mlmd.sqlite
    python server.py --port 8080 --db postgresql://user:password@host:5432/metadb
    python server.py --port 8080 --db mysql://user:password@host:3306/metadb

It prints `mlmd: serving on PORT` once it accepts requests (`--port 0` picks a free port, the one
printed), logs one line per request with `--verbose`, and stops on SIGTERM or SIGINT, letting the
requests under way finish.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
import time
import urllib.parse
from concurrent import futures
from typing import Callable

import grpc
from google.protobuf import message_factory
from ml_metadata import errors
from ml_metadata.metadata_store import metadata_store
from ml_metadata.metadata_store.pywrap.metadata_store_extension import (
    metadata_store as extension,
)
from ml_metadata.proto import metadata_store_pb2, metadata_store_service_pb2

SERVICE = "ml_metadata.MetadataStoreService"
# Kubeflow Pipelines' client sends and accepts messages of up to 100 MiB.
MAX_MESSAGE_BYTES = 100 * 1024 * 1024
STOP_GRACE_S = 5.0

log = logging.getLogger("mlmd")

_STATUS_BY_CODE = {code.value[0]: code for code in grpc.StatusCode}


def connection_config(db: str) -> metadata_store_pb2.ConnectionConfig:
    """The store's `ConnectionConfig` for `--db`.

    Args:
        db: A SQLite file's path (created when missing), or a `postgresql://` or `mysql://` URL
            (`SCHEME://USER:PASSWORD@HOST:PORT/DATABASE`; the database is created when missing).

    Returns:
        The connection configuration the store library opens its database with.
    """
    config = metadata_store_pb2.ConnectionConfig()
    url = urllib.parse.urlsplit(db)
    scheme = url.scheme.lower()
    if scheme in ("postgresql", "postgres"):
        postgres = config.postgresql
        postgres.host = url.hostname or "localhost"
        postgres.port = str(url.port or 5432)
        postgres.user = urllib.parse.unquote(url.username or "")
        postgres.password = urllib.parse.unquote(url.password or "")
        postgres.dbname = url.path.lstrip("/") or "metadb"
    elif scheme == "mysql":
        mysql = config.mysql
        mysql.host = url.hostname or "localhost"
        mysql.port = url.port or 3306
        mysql.user = urllib.parse.unquote(url.username or "")
        mysql.password = urllib.parse.unquote(url.password or "")
        mysql.database = url.path.lstrip("/") or "metadb"
    else:
        config.sqlite.filename_uri = db
        config.sqlite.connection_mode = (
            metadata_store_pb2.SqliteMetadataSourceConfig.READWRITE_OPENCREATE
        )
    return config


class Servicer:
    """Serves `MetadataStoreService` by calling the MLMD store library, one request at a time.

    Args:
        store: A `MetadataStore` opened with a database `ConnectionConfig`.
    """

    def __init__(self, store: metadata_store.MetadataStore):
        self._store = store
        self._lock = threading.Lock()

    def handler(self) -> grpc.GenericRpcHandler:
        """A handler for every method of the service, built from its descriptor.

        Returns:
            The generic handler to add to a `grpc.Server`.
        """
        service = metadata_store_service_pb2.DESCRIPTOR.services_by_name[
            SERVICE.rsplit(".", 1)[1]
        ]
        handlers = {}
        for method in service.methods:
            request_class = message_factory.GetMessageClass(method.input_type)
            response_class = message_factory.GetMessageClass(method.output_type)
            if hasattr(extension, method.name):
                behavior = self._calling(method.name, response_class)
            else:
                behavior = self._unimplemented(method.name)
            handlers[method.name] = grpc.unary_unary_rpc_method_handler(
                behavior,
                request_deserializer=request_class.FromString,
                response_serializer=response_class.SerializeToString,
            )
        return grpc.method_handlers_generic_handler(SERVICE, handlers)

    def _calling(self, name: str, response_class: type) -> Callable:
        """The behavior of a method the store library implements.

        Args:
            name: The method's name, also the library's function's.
            response_class: The method's response message class.

        Returns:
            A gRPC unary-unary behavior: it answers the store's response, or aborts with the
            store's status code and message.
        """

        def behavior(request, context: grpc.ServicerContext):
            response = response_class()
            started = time.monotonic()
            try:
                with self._lock:
                    # The library's dispatch for a database connection: the extension's function
                    # of this name, on the serialized request; a failed status raises its error.
                    self._store._call_method(name, request, response)
            except errors.StatusError as error:
                code = _STATUS_BY_CODE.get(error.error_code, grpc.StatusCode.UNKNOWN)
                log.debug("%s %s %.1f ms: %s", name, code.name, _ms(started), error.message)
                context.abort(code, error.message)
            except Exception as error:  # noqa: BLE001 - any other failure is the server's
                log.exception("%s failed", name)
                context.abort(grpc.StatusCode.INTERNAL, f"{type(error).__name__}: {error}")
            log.debug("%s OK %.1f ms", name, _ms(started))
            return response

        return behavior

    @staticmethod
    def _unimplemented(name: str) -> Callable:
        """The behavior of a method the store library does not expose.

        Args:
            name: The method's name.

        Returns:
            A gRPC unary-unary behavior that aborts with UNIMPLEMENTED.
        """

        def behavior(request, context: grpc.ServicerContext):
            del request
            log.debug("%s UNIMPLEMENTED", name)
            context.abort(
                grpc.StatusCode.UNIMPLEMENTED,
                f"{name} is not served: the ml-metadata wheel's store library does not expose it",
            )

        return behavior


def _ms(started: float) -> float:
    """The milliseconds since a moment.

    Args:
        started: The moment, a `time.monotonic()` reading.

    Returns:
        The milliseconds elapsed since.
    """
    return (time.monotonic() - started) * 1000.0


def serve(args: argparse.Namespace) -> int:
    """Opens the store, serves it until SIGTERM or SIGINT, and stops.

    Args:
        args: The parsed command line.

    Returns:
        The exit status: 0 after a clean stop.
    """
    config = connection_config(args.db)
    store = metadata_store.MetadataStore(
        config, enable_upgrade_migration=args.enable_database_upgrade
    )
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=args.workers),
        options=[
            ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
            ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
        ],
    )
    server.add_generic_rpc_handlers((Servicer(store).handler(),))
    port = server.add_insecure_port(f"{args.host}:{args.port}")
    if port == 0:
        print(f"mlmd: cannot listen on {args.host}:{args.port}", file=sys.stderr)
        return 1

    stopping = threading.Event()

    def on_signal(signum, frame):
        del frame
        log.info("mlmd: %s, stopping", signal.Signals(signum).name)
        stopping.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    server.start()
    print(f"mlmd: serving on {port}", flush=True)
    while not stopping.wait(1.0):
        pass
    server.stop(STOP_GRACE_S).wait()
    return 0


def main(argv=None) -> int:
    """Parses the command line and serves.

    Args:
        argv: The arguments, without the program's name; `sys.argv[1:]` when None.

    Returns:
        The exit status.
    """
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--port", type=int, required=True, help="the gRPC port; 0 picks one")
    parser.add_argument("--host", default="0.0.0.0", help="the address to listen on")
    parser.add_argument(
        "--db",
        required=True,
        help="a SQLite file, or a postgresql:// or mysql:// URL (USER:PASSWORD@HOST:PORT/DB)",
    )
    parser.add_argument(
        "--enable-database-upgrade",
        action="store_true",
        help="migrate a database of an older MLMD schema to this library's",
    )
    parser.add_argument("--workers", type=int, default=4, help="gRPC worker threads")
    parser.add_argument("--verbose", action="store_true", help="log one line per request")
    args = parser.parse_args(argv)
    logging.basicConfig(
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
        level=logging.WARNING,
        stream=sys.stderr,
    )
    # Only this server's logger goes to debug: the library's debug lines include the connection
    # configuration, password and all.
    log.setLevel(logging.DEBUG if args.verbose else logging.INFO)
    return serve(args)


if __name__ == "__main__":
    sys.exit(main())
