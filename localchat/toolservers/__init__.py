"""Tool servers (the Model Context Protocol): their list in mcp.json and the connections to them.

Pure Python under the services layer, no Qt: the GUI's ``services.McpService`` wraps it.

- ``config``: mcp.json (the format LM Studio, Claude Desktop and Cursor share), read and written,
  a malformed file set aside.
- ``imports``: where LM Studio and Claude Desktop keep theirs, for Settings → Tools → Import.
- ``hub``: ``ToolHub``, the servers' connections on an asyncio loop in a thread of its own (the
  official ``mcp`` SDK's Client, over stdio or streamable HTTP): start when needed, list tools,
  call, time out, cancel, stop; every fault a sentence.
- ``stdio_pipe`` and ``framing``: the stdio transport, reading a server's output in linear time
  and cutting a message too long to keep.
- ``tools``: a tool's schema checked before it is offered, a result turned into text and capped.
"""
