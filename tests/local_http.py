"""A JSON endpoint on 127.0.0.1 (an ephemeral port) standing in for an external HTTP API (a
model or an embedding provider): `answer(request)` returns the status and the JSON to send."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Request:
    path: str
    headers: dict[str, str]
    body: Any  # the decoded JSON


Answer = Callable[[Request], tuple[int, Any]]  # (status, JSON to send, or None for no body)


class JsonEndpoint:
    def __init__(self, answer: Answer):
        self.requests: list[Request] = []
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                request = Request(self.path, dict(self.headers), body)
                endpoint.requests.append(request)
                status, payload = answer(request)
                self.send_response(status)
                if payload is None:
                    self.end_headers()
                    return
                data = json.dumps(payload).encode()
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        # A short poll: shutdown() returns within it (the default 0.5 s would end every test late).
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> JsonEndpoint:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(5)
