"""Runs gcp-storage-emulator with a threaded HTTP server (the tests' GCS emulator process).

The emulator serves with `http.server.HTTPServer`: one connection at a time
and a listen backlog of 5. Cluster-job tests have several replicas, the
step and an evaluator talking to it at once; a burst of connections
overflowed the backlog and a replica's connect timed out after 60 s. A
threaded server with a larger backlog serves them concurrently; the
emulator's own code is unchanged.

    python tests/gcs_emulator_server.py start --host=127.0.0.1 --port=PORT --in-memory
"""

from __future__ import annotations

import http.server
import sys


class _ThreadedServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128


http.server.HTTPServer = _ThreadedServer  # read by gcp_storage_emulator.server when it starts

if __name__ == "__main__":
    from gcp_storage_emulator.__main__ import main

    sys.exit(main(sys.argv[1:]))
