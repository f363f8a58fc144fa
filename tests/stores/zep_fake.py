"""A stateful fake of the Zep v2 endpoints the SDK calls, served through respx.

State lives in dicts (users, sessions, messages per session). Search is eventually
consistent like Zep's: a message becomes searchable `index_delay_s` after it was added
(listing sees it at once); `wait_indexed()` waits for the index to catch up. Every request
must carry `Authorization: Api-Key <key>`. Faults are scripted with `fail_next`.

    fake = ZepFake()
    client = fake.client()                 # an httpx.AsyncClient answered by the fake
    store = ZepStore(fake.api_key, base_url=fake.base_url, http_client=client)
"""

from __future__ import annotations

import asyncio
import json
import math
import re
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx
import respx

WORD = re.compile(r"\w+")
ROLE_TYPES = {"norole", "system", "assistant", "user", "function", "tool"}


def now_iso() -> str:
    return datetime.now(UTC).isoformat()


@dataclass
class Fault:
    """Answer the next `times` matching requests with `status` (or wait `delay_s` first)."""

    status: int
    times: int = 1
    method: str | None = None
    path: str | None = None  # a substring of the path after /api/v2/
    headers: dict[str, str] = field(default_factory=dict)
    body: str = '{"message": "injected fault"}'
    delay_s: float = 0.0

    def matches(self, method: str, path: str) -> bool:
        return (self.method is None or self.method == method) and (
            self.path is None or self.path in path
        )


