"""OpenAIEmbedder against a stateful fake server at the HTTP layer, plus exact wire tests."""

import base64
import json
import logging

import httpx
import numpy as np
import pytest
from pydantic import SecretStr

from animus_flows.config.embedder import OpenAIEmbedderSpec
from animus_flows.embedders import Embedder, OpenAIEmbedder, embedder_from_spec, resolve_dimension
from animus_flows.embedders.openai import (
    Backoff,
    MalformedAnswer,
    embeddings_request,
    embeddings_url,
    parse_embeddings,
    retry_after,
    status_error,
)
from animus_flows.errors import ConfigError, InvalidRequest, StoreTimeout, StoreUnavailable

FAST = Backoff(initial_s=0.01, max_s=0.02)


def make(fake, **options) -> OpenAIEmbedder:
    options.setdefault("api_key", SecretStr(fake.api_key))
    options.setdefault("backoff", FAST)
    return OpenAIEmbedder(fake.url, "test-embed", client=fake.client(), **options)


# -- through the fake ------------------------------------------------------------------------


async def test_rows_are_unit_float32_in_input_order(fake):
    embedder = make(fake)
    texts = ["alpha beta", "gamma", "alpha beta"]
    rows = await embedder.embed(texts, purpose="document")
    assert rows.dtype == np.float32
    assert rows.shape == (3, 16)
    np.testing.assert_allclose(np.linalg.norm(rows, axis=1), 1.0, atol=1e-6)
    # the fake answers in reverse order: rows follow `index`, not the order of `data`
    np.testing.assert_allclose(rows[0], rows[2])
    assert not np.allclose(rows[0], rows[1])
    assert isinstance(embedder, Embedder)


async def test_the_dimension_is_learned_from_the_first_answer(fake):
    fake.models["wide"] = 48
    embedder = OpenAIEmbedder(
        fake.url, "wide", api_key=SecretStr(fake.api_key), client=fake.client()
    )
    assert embedder.dimension is None
    assert await resolve_dimension(embedder) == 48
    assert embedder.dimension == 48
    assert len(fake.log) == 1
    assert await resolve_dimension(embedder) == 48
    assert len(fake.log) == 1  # known now: no second probe


async def test_a_given_dimension_that_the_server_contradicts_is_a_config_error(fake):
    embedder = make(fake, dimension=384)
    with pytest.raises(ConfigError, match=r"returned 16-dimensional vectors, not 384"):
        await embedder.embed(["x"], purpose="query")


async def test_a_model_that_changes_size_between_answers_is_refused(fake):
    embedder = make(fake)
    await embedder.embed(["x"], purpose="query")
    fake.models["test-embed"] = 32  # someone swapped the model behind the same name
    with pytest.raises(ConfigError, match="32-dimensional vectors, not 16"):
        await embedder.embed(["x"], purpose="query")


async def test_batches_follow_batch_size_and_keep_the_order(fake):
    fake.max_batch = 4
    embedder = make(fake, batch_size=4)
    texts = [f"text {i}" for i in range(10)]
    rows = await embedder.embed(texts, purpose="document")
    assert [len(body["input"]) for body in fake.bodies()] == [4, 4, 2]
    assert fake.embedded == texts
    single = np.concatenate([await embedder.embed([t], purpose="document") for t in texts])
    np.testing.assert_allclose(rows, single, atol=1e-6)


async def test_a_batch_over_the_servers_limit_is_a_one_line_error(fake):
    fake.max_batch = 2
    embedder = make(fake, batch_size=3)
    with pytest.raises(StoreUnavailable, match="HTTP 413") as caught:
        await embedder.embed(["a", "b", "c"], purpose="document")
    assert "\n" not in str(caught.value)
    assert len(fake.log) == 1  # a 413 is not retried


