"""The HTTP plumbing the fake servers share: a threaded server whose requests go to one function."""

from __future__ import annotations

import http.server
import socketserver
import threading
from typing import Callable, Optional, Union

Dispatch = Callable[[http.server.BaseHTTPRequestHandler, str], None]


class _UnixHTTPServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


def serve(dispatch: Dispatch, unix_socket: Optional[str] = None
          ) -> Union[http.server.ThreadingHTTPServer, _UnixHTTPServer]:
    """Starts serving HTTP/1.1 on a free localhost port (or `unix_socket`) in a daemon thread.

    Args:
      dispatch: Called with the request handler and the method (GET, POST, PUT, DELETE) of each
        request; it reads the request and writes the whole response.
      unix_socket: Serve this unix socket instead of a port.

    Returns:
      The server; `shutdown()` and `server_close()` it when done.
    """

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):  # keep test output quiet
            pass

        def do_GET(self):
            dispatch(self, "GET")

        def do_POST(self):
            dispatch(self, "POST")

        def do_PUT(self):
            dispatch(self, "PUT")

        def do_DELETE(self):
            dispatch(self, "DELETE")

    if unix_socket:
        httpd = _UnixHTTPServer(unix_socket, Handler)
    else:
        httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05},
                     daemon=True).start()
    return httpd
