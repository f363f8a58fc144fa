"""MCP servers that hand agents their memory over stdio, on the official `mcp` SDK.

`scratchpad_server` serves an agent's scratchpad as the `animus.memory.*` tools;
`binding_server` serves one memory binding's store (query, get, and put when the binding
allows writes), egress-safe and audited. `animus mcp scratchpad` and `animus mcp binding` run
them; the hooks add them to the runtime contract's `mcp_servers`.
"""