async def test_prefixes_go_before_the_texts_of_their_purpose(fake):
    embedder = make(fake, query_prefix="search_query: ", document_prefix="search_document: ")
    await embedder.embed(["q"], purpose="query")
    await embedder.embed(["d"], purpose="document")
    assert fake.embedded == ["search_query: q", "search_document: d"]


async def test_empty_texts_are_sent_as_one_space(fake):
    rows = await make(fake).embed(["", "word"], purpose="document")
    assert fake.embedded == [" ", "word"]
    assert rows.shape == (2, 16)


async def test_no_texts_send_no_request(fake):
    rows = await make(fake, dimension=16).embed([], purpose="query")
    assert rows.shape == (0, 16)
    assert fake.log == []


async def test_429_and_5xx_are_retried_honoring_retry_after(fake):
    fake.fail_next(429, headers={"Retry-After": "0"})
    fake.fail_next(503)
    fake.fail_next(500)
    rows = await make(fake).embed(["x"], purpose="query")
    assert rows.shape == (1, 16)
    assert len(fake.log) == 4


async def test_a_server_that_stays_down_gives_up_within_the_deadline(fake):
    fake.fail_next(503, times=1000)
    embedder = make(fake, timeout_s=0.3)
    with pytest.raises(StoreUnavailable, match=r"HTTP 503.*gave up after \d+ attempt") as caught:
        await embedder.embed(["x"], purpose="query")
    assert not isinstance(caught.value, StoreTimeout)
    assert 2 <= len(fake.log) < 100
    assert "\n" not in str(caught.value)


async def test_a_slow_server_is_a_timeout(fake):
    fake.fail_next(200, delay_s=5)
    embedder = make(fake, timeout_s=0.2)
    with pytest.raises(StoreTimeout, match=r"did not answer within 0.2 s"):
        await embedder.embed(["x"], purpose="query")


async def test_network_errors_are_retried_then_unavailable():
    calls = 0

    def refuse(request):
        nonlocal calls
        calls += 1
        raise httpx.ConnectError("connection refused", request=request)

    client = httpx.AsyncClient(transport=httpx.MockTransport(refuse))
    embedder = OpenAIEmbedder(
        "http://127.0.0.1:9/v1", "m", client=client, timeout_s=0.3, backoff=FAST
    )
    with pytest.raises(StoreUnavailable, match=r"cannot reach .*127.0.0.1:9/v1/embeddings"):
        await embedder.embed(["x"], purpose="query")
    assert calls >= 2


async def test_a_wrong_key_is_a_config_error_that_never_shows_the_key(fake, monkeypatch):
    monkeypatch.setenv("EMBED_KEY", "sk-wrong-key-0123456789abcdefghij")
    embedder = OpenAIEmbedder(
        fake.url, "test-embed", "EMBED_KEY", client=fake.client(), backoff=FAST
    )
    with pytest.raises(ConfigError, match=r"HTTP 401.*environment variable EMBED_KEY") as caught:
        await embedder.embed(["x"], purpose="query")
    assert "0123456789abcdefghij" not in str(caught.value)
    assert "sk-wrong" not in str(caught.value)
    assert len(fake.log) == 1  # never retried


async def test_a_forbidden_answer_without_a_key_says_to_name_one(fake):
    fake.fail_next(403, body='{"error": "forbidden"}')
    embedder = OpenAIEmbedder(fake.url, "test-embed", client=fake.client())
    with pytest.raises(ConfigError, match=r"HTTP 403\): forbidden; name the environment"):
        await embedder.embed(["x"], purpose="query")


