"""How `memoryd mcp` is reached: stdio (an agent host starts it), or streamable HTTP.

HTTP listens on loopback unless told otherwise; on any other address a bearer token, read from
a file only its owner can read, is required of every request (compared in constant time).
"""

from __future__ import annotations

import hmac
import ipaddress
import socket
import stat
import sys
from pathlib import Path
from typing import Any

from memoryd.agents_api.server import McpServer
from memoryd.errors import UsageError

MCP_PATH = "/mcp"


def parse_listen(value: str) -> tuple[str, int]:
    """'host:port' (IPv6 as '[::1]:8765') → (host, port)."""
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not host or int(port) > 65535:
        raise UsageError(f"--listen: expected HOST:PORT (e.g. 127.0.0.1:8765), got {value!r}")
    return host.strip("[]"), int(port)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a name other than localhost may resolve anywhere


def read_token(path: Path) -> bytes:
    """The bearer token in `path`: one line, the file readable by its owner only."""
    try:
        info = path.stat()
        data = path.read_bytes()
    except OSError as exc:
        raise UsageError(f"--token-file: cannot read {path}: {exc.strerror}") from None
    if info.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise UsageError(
            f"--token-file: {path} is readable by others (mode {stat.S_IMODE(info.st_mode):04o}); chmod 600 it"
        )
    token = data.strip()
    if len(token) < 16 or b"\n" in token:
        raise UsageError(f"--token-file: {path} must hold one token of at least 16 characters")
    return token


def check_http(host: str, token_file: Path | None) -> bytes | None:
    """The token the server requires, or None on loopback without one; UsageError otherwise."""
    if token_file is not None:
        return read_token(token_file)
    if not is_loopback(host):
        raise UsageError(
            f"--listen: {host} is not a loopback address: give --token-file FILE, the bearer "
            "token every client must send"
        )
    return None


class BearerGuard:
    """ASGI: every HTTP request must carry `Authorization: Bearer <token>`, else 401."""

    def __init__(self, app: Any, token: bytes):
        self.app = app
        self.expected = b"Bearer " + token

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            given = next((v for k, v in scope["headers"] if k == b"authorization"), b"")
            if not hmac.compare_digest(given, self.expected):
                body = b"memoryd mcp: missing or wrong bearer token (Authorization: Bearer <token>)\n"
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [
                            (b"content-type", b"text/plain; charset=utf-8"),
                            (b"www-authenticate", b'Bearer realm="memoryd"'),
                            (b"content-length", str(len(body)).encode()),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


async def serve_stdio(mcp: McpServer) -> None:
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read, write):
        await mcp.server.run(read, write, mcp.server.create_initialization_options())


async def serve_http(mcp: McpServer, host: str, port: int, token: bytes | None) -> None:
    """Serve until cancelled; says where on stderr once listening (port 0 picks a free one)."""
    import uvicorn

    app: Any = mcp.server.streamable_http_app(streamable_http_path=MCP_PATH, host=host)
    if token is not None:
        app = BearerGuard(app, token)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise UsageError(f"--listen: cannot listen on {host}:{port}: {exc.strerror}") from None
    sock.listen(128)
    sock.set_inheritable(False)
    bound = sock.getsockname()[1]
    shown = f"[{host}]" if family == socket.AF_INET6 else host
    config = uvicorn.Config(app, log_level="warning", lifespan="on", access_log=False)
    server = uvicorn.Server(config)
    print(f"memoryd mcp: listening on http://{shown}:{bound}{MCP_PATH}", file=sys.stderr, flush=True)
    try:
        await server.serve(sockets=[sock])
    finally:
        sock.close()
