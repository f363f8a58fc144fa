"""The Zep reference store, on the official `zep-python` 2.0 SDK (groups `memory` and `user`).

A project is a Zep user, a scope is a session, an item version is a message (`zep_wire`).
Zep indexes messages asynchronously and has no key lookup, TTL, or message update other than
metadata, so `get` and overwrites read the scope's message list, TTL travels in metadata (the
base class), a replaced version is marked so searches skip it, and a deleted key's versions
are marked so no read returns it. docs/stores/zep.md has the whole mapping and what each
operation costs.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator
from datetime import datetime
from typing import TYPE_CHECKING, Any

import httpx
from pydantic import SecretStr
from zep_python.core.api_error import ApiError
from zep_python.core.client_wrapper import AsyncClientWrapper
from zep_python.memory.client import AsyncMemoryClient
from zep_python.types import Message
from zep_python.user.client import AsyncUserClient

from animus_flows.errors import AnimusError, ConfigError, InvalidRequest, StoreUnavailable
from animus_flows.protocol import (
    JSON,
    Capabilities,
    ItemPage,
    MemoryItem,
    QueryHit,
    Scope,
    ScopePage,
    matches_filters,
    utcnow,
)
from animus_flows.redaction import shown_url
from animus_flows.stores import zep_wire as wire
from animus_flows.stores.base import BaseStore
from animus_flows.stores.checks import check_scope
from animus_flows.stores.cursors import cursor_key, item_page
from animus_flows.stores.zep_http import (
    ZepConflict,
    ZepNotFound,
    body_text,
    deadline,
    is_retryable,
    status_error,
    unreachable,
)

if TYPE_CHECKING:
    from animus_flows.config.models import ZepSpec

DEFAULT_BASE_URL = "https://api.getzep.com"
API_PREFIX = "/api/v2"
#: The v2 search API documents no ceiling ("no limit"); we cap a query at 50 results, the
#: ceiling of Zep's later search endpoints, so one query stays one bounded request.
MAX_SEARCH_LIMIT = 50
#: Messages and sessions per listing request (Zep's own default page is 100).
PAGE_SIZE = 100


class ZepStore(BaseStore):
    """A memory store in Zep (https://www.getzep.com), through the official SDK.

    Args:
        api_key: the Zep project API key; kept as a `SecretStr`, never shown.
        base_url: the Zep server, without `/api/v2`.
        timeout_s: the deadline of one store operation, retries included.
        http_client: an `httpx.AsyncClient` to send requests with; the store never closes a
            client it did not open.
        max_retries: how often the SDK retries a 408, 429 or 5xx answer (its exponential
            backoff, or the server's Retry-After), within the deadline.
        page_size: messages and sessions fetched per listing request.

    Example:
        ```python
        import os

        from animus_flows.protocol import Scope
        from animus_flows.stores.zep import ZepStore

        store = ZepStore(os.environ["ZEP_API_KEY"])
        await store.put(Scope("trade-desk", agent_id="analyst"), "fx", "EUR/USD at 1.09")
        hits = await store.query(Scope("trade-desk", agent_id="analyst"), "EUR/USD")
        await store.aclose()
        ```
    """

    capabilities = Capabilities(
        native_ttl=False,
        native_key_get=False,
        strong_consistency=False,
        max_query_top_k=MAX_SEARCH_LIMIT,
    )

    def __init__(
        self,
        api_key: str | SecretStr,
        *,
        base_url: str = DEFAULT_BASE_URL,
        timeout_s: float = 10.0,
        http_client: httpx.AsyncClient | None = None,
        max_retries: int = 3,
        page_size: int = PAGE_SIZE,
    ) -> None:
        key = api_key.get_secret_value() if isinstance(api_key, SecretStr) else api_key
        if not key:
            raise ConfigError(
                "the Zep API key is empty; set api_key_env (default ZEP_API_KEY) or api_key"
            )
        self._api_key = SecretStr(key)
        self.base_url = base_url.rstrip("/").removesuffix(API_PREFIX)
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.page_size = page_size
        self._injected_client = http_client
        self._own_client: httpx.AsyncClient | None = None
        self._sdk: tuple[asyncio.AbstractEventLoop, AsyncMemoryClient, AsyncUserClient] | None
        self._sdk = None
        self._known_users: set[str] = set()

    @classmethod
    def from_spec(cls, spec: ZepSpec, *, plugin_id: str | None = None) -> ZepStore:
        """The store for a `type: zep` entry; the key comes from `api_key` or `api_key_env`."""
        key = spec.api_key.get_secret_value() if spec.api_key is not None else None
        key = key or os.environ.get(spec.api_key_env)
        if not key:
            where = f"stores.{plugin_id}" if plugin_id else "the zep store"
            raise ConfigError(
                f"{where}: no Zep API key; set the {spec.api_key_env} environment variable "
                "(or name another one with api_key_env)"
            )
        return cls(
            key, base_url=spec.base_url, timeout_s=spec.timeout_s, max_retries=spec.max_retries
        )

    def describe(self) -> str:
        return f"ZepStore({shown_url(self.base_url)!r})"

    async def aclose(self) -> None:
        client, self._own_client, self._sdk = self._own_client, None, None
        if client is not None:
            await client.aclose()

    # -- the SDK, bound to the running loop -----------------------------------------------

    def _clients(self) -> tuple[AsyncMemoryClient, AsyncUserClient]:
        loop = asyncio.get_running_loop()
        if self._sdk is not None and self._sdk[0] is loop:
            return self._sdk[1], self._sdk[2]
        client = self._injected_client
        if client is None:
            # Connection pools belong to the loop that opened them; a new loop gets a new one.
            self._own_client = httpx.AsyncClient(follow_redirects=True)
            client = self._own_client
        key = self._api_key.get_secret_value()
        # Built from the SDK's parts rather than `AsyncZep`, whose constructor lets the
        # ZEP_API_URL environment variable override the configured base_url.
        wrapper = AsyncClientWrapper(
            api_key=key,
            base_url=self.base_url + API_PREFIX,
            timeout=self.timeout_s,
            httpx_client=client,
        )
        memory, users = (
            AsyncMemoryClient(client_wrapper=wrapper),
            AsyncUserClient(client_wrapper=wrapper),
        )
        self._sdk = (loop, memory, users)
        return memory, users

    async def _call(self, method: Any, *args: Any, create: bool = False, **kwargs: Any) -> Any:
        """One SDK call, retried by the SDK (a creation never: Zep answers 409 when the thing
        exists, which is an answer, not a fault), its failure mapped onto our errors."""
        options = {"max_retries": 0 if create else self.max_retries}
        try:
            return await method(*args, request_options=options, **kwargs)
        except ApiError as exc:
            if exc.status_code is None:
                raise
            found = status_error(
                exc.status_code,
                body_text(exc.body),
                where=_call_name(method),
                base_url=shown_url(self.base_url + API_PREFIX),
                secret=self._api_key.get_secret_value(),
            )
            if found is None:
                raise
            if is_retryable(exc.status_code) and not create:
                raise type(found)(
                    f"{found}; gave up after {self.max_retries + 1} attempt(s) (Zep is "
                    "unavailable or rate-limiting: retry later)"
                ) from None
            raise found from None
        except httpx.TransportError as exc:
            if isinstance(exc, httpx.TimeoutException):
                raise  # the deadline reports it
            raise unreachable(self.base_url + API_PREFIX, exc) from None

    @contextlib.asynccontextmanager
    async def _operation(self, what: str) -> AsyncIterator[None]:
        async with deadline(self.timeout_s, what):
            try:
                yield
            except AnimusError:
                raise
            except (ValueError, ApiError) as exc:  # a 2xx body the SDK's models cannot read
                raise StoreUnavailable(
                    f"Zep answered {what} with a body this store cannot read "
                    f"({type(exc).__name__}); check that base_url "
                    f"({shown_url(self.base_url)}) is a Zep v2 API"
                ) from None

    # -- users, sessions, messages --------------------------------------------------------

    async def _ensure_user(self, project_id: str) -> str:
        user = wire.user_id(project_id)
        if user in self._known_users:
            return user
        _, users = self._clients()
        try:
            await self._call(users.get, user)
        except ZepNotFound:
            try:
                await self._call(
                    users.add, user_id=user, metadata=wire.user_metadata(project_id), create=True
                )
            except (ZepConflict, InvalidRequest) as refused:
                # Another writer may have created it first; if not, the refusal stands.
                try:
                    await self._call(users.get, user)
                except ZepNotFound:
                    raise refused from None
        self._known_users.add(user)
        return user

    async def _open_session(self, scope: Scope) -> str:
        """The scope's session, created (with its project's user) or revived as needed."""
        memory, _ = self._clients()
        session = wire.session_id(scope)
        try:
            found = await self._call(memory.get_session, session)
        except ZepNotFound:
            user = await self._ensure_user(scope.project_id)
            try:
                await self._call(
                    memory.add_session,
                    session_id=session,
                    user_id=user,
                    metadata=wire.session_metadata(scope, live=True),
                    create=True,
                )
                return session
            except (ZepConflict, InvalidRequest) as refused:
                try:
                    found = await self._call(memory.get_session, session)  # created meanwhile?
                except ZepNotFound:
                    raise refused from None
        owner = wire.session_scope(found.metadata)
        if owner != scope:
            raise StoreUnavailable(
                f"Zep session {session} holds {owner or 'data not written by animus-flows'}, "
                f"not {scope}; remove that session from the Zep project"
            )
        if not wire.session_is_live(found.metadata):
            await self._call(
                memory.update_session, session, metadata=wire.session_metadata(scope, live=True)
            )
        return session

    async def _versions(self, scope: Scope) -> list[wire.Version]:
        """Every stored version in the scope's session, oldest first (none if no session)."""
        memory, _ = self._clients()
        session = wire.session_id(scope)
        versions: list[wire.Version] = []
        page = 1
        while True:
            try:
                listing = await self._call(
                    memory.get_session_messages, session, limit=self.page_size, cursor=page
                )
            except ZepNotFound:
                return versions
            batch = listing.messages or []
            for message in batch:
                version = wire.read_version(message.uuid_, message.metadata, scope)
                if version is not None:
                    versions.append(version)
            if len(batch) < self.page_size:
                return versions
            page += 1

    # -- the protocol ---------------------------------------------------------------------

    async def _put(
        self,
        scope: Scope,
        key: str,
        value: JSON,
        metadata: dict[str, JSON],
        expires_at: datetime | None,
    ) -> MemoryItem:
        async with self._operation("put"):
            memory, _ = self._clients()
            session = await self._open_session(scope)
            older = [version for version in await self._versions(scope) if version.key == key]
            now = utcnow()
            current = wire.current(older, now).get(key)
            created_at = now if current is None else current.item.created_at
            body = wire.message(scope, key, value, metadata, created_at, now)
            await self._call(memory.add, session, messages=[Message(**body)])
            # Zep cannot delete or rewrite one message: mark older versions so searches skip
            # them (listing already prefers the newest).
            for version in older:
                if not version.superseded and version.uuid is not None:
                    with contextlib.suppress(ZepNotFound):  # the scope was deleted meanwhile
                        await self._call(
                            memory.update_message_metadata,
                            session,
                            version.uuid,
                            metadata=wire.superseded(version.raw_metadata),
                        )
        return MemoryItem(scope, key, value, metadata, created_at, now)

    async def _get(self, scope: Scope, key: str) -> MemoryItem | None:
        async with self._operation("get"):
            version = wire.latest(await self._versions(scope)).get(key)
        return None if version is None or version.deleted else version.item

    async def _query(
        self, scope: Scope, text: str, top_k: int, filters: dict[str, JSON] | None
    ) -> list[QueryHit]:
        async with self._operation("query"):
            if not text.strip():
                return self._listing(await self._versions(scope), top_k, filters)
            memory, _ = self._clients()
            session = wire.session_id(scope)
            # Filters are applied here, after ranking, so a filtered query asks for the most.
            limit = MAX_SEARCH_LIMIT if filters else min(MAX_SEARCH_LIMIT, 2 * top_k)
            try:
                found = await self._call(
                    memory.search_sessions,
                    text=text,
                    user_id=wire.user_id(scope.project_id),
                    session_ids=[session],
                    search_scope="messages",
                    limit=limit,
                )
            except ZepNotFound:
                return []
            results = [
                (
                    result.session_id,
                    result.score,
                    wire.read_version(result.message.uuid_, result.message.metadata, scope)
                    if result.message is not None
                    else None,
                )
                for result in found.results or []
            ]
        ranked = wire.hits(results, session)
        return [hit for hit in ranked if matches_filters(hit.metadata, filters)][:top_k]

    @staticmethod
    def _listing(
        versions: list[wire.Version], top_k: int, filters: dict[str, JSON] | None
    ) -> list[QueryHit]:
        # An empty query lists the scope, newest first: every item matches it fully.
        newest = sorted(
            wire.current(versions).values(), key=lambda v: v.item.updated_at, reverse=True
        )
        return [
            QueryHit(v.key, v.item.value, 1.0, v.item.metadata)
            for v in newest
            if matches_filters(v.item.metadata, filters)
        ][:top_k]

    async def _list_scopes(
        self, project_id: str | None, cursor: str | None, limit: int
    ) -> ScopePage:
        start = wire.parse_cursor(cursor)
        found: list[tuple[int, Scope]] = []
        async with self._operation("list_scopes"):
            memory, _ = self._clients()
            page = start // self.page_size + 1
            while len(found) <= limit:
                listing = await self._call(
                    memory.list_sessions,
                    page_number=page,
                    page_size=self.page_size,
                    order_by="created_at",
                    asc=True,
                )
                sessions = listing.sessions or []
                for index, session in enumerate(sessions):
                    position = (page - 1) * self.page_size + index
                    scope = wire.session_scope(session.metadata)
                    if (
                        position < start
                        or scope is None
                        or not wire.session_is_live(session.metadata)
                        or (project_id is not None and scope.project_id != project_id)
                    ):
                        continue
                    found.append((position, scope))
                    if len(found) > limit:
                        break
                if len(sessions) < self.page_size:
                    break
                page += 1
        next_cursor = str(found[limit][0]) if len(found) > limit else None
        return ScopePage([scope for _, scope in found[:limit]], next_cursor)

    async def _delete_scope(self, scope: Scope) -> int:
        async with self._operation("delete_scope"):
            memory, _ = self._clients()
            session = wire.session_id(scope)
            versions = await self._versions(scope)
            deleted = len(wire.current(versions))
            if versions:
                with contextlib.suppress(ZepNotFound):
                    await self._call(memory.delete, session)
            with contextlib.suppress(ZepNotFound):  # never written, or removed with its memory
                await self._call(
                    memory.update_session,
                    session,
                    metadata=wire.session_metadata(scope, live=False),
                )
        return deleted

    async def count(self, scope: Scope) -> int:
        """Live items in `scope`, counted from its message list."""
        check_scope(scope)
        async with self._operation("count"):
            return len(wire.current(await self._versions(scope)))

    async def _delete(self, scope: Scope, key: str) -> bool:
        async with self._operation("delete"):
            memory, _ = self._clients()
            session = wire.session_id(scope)
            versions = [version for version in await self._versions(scope) if version.key == key]
            newest = wire.latest(versions).get(key)
            if newest is None or newest.deleted:
                return False
            if newest.uuid is None:
                raise StoreUnavailable(
                    f"Zep listed the newest version of {key!r} in {scope} without a uuid, so it "
                    "cannot be marked deleted; check that base_url is a Zep v2 API"
                )
            # Zep cannot delete one message: the newest version marked deleted hides the key
            # from every read, and older versions a crashed put left unmarked are hidden from
            # searches too.
            older = [v for v in versions if v is not newest and not v.superseded and v.uuid]
            for version in [newest, *older]:
                with contextlib.suppress(ZepNotFound):  # the scope was deleted meanwhile
                    await memory.update_message_metadata(
                        session, version.uuid, metadata=wire.deleted(version.raw_metadata)
                    )
        return not newest.expired()

    async def _list_items(
        self, scope: Scope, prefix: str | None, cursor: str | None, limit: int
    ) -> ItemPage:
        after = cursor_key(cursor)
        async with self._operation("list_items"):
            live = wire.current(await self._versions(scope))
        keys = sorted(
            key
            for key in live
            if (prefix is None or key.startswith(prefix)) and (after is None or key > after)
        )
        return item_page([live[key].item for key in keys[: limit + 1]], limit)


def _call_name(method: Any) -> str:
    """`memory.get_session` for the SDK method `AsyncMemoryClient.get_session`: how errors
    name the call that failed."""
    group = type(method.__self__).__name__.removeprefix("Async").removesuffix("Client").lower()
    return f"{group}.{method.__name__}"
