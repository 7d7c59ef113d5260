"""`memoryd mcp`: the agents' MCP server for one agent, over stdio or streamable HTTP.

The SDK and its web stack are imported here, when the command runs, and by no other command.
"""

from __future__ import annotations

from pathlib import Path

import click

from memoryd.commands import CliState, agent_option, pass_state, run_async
from memoryd.constants import MCP_HTTP_DEFAULT_LISTEN


def register(cli: click.Group) -> None:
    @cli.command("mcp")
    @agent_option
    @click.option(
        "--http",
        "use_http",
        is_flag=True,
        help="Serve streamable HTTP at /mcp instead of stdio.",
    )
    @click.option(
        "--listen",
        default=MCP_HTTP_DEFAULT_LISTEN,
        show_default=True,
        metavar="HOST:PORT",
        help="Where --http listens; any address but loopback needs --token-file.",
    )
    @click.option(
        "--token-file",
        type=click.Path(path_type=Path, dir_okay=False),
        default=None,
        help="A file (mode 0600) holding the bearer token every HTTP request must send.",
    )
    @click.option(
        "--participant",
        default=None,
        metavar="ACTOR",
        help="Recall for this participant only (calls may not name another).",
    )
    @pass_state
    def mcp_cmd(
        state: CliState,
        agent_id: str,
        use_http: bool,
        listen: str,
        token_file: Path | None,
        participant: str | None,
    ) -> None:
        """Tools: memory_search, memory_get, memory_forget, memory_read, memory_write. Recall
        follows recall.scope: under "participant" each call names the conversation's
        participant (or the server is started for one with --participant).
        """
        from memoryd.agents_api.server import McpServer
        from memoryd.agents_api.service import AgentsApi
        from memoryd.agents_api.transport import check_http, parse_listen, serve_http, serve_stdio
        from memoryd.errors import UsageError

        if participant is not None and not participant.strip():
            raise UsageError("--participant: must name an actor id, not be empty")
        settings = state.settings
        http = None
        if use_http:
            host, port = parse_listen(listen)
            http = (host, port, check_http(host, token_file))
        elif token_file is not None:
            raise UsageError("--token-file: only with --http (stdio needs no token)")

        async def serve() -> None:
            async with AgentsApi(settings, agent_id, participant) as api:
                server = McpServer(api)
                if http is None:
                    await serve_stdio(server)
                else:
                    await serve_http(server, *http)

        run_async(serve)
