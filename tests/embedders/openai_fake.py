"""A stateful fake of an OpenAI-compatible `/v1/embeddings` server, served through respx.

It keeps its models (name -> dimension), every request, and every text it embedded. Vectors
are hashed bags of words, deliberately not normalized (the embedder must normalize them):
texts sharing words point the same way. Like OpenAI it refuses empty inputs and wrong keys;
like TEI it refuses batches over `max_batch` (413). Faults are scripted with `fail_next`.

    fake = EmbeddingsFake()
    embedder = OpenAIEmbedder(fake.url, "test-embed", client=fake.client(), api_key=...)
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any

import httpx
import numpy as np
import respx

WORD = re.compile(r"\w+")


@dataclass
class Fault:
    """Answer the next `times` requests with `status` and `body` (after `delay_s`)."""

    status: int
    times: int = 1
    body: str = '{"error": {"message": "injected fault", "type": "server_error"}}'
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0


def bag_of_words(text: str, dimension: int) -> list[float]:
    vector = np.zeros(dimension, dtype=np.float64)
    for word in WORD.findall(text.lower()) or [text]:
        digest = hashlib.sha256(word.encode()).digest()
        vector[digest[0] % dimension] += 1.0 + digest[1] / 255
    vector += 0.01  # never all zeros
    return (vector * 3.0).tolist()  # length 3x a unit vector: the client must normalize


class EmbeddingsFake:
    """An embeddings server in memory."""

    def __init__(
        self,
        url: str = "https://embed.test/v1",
        api_key: str | None = "sk-test-0123456789abcdefghij",
        models: dict[str, int] | None = None,
        max_batch: int | None = None,
        shuffle: bool = True,
    ) -> None:
        self.url = url
        self.api_key = api_key
        self.models = dict(models or {"test-embed": 16})
        self.max_batch = max_batch
        self.shuffle = shuffle  # answer data in reverse order: the client must sort by index
        self.faults: list[Fault] = []
        self.log: list[httpx.Request] = []
        self.embedded: list[str] = []
        self.router = respx.Router(assert_all_called=False)
        self.router.route().mock(side_effect=self.handle)

    def client(self) -> httpx.AsyncClient:
        """An httpx client whose requests this fake answers."""
        return httpx.AsyncClient(transport=httpx.MockTransport(self.router.async_handler))

    def fail_next(self, status: int, **options: Any) -> Fault:
        fault = Fault(status, **options)
        self.faults.append(fault)
        return fault

    def bodies(self) -> list[dict[str, Any]]:
        return [json.loads(request.content) for request in self.log]

    # -- the server -----------------------------------------------------------------------

    async def handle(self, request: httpx.Request) -> httpx.Response:
        self.log.append(request)
        for fault in self.faults:
            if fault.times > 0:
                fault.times -= 1
                if fault.delay_s:
                    await asyncio.sleep(fault.delay_s)
                return httpx.Response(fault.status, text=fault.body, headers=fault.headers)
        if request.method != "POST" or str(request.url) != self.url.rstrip("/") + "/embeddings":
            return self._error(404, f"no route {request.method} {request.url.path}")
        if self.api_key is not None and request.headers.get("authorization") != (
            f"Bearer {self.api_key}"
        ):
            sent = request.headers.get("authorization", "")
            # like OpenAI: the message quotes the start and end of the key it was given
            shown = f"{sent[7:12]}...{sent[-4:]}" if len(sent) > 16 else "none"
            return self._error(401, f"Incorrect API key provided: {shown}.")
        try:
            body = json.loads(request.content)
        except ValueError:
            return self._error(400, "We could not parse the JSON body of your request.")
        model = body.get("model")
        if model not in self.models:
            return self._error(404, f"The model '{model}' does not exist")
        inputs = body.get("input")
        if isinstance(inputs, str):
            inputs = [inputs]
        if (
            not isinstance(inputs, list)
            or not inputs
            or not all(isinstance(text, str) and text for text in inputs)
        ):
            return self._error(400, "'$.input' is invalid: empty strings are not allowed")
        if self.max_batch is not None and len(inputs) > self.max_batch:
            return self._error(413, f"batch size {len(inputs)} > maximum allowed batch size")
        dimension = self.models[model]
        self.embedded.extend(inputs)
        data = []
        for index, text in enumerate(inputs):
            vector = bag_of_words(text, dimension)
            if body.get("encoding_format") == "base64":
                vector = base64.b64encode(np.asarray(vector, "<f4").tobytes()).decode()
            data.append({"object": "embedding", "index": index, "embedding": vector})
        if self.shuffle:
            data.reverse()
        return httpx.Response(
            200,
            json={
                "object": "list",
                "data": data,
                "model": model,
                "usage": {"prompt_tokens": len(inputs), "total_tokens": len(inputs)},
            },
        )

    @staticmethod
    def _error(status: int, message: str) -> httpx.Response:
        return httpx.Response(
            status, json={"error": {"message": message, "type": "invalid_request_error"}}
        )
