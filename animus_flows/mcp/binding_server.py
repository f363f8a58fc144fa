"""`animus mcp binding`: one memory binding's store, served to an agent over MCP.

For bindings with `query_strategy: none` the agent asks the store itself instead of getting
memories injected. The server is pinned to one binding (found by plugin and label in the
workflow file) and one scope. It offers `animus.binding.query` and `animus.binding.get` when
the binding reads and `animus.binding.put` only when it has `write: true`. What it returns is
egress-safe (PUBLIC items only, within the binding's tiers and memory types, the same rules as
injection), every call is audited like the hook's, and every put is redacted first.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field, ValidationError

from animus_flows.config.models import WorkflowFile
from animus_flows.config.paths import runtime_root
from animus_flows.errors import (
    AnimusError,
    ConfigError,
)
from animus_flows.hooks.mcp_servers import binding_server_name
from animus_flows.mcp.binding_service import (
    MCP_TOP_K,
    AuditContext,
    AuditedOp,
    BindingService,
    GetAnswer,
    PutAnswer,
    QueryAnswer,
    find_binding,
)
from animus_flows.mcp.serving import check_tool_names, log_to_stderr, tool_name
from animus_flows.protocol import Scope
from animus_flows.redaction import get_logger, redact
from animus_flows.retrieval.audit import AuditTrail, JsonlSink, LoggerSink
from animus_flows.stores.registry import PluginRegistry, blocks_wanted

TOOL_QUERY = "animus.binding.query"
TOOL_GET = "animus.binding.get"
TOOL_PUT = "animus.binding.put"

logger = get_logger("animus_flows.mcp.binding")
audit_logger = get_logger("animus_flows.audit")
T = TypeVar("T")


# -- the MCP surface -------------------------------------------------------------------------

QueryText = Annotated[str, Field(description="What to look for, in plain words.")]
TopK = Annotated[int | None, Field(None, ge=1, description="Most hits to return.")]
Key = Annotated[str, Field(description="The item's key, e.g. 'fx/eur-usd-range'.")]
Value = Annotated[
    str | dict[str, Any],
    Field(description='The value: plain text, or a JSON object whose "content" is searched.'),
]
Metadata = Annotated[
    dict[str, Any] | None,
    Field(
        None,
        description=(
            "Optional labels: memory_type (semantic, episodic, procedural, ...), "
            "tier (hot, warm, cold), tags (a list), sensitivity (public unless set)."
        ),
    ),
]
Ttl = Annotated[
    int | None, Field(None, ge=1, description="Forget the item after this many seconds.")
]


def audit_path(workflow: WorkflowFile) -> Path:
    """The YAML's `audit.path`, else `.animus/audit.jsonl` under the runtime root."""
    if workflow.audit.path:
        return workflow.resolve_path(workflow.audit.path)
    return runtime_root(workflow) / "audit.jsonl"


async def _answer(call: Callable[[], Awaitable[T]]) -> T:
    try:
        return await call()
    except AnimusError as exc:
        raise ToolError(redact(str(exc)).text) from None