async def test_an_unknown_model_is_a_config_error_naming_it(fake):
    embedder = OpenAIEmbedder(
        fake.url, "no-such-model", api_key=SecretStr(fake.api_key), client=fake.client()
    )
    with pytest.raises(ConfigError, match=r"HTTP 404: The model 'no-such-model' does not exist"):
        await embedder.embed(["x"], purpose="query")


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("<html>502 Bad Gateway</html>", "not JSON: <html>502 Bad Gateway</html>"),
        ('{"object": "list"}', "without a 'data' list"),
        ('{"data": []}', "returned 0 embeddings for 1 texts"),
        ('{"data": [{"index": 0, "embedding": "!!"}]}', "not base64"),
        ('{"data": [{"index": 0, "embedding": [1, "a"]}]}', "not a non-empty list of numbers"),
        ('{"data": [{"index": 0, "embedding": []}]}', "not a non-empty list of numbers"),
        ('{"data": [{"index": 5, "embedding": [1.0]}]}', "without a valid index"),
        ('{"data": [{"index": 0, "embedding": [NaN, 1.0]}]}', "NaN or infinite"),
        ('{"data": [{"index": 0, "embedding": [0.0, 0.0]}]}', "all-zero vector"),
    ],
)
async def test_malformed_answers_are_one_line_store_errors(fake, body, message):
    fake.fail_next(200, body=body)
    with pytest.raises(StoreUnavailable) as caught:
        await make(fake).embed(["x"], purpose="query")
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)
    assert "embed.test/v1/embeddings" in str(caught.value)


async def test_base64_answers_are_decoded(fake):
    vector = np.array([3.0, 4.0], dtype="<f4")
    encoded = base64.b64encode(vector.tobytes()).decode()
    fake.fail_next(200, body=json.dumps({"data": [{"index": 0, "embedding": encoded}]}))
    rows = await make(fake).embed(["x"], purpose="query")
    np.testing.assert_allclose(rows, [[0.6, 0.8]], atol=1e-6)


async def test_the_key_stays_out_of_repr_errors_and_logs(fake, monkeypatch, caplog):
    key = "sk-live-9f8e7d6c5b4a3f2e1d0c"
    monkeypatch.setenv("EMBED_KEY", key)
    fake.api_key = key
    # a server that echoes the key back in its error message
    fake.fail_next(500, body=json.dumps({"error": {"message": f"internal error for {key}"}}))
    fake.fail_next(500, times=1000, body=json.dumps({"error": f"bad key {key}"}))
    embedder = OpenAIEmbedder(
        fake.url, "test-embed", "EMBED_KEY", client=fake.client(), timeout_s=0.3, backoff=FAST
    )
    caplog.set_level(logging.DEBUG, logger="animus_flows")
    with pytest.raises(StoreUnavailable) as caught:
        await embedder.embed(["x"], purpose="query")
    assert key not in str(caught.value)
    assert key not in repr(embedder)
    assert key not in str(vars(embedder))
    assert key not in caplog.text
    assert fake.log[0].headers["authorization"] == f"Bearer {key}"


def test_an_unset_key_variable_is_a_config_error_naming_it(monkeypatch):
    monkeypatch.delenv("NO_SUCH_EMBED_KEY", raising=False)
    with pytest.raises(ConfigError, match=r"NO_SUCH_EMBED_KEY \(api_key_env\) is not set"):
        OpenAIEmbedder("http://127.0.0.1:11434/v1", "m", "NO_SUCH_EMBED_KEY")


def test_bad_arguments_are_config_errors():
    with pytest.raises(ConfigError, match="batch_size >= 1"):
        OpenAIEmbedder("http://127.0.0.1:11434/v1", "m", batch_size=0)


async def test_a_bare_string_is_refused(fake):
    with pytest.raises(InvalidRequest, match="wrap a single text"):
        await make(fake).embed("text", purpose="query")


async def test_the_embedder_closes_only_the_client_it_made(fake):
    client = fake.client()
    embedder = OpenAIEmbedder(
        fake.url, "test-embed", api_key=SecretStr(fake.api_key), client=client
    )
    await embedder.embed(["x"], purpose="query")
    await embedder.aclose()
    assert not client.is_closed
    await client.aclose()

    own = OpenAIEmbedder("http://127.0.0.1:9/v1", "m")
    made = own._http()
    await own.aclose()
    assert made.is_closed


