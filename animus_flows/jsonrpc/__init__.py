"""The animus-memory-store-protocol on the wire: JSON-RPC 2.0, one message per line on stdio.

`codec` is pure protocol code (framing, params, results, error codes) shared by both ends;
`server` serves any store as a plugin process (`animus memory serve`). The host end, the
`jsonrpc` store type, lives in `animus_flows.stores.jsonrpc`. The spec is docs/protocol.md.
"""