class _AuditedServer(MCPServer):
    """An MCP server that also audits the calls the SDK refuses before a tool runs: a tool the
    binding does not offer (`put` on a read-only binding), or arguments that fail the tool's
    schema. Every call of a memory tool then leaves one audit line, as the tools' own do."""

    def __init__(self, service: BindingService, ops: dict[str, str], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.service = service
        self.ops = ops  # tool name -> audit op, for every tool a binding can have

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            op = self.ops.get(name)
            if op is not None and self._tool_manager.get_tool(name) is None:
                gate = "write: false" if op == "put" else "read: false"
                AuditedOp(self.service, op, 0).done(0, None, [f"binding has {gate}"], "denied")
            elif op is not None and isinstance(exc.__cause__, ValidationError):
                # field names only: the refused values are the agent's data
                fields = sorted({".".join(map(str, e["loc"])) for e in exc.__cause__.errors()})
                AuditedOp(self.service, op, 0).done(
                    0, None, [f"arguments refused: {', '.join(fields)}"], "error"
                )
            raise


def build_binding_server(service: BindingService, tool_names: str = "dotted") -> MCPServer:
    """The MCP server of one binding: query and get when it reads, put when it writes.

    `tool_names="underscored"` serves `animus_binding_query`, ... instead.
    """
    binding, scope = service.binding, service.scope
    about = f"memory binding {binding.binding!r} (store {binding.plugin!r}, scope {scope})"
    query_name, get_name, put_name = (
        tool_name(t, tool_names) for t in (TOOL_QUERY, TOOL_GET, TOOL_PUT)
    )
    tools = [query_name, get_name] if binding.read else []
    tools += [put_name] if binding.write else []
    server = _AuditedServer(
        service,
        {query_name: "query", get_name: "get", put_name: "put"},
        name=binding_server_name(binding.binding),
        title=f"Memory: {binding.binding}",
        instructions=(
            f"The {about}. Nothing from it is in your prompt: search it when you need it. "
            f"Tools: {', '.join(tools)}. Only public items are ever returned."
            + ("" if binding.write else " It is read-only.")
        ),
    )
    if binding.read:

        @server.tool(
            name=query_name,
            title=f"Search {binding.binding}",
            description=(
                f"Search the {about} for what you need; returns up to "
                f"{binding.top_k or MCP_TOP_K} hits, best first, each with key, value, score "
                "in [0, 1] and metadata. An empty text lists the newest items. Only public "
                "items are returned."
            ),
            annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False),
        )
        async def query(text: QueryText, top_k: TopK = None) -> QueryAnswer:
            return await _answer(lambda: service.query(text, top_k))

        @server.tool(
            name=get_name,
            title=f"Get from {binding.binding}",
            description=(
                f"Fetch one item of the {about} by its exact key (from a search hit or a put). "
                "found is false when there is no such item you may see."
            ),
            annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False),
        )
        async def get(key: Key) -> GetAnswer:
            return await _answer(lambda: service.get(key))

    if binding.write:

        @server.tool(
            name=put_name,
            title=f"Store in {binding.binding}",
            description=(
                f"Store a memory in the {about} under `key`, replacing what the key held. "
                "Secrets (API keys, passwords, tokens) are replaced by [REDACTED:...] markers "
                "before anything is stored; `redacted` counts them. A key holding a secret is "
                "refused: keys are stored as written."
            ),
            annotations=ToolAnnotations(
                read_only_hint=False, destructive_hint=True, idempotent_hint=True
            ),
        )
        async def put(
            key: Key, value: Value, metadata: Metadata = None, ttl_seconds: Ttl = None
        ) -> PutAnswer:
            return await _answer(lambda: service.put(key, value, metadata, ttl_seconds))

    return server


def serve_binding(
    workflow: WorkflowFile,
    plugin: str,
    scope: Scope,
    *,
    label: str | None = None,
    context: AuditContext | None = None,
    tool_names: str = "dotted",
    debug: bool = False,
) -> None:
    """Serve one binding's store, pinned to `scope`, over stdio until the client leaves.

    Raises:
        ConfigError: no such binding, its plugin resolves to no store, or `tool_names` is
            not a style; before serving.
    """
    check_tool_names(tool_names)
    context = context or AuditContext.from_env()
    # the calling agent (pinned scope, else the hook's audit context) owns its own bindings
    binding = find_binding(workflow, plugin, scope.kind, label, scope.agent_id or context.agent_id)
    sinks = [JsonlSink(audit_path(workflow).resolve()), LoggerSink(audit_logger)]

    async def main() -> None:
        registry = PluginRegistry(workflow, use_blocks=blocks_wanted(workflow, plugin))
        try:
            store = await registry.resolve(plugin)
            if store is None:
                raise ConfigError(
                    f"plugin {plugin!r} is not a store of {workflow.source or 'the workflow'} "
                    "and no saved memory-store block has that name; declare it under stores:"
                )
            log_to_stderr(debug)
            service = BindingService(binding, scope, store, AuditTrail(sinks), context)
            server = build_binding_server(service, tool_names)
            logger.info(
                "serving binding %s (plugin %s, scope %s, %s); audit to %s",
                binding.binding,
                plugin,
                scope,
                "read-write" if binding.write else "read-only",
                sinks[0].path,
            )
            await server.run_stdio_async()
        finally:
            await registry.aclose()

    anyio.run(main)
