"""The params of each protocol method as pydantic models: what a plugin server accepts.

One model per method, with `extra="forbid"` and strict types: JSON gives no reason to read
`"3"` as 3 or `true` as 1. A validation error becomes one `InvalidRequest` line that names the
method, the param and what to send, which the server answers with -32602 (a bad scope stays an
`InvalidScope`, with `Scope`'s own message). docs/protocol.md section 4 lists the same params.
"""

from __future__ import annotations

import json
import types
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, PlainValidator, ValidationError

from animus_flows.errors import AnimusError, InvalidRequest
from animus_flows.protocol import (
    METHOD_DELETE,
    METHOD_DELETE_SCOPE,
    METHOD_GET,
    METHOD_INITIALIZE,
    METHOD_LIST_ITEMS,
    METHOD_LIST_SCOPES,
    METHOD_PUT,
    METHOD_QUERY,
    PROTOCOL_VERSION,
    Scope,
)
from animus_flows.redaction import redact_head

#: A scope param: `Scope.from_json` checks it, raising `InvalidScope` with its own message.
ScopeParam = Annotated[Scope, PlainValidator(Scope.from_json)]


class Params(BaseModel):
    """The params of one method, with the wire's defaults; only the params a request sends
    become arguments (the store's own defaults are the same)."""

    model_config = ConfigDict(extra="forbid", strict=True, arbitrary_types_allowed=True)


class InitializeParams(Params):
    protocol_version: str = PROTOCOL_VERSION
    host: dict[str, Any] = {}


class PutParams(Params):
    scope: ScopeParam
    key: str
    value: Any  # any JSON, null included; required all the same
    metadata: dict[str, Any] | None = None
    ttl_seconds: int | None = None


class KeyParams(Params):
    scope: ScopeParam
    key: str


class QueryParams(Params):
    scope: ScopeParam
    text: str
    top_k: int = 8
    filters: dict[str, Any] | None = None


class ListScopesParams(Params):
    project_id: str | None = None
    cursor: str | None = None
    limit: int = 100


class ScopeParams(Params):
    scope: ScopeParam


class ListItemsParams(Params):
    scope: ScopeParam
    prefix: str | None = None
    cursor: str | None = None
    limit: int = 100


METHOD_PARAMS: dict[str, type[Params]] = {
    METHOD_INITIALIZE: InitializeParams,
    METHOD_PUT: PutParams,
    METHOD_GET: KeyParams,
    METHOD_QUERY: QueryParams,
    METHOD_LIST_SCOPES: ListScopesParams,
    METHOD_DELETE_SCOPE: ScopeParams,
    METHOD_DELETE: KeyParams,
    METHOD_LIST_ITEMS: ListItemsParams,
}

_SENT_AS = {str: "a string", int: "an integer", dict: "an object"}


def method_arguments(method: str, params: dict[str, Any]) -> dict[str, Any]:
    """The keyword arguments of the store method for `params`, type-checked.

    Raises:
        InvalidRequest: a param is unknown, missing or of the wrong type (InvalidScope for a
            bad scope); the store checks values further.
    """
    model = METHOD_PARAMS[method]
    try:
        checked = model.model_validate(params)
    except ValidationError as exc:
        raise _refusal(method, model, exc) from None
    return {name: getattr(checked, name) for name in checked.model_fields_set}


def _refusal(method: str, model: type[Params], exc: ValidationError) -> AnimusError:
    """One line for what `exc` found, in the order a person fixes a request: unknown params,
    missing ones, then the first of the wrong type."""
    errors = exc.errors()
    unknown = [str(e["loc"][0]) for e in errors if e["type"] == "extra_forbidden"]
    if unknown:
        return InvalidRequest(
            f"{method}: unknown param(s) {', '.join(sorted(unknown))}; "
            f"{method} takes {', '.join(model.model_fields) or 'no params'}"
        )
    missing = [str(e["loc"][0]) for e in errors if e["type"] == "missing"]
    if missing:
        return InvalidRequest(f"{method}: missing param(s) {', '.join(missing)}")
    error = errors[0]
    original = (error.get("ctx") or {}).get("error")
    if isinstance(original, AnimusError):  # Scope's own refusal, with its own class
        return original
    name = str(error["loc"][0])
    sent = redact_head(json.dumps(error["input"], ensure_ascii=False, default=str), 60)
    what = _sent_as(model.model_fields[name].annotation)
    return InvalidRequest(f"{method}: param {name} is {sent}; send {what}")


def _sent_as(annotation: Any) -> str:
    """What a param of this type is sent as: `int | None` is "an integer or null"."""
    if get_origin(annotation) in (Union, types.UnionType):
        options = get_args(annotation)
    else:
        options = (annotation,)
    kinds = [_SENT_AS[get_origin(o) or o] for o in options if o is not type(None)]
    return " or ".join(kinds + ["null"] * (type(None) in options))