class ZepFake:
    """Zep's users, sessions, messages and search, in memory."""

    def __init__(
        self,
        base_url: str = "https://zep.test",
        api_key: str = "z_test-key-0123456789",
        index_delay_s: float = 0.05,
    ) -> None:
        self.base_url = base_url
        self.api_key = api_key
        self.index_delay_s = index_delay_s
        self.users: dict[str, dict[str, Any]] = {}
        self.sessions: dict[str, dict[str, Any]] = {}
        self.messages: dict[str, list[dict[str, Any]]] = {}
        self.indexed_at: dict[str, float] = {}  # message uuid -> when search sees it
        self.faults: list[Fault] = []
        self.log: list[httpx.Request] = []
        self.router = respx.Router(assert_all_called=False, base_url=base_url)
        self.router.route().mock(side_effect=self.handle)

    def client(self) -> httpx.AsyncClient:
        """An httpx client whose requests this fake answers."""
        return httpx.AsyncClient(transport=httpx.MockTransport(self.router.async_handler))

    # -- test controls ------------------------------------------------------------------

    def fail_next(self, status: int, **options: Any) -> Fault:
        fault = Fault(status, **options)
        self.faults.append(fault)
        return fault

    def index_settled(self) -> bool:
        return all(moment <= time.monotonic() for moment in self.indexed_at.values())

    async def wait_indexed(self, timeout_s: float = 5.0) -> None:
        deadline = time.monotonic() + timeout_s
        while not self.index_settled():
            assert time.monotonic() < deadline, "the fake's index never settled"
            await asyncio.sleep(self.index_delay_s / 5)

    def calls(self, method: str | None = None) -> list[tuple[str, str]]:
        """(method, path with query) of every request, in order."""
        return [
            (r.method, r.url.raw_path.decode())
            for r in self.log
            if method is None or r.method == method
        ]

    # -- dispatch -----------------------------------------------------------------------

    async def handle(self, request: httpx.Request) -> httpx.Response:
        self.log.append(request)
        prefix = "/api/v2/"
        path = request.url.path
        if not path.startswith(prefix):
            return self._error(404, f"no route {path}")
        path = path[len(prefix) :]
        for fault in self.faults:
            if fault.times > 0 and fault.matches(request.method, path):
                fault.times -= 1
                if fault.delay_s:
                    await asyncio.sleep(fault.delay_s)
                return httpx.Response(fault.status, text=fault.body, headers=fault.headers)
        if request.headers.get("authorization") != f"Api-Key {self.api_key}":
            return self._error(401, "unauthorized")
        body = json.loads(request.content) if request.content else None
        params = request.url.params
        parts = path.split("/")
        method = request.method
        match parts:
            case ["users"] if method == "POST":
                return self.add_user(body)
            case ["users", user] if method == "GET":
                return self.get_user(user)
            case ["sessions"] if method == "POST":
                return self.add_session(body)
            case ["sessions-ordered"] if method == "GET":
                return self.list_sessions(params)
            case ["sessions", "search"] if method == "POST":
                return self.search(params, body)
            case ["sessions", session] if method == "GET":
                return self.get_session(session)
            case ["sessions", session] if method == "PATCH":
                return self.update_session(session, body)
            case ["sessions", session, "memory"] if method == "POST":
                return self.add_memory(session, body)
            case ["sessions", session, "memory"] if method == "DELETE":
                return self.delete_memory(session)
            case ["sessions", session, "messages"] if method == "GET":
                return self.list_messages(session, params)
            case ["sessions", session, "messages", message] if method == "PATCH":
                return self.update_message(session, message, body)
        return self._error(404, f"no route {method} {path}")

    @staticmethod
    def _error(status: int, message: str) -> httpx.Response:
        return httpx.Response(status, json={"message": message})

    # -- users --------------------------------------------------------------------------

    def add_user(self, body: dict[str, Any]) -> httpx.Response:
        user_id = body.get("user_id")
        if not user_id:
            return self._error(400, "user_id is required")
        if user_id in self.users:
            return self._error(400, f"user {user_id} already exists")
        self.users[user_id] = {
            "user_id": user_id,
            "metadata": body.get("metadata") or {},
            "uuid": str(uuid.uuid4()),
            "created_at": now_iso(),
        }
        return httpx.Response(201, json=self.users[user_id])

    def get_user(self, user_id: str) -> httpx.Response:
        if user_id not in self.users:
            return self._error(404, "user not found")
        return httpx.Response(200, json=self.users[user_id])

    # -- sessions -----------------------------------------------------------------------

    def add_session(self, body: dict[str, Any]) -> httpx.Response:
        session_id = body.get("session_id")
        if not session_id:
            return self._error(400, "session_id is required")
        if session_id in self.sessions:
            return self._error(400, f"session {session_id} already exists")
        user_id = body.get("user_id")
        if user_id is not None and user_id not in self.users:
            return self._error(404, f"user {user_id} not found")
        self.sessions[session_id] = {
            "session_id": session_id,
            "user_id": user_id,
            "metadata": body.get("metadata") or {},
            "uuid": str(uuid.uuid4()),
            "created_at": now_iso(),
            "updated_at": now_iso(),
        }
        self.messages[session_id] = []
        return httpx.Response(201, json=self.sessions[session_id])

    def get_session(self, session_id: str) -> httpx.Response:
        if session_id not in self.sessions:
            return self._error(404, "session not found")
        return httpx.Response(200, json=self.sessions[session_id])

    def update_session(self, session_id: str, body: dict[str, Any]) -> httpx.Response:
        if session_id not in self.sessions:
            return self._error(404, "session not found")
        if not isinstance(body.get("metadata"), dict):
            return self._error(400, "metadata is required")
        session = self.sessions[session_id]
        session["metadata"] = {**session["metadata"], **body["metadata"]}  # Zep merges
        session["updated_at"] = now_iso()
        return httpx.Response(200, json=session)

    def list_sessions(self, params: httpx.QueryParams) -> httpx.Response:
        page = int(params.get("page_number", 1))
        size = int(params.get("page_size", 100))
        ordered = list(self.sessions.values())  # insertion order is creation order
        if params.get("order_by") not in (None, "created_at"):
            return self._error(400, "this fake orders by created_at only")
        if params.get("asc") == "false":
            ordered.reverse()
        chunk = ordered[(page - 1) * size : page * size]
        return httpx.Response(
            200,
            json={"sessions": chunk, "total_count": len(ordered), "response_count": len(chunk)},
        )

    # -- messages -----------------------------------------------------------------------

    def add_memory(self, session_id: str, body: dict[str, Any]) -> httpx.Response:
        if session_id not in self.sessions:
            return self._error(404, "session not found")
        added = []
        for message in body.get("messages") or []:
            if not message.get("content"):
                return self._error(400, "message content must not be empty")
            if message.get("role_type") not in ROLE_TYPES:
                return self._error(400, f"invalid role_type {message.get('role_type')!r}")
            added.append(
                {
                    "uuid": str(uuid.uuid4()),
                    "content": message["content"],
                    "role": message.get("role"),
                    "role_type": message["role_type"],
                    "metadata": message.get("metadata") or {},
                    "created_at": now_iso(),
                    "updated_at": now_iso(),
                    "token_count": 0,
                }
            )
        for message in added:
            self.messages[session_id].append(message)
            self.indexed_at[message["uuid"]] = time.monotonic() + self.index_delay_s
        return httpx.Response(200, json={"message": "OK"})

    def delete_memory(self, session_id: str) -> httpx.Response:
        if session_id not in self.sessions:
            return self._error(404, "session not found")
        for message in self.messages[session_id]:
            self.indexed_at.pop(message["uuid"], None)
        self.messages[session_id] = []
        return httpx.Response(200, json={"message": "OK"})

    def list_messages(self, session_id: str, params: httpx.QueryParams) -> httpx.Response:
        if session_id not in self.sessions:
            return self._error(404, "session not found")
        limit = int(params.get("limit", 100))
        page = int(params.get("cursor", 1))
        everything = self.messages[session_id]
        chunk = everything[(page - 1) * limit : page * limit]
        return httpx.Response(
            200,
            json={"messages": chunk, "total_count": len(everything), "row_count": len(chunk)},
        )

    def update_message(
        self, session_id: str, message_uuid: str, body: dict[str, Any]
    ) -> httpx.Response:
        for message in self.messages.get(session_id, []):
            if message["uuid"] == message_uuid:
                message["metadata"] = {**message["metadata"], **body["metadata"]}
                message["updated_at"] = now_iso()
                return httpx.Response(200, json=message)
        return self._error(404, "message not found")

    # -- search -------------------------------------------------------------------------

    def search(self, params: httpx.QueryParams, body: dict[str, Any]) -> httpx.Response:
        text = body.get("text")
        if not text:
            return self._error(400, "text is required")
        if body.get("search_scope", "messages") != "messages":
            return self._error(400, "this fake searches messages only")
        limit = int(params["limit"]) if "limit" in params else None
        sessions = body.get("session_ids") or list(self.sessions)
        user = body.get("user_id")
        words = set(WORD.findall(text.lower()))
        results = []
        for session_id in sessions:
            session = self.sessions.get(session_id)
            if session is None or (user is not None and session["user_id"] != user):
                continue
            for message in self.messages[session_id]:
                if self.indexed_at.get(message["uuid"], math.inf) > time.monotonic():
                    continue  # not indexed yet
                found = set(WORD.findall(message["content"].lower()))
                shared = len(words & found)
                if shared:
                    score = shared / math.sqrt(len(words) * len(found))
                    results.append({"message": message, "score": score, "session_id": session_id})
        results.sort(key=lambda result: result["score"], reverse=True)
        return httpx.Response(200, json={"results": results[:limit]})
