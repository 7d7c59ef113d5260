"""The agents' way in: `memoryd mcp`, an MCP server (the official `mcp` SDK) whose tools are
memory_search, memory_get, memory_forget, memory_read and memory_write.

Imported only by `memoryd mcp` (daemon/commands/mcp.py): the SDK and its web stack stay out of
every other command's start-up.
"""