async def test_from_spec_carries_every_field(fake, monkeypatch):
    monkeypatch.setenv("EMBED_KEY", fake.api_key)
    spec = OpenAIEmbedderSpec(
        type="openai",
        url=fake.url,
        model="test-embed",
        api_key_env="EMBED_KEY",
        dimension=16,
        query_prefix="q: ",
        document_prefix="d: ",
        batch_size=2,
        timeout_s=5,
    )
    embedder = embedder_from_spec(spec, client=fake.client())
    assert isinstance(embedder, OpenAIEmbedder)
    assert (embedder.dimension, embedder.batch_size, embedder.timeout_s) == (16, 2, 5)
    await embedder.embed(["a", "b", "c"], purpose="query")
    assert fake.embedded == ["q: a", "q: b", "q: c"]
    assert len(fake.log) == 2


# -- the exact wire ----------------------------------------------------------------------------


async def test_the_request_on_the_wire(fake):
    embedder = make(fake)
    await embedder.embed(["hello world"], purpose="query")
    (request,) = fake.log
    assert request.method == "POST"
    assert str(request.url) == "https://embed.test/v1/embeddings"
    assert request.headers["authorization"] == f"Bearer {fake.api_key}"
    assert request.headers["content-type"] == "application/json"
    assert request.headers["accept"] == "application/json"
    assert json.loads(request.content) == {
        "model": "test-embed",
        "input": ["hello world"],
        "encoding_format": "float",
    }


async def test_no_key_means_no_authorization_header(fake):
    fake.api_key = None
    embedder = OpenAIEmbedder(fake.url, "test-embed", client=fake.client())
    await embedder.embed(["x"], purpose="query")
    assert "authorization" not in fake.log[0].headers


@pytest.mark.parametrize(
    ("url", "endpoint"),
    [
        ("http://127.0.0.1:11434/v1", "http://127.0.0.1:11434/v1/embeddings"),
        ("http://127.0.0.1:11434/v1/", "http://127.0.0.1:11434/v1/embeddings"),
        ("https://api.openai.com/v1/embeddings", "https://api.openai.com/v1/embeddings"),
    ],
)
def test_the_endpoint_of_a_base_url(url, endpoint):
    assert embeddings_url(url) == endpoint


def test_request_bodies_and_answers_are_plain_functions():
    assert embeddings_request("m", ["a", ""], prefix="") == {
        "model": "m",
        "input": ["a", " "],
        "encoding_format": "float",
    }
    answer = {"data": [{"index": 1, "embedding": [0.0, 1.0]}, {"index": 0, "embedding": [1, 0]}]}
    assert parse_embeddings(json.dumps(answer), 2, where="w") == [[1, 0], [0.0, 1.0]]
    with pytest.raises(MalformedAnswer, match="index 0 twice"):
        parse_embeddings(
            '{"data": [{"index": 0, "embedding": [1]}, {"index": 0, "embedding": [1]}]}',
            2,
            where="w",
        )


def test_status_mapping():
    assert status_error(200, "", where="w", key_env=None) is None
    assert isinstance(status_error(401, "", where="w", key_env="K"), ConfigError)
    assert isinstance(status_error(404, "", where="w", key_env=None), ConfigError)
    assert type(status_error(429, "", where="w", key_env=None)) is StoreUnavailable
    assert type(status_error(400, '{"error": "too long"}', where="w", key_env=None)) is (
        StoreUnavailable
    )
    assert "too long" in str(status_error(400, '{"error": "too long"}', where="w", key_env=None))


def test_retry_after_reads_seconds_and_dates():
    assert retry_after(httpx.Headers({"Retry-After": "1.5"})) == 1.5
    assert retry_after(httpx.Headers({})) is None
    assert retry_after(httpx.Headers({"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"})) == 0.0
