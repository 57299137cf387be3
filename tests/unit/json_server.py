"""A loopback JSON server for unit tests of HTTP clients: one route function answers every
GET (``None``: 404), on a free port of 127.0.0.1, for as long as the context is open."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

#: (path, query parameters) → the JSON body to answer, or None for a 404
Route = Callable[[str, dict[str, list[str]]], Any]


class JsonServer:
    """``with JsonServer(route) as server: client(server.url)``."""

    def __init__(self, route: Route) -> None:
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                url = urlsplit(self.path)
                body = route(url.path, parse_qs(url.query))
                if body is None:
                    self.send_error(404)
                    return
                raw = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> JsonServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
