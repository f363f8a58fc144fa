"""`animus memory ...` against a `type: zep` store (Zep faked at the HTTP layer): the key is
read from the environment and never printed; HTTP failures are one line and the right code."""

import json

import pytest
import respx
from typer.testing import CliRunner

from animus_flows.cli import app

KEY_ENV = "ANIMUS_TEST_ZEP_KEY"


@pytest.fixture
def project(tmp_path, monkeypatch, zep_fake):
    (tmp_path / "animus.yaml").write_text(
        "version: 1\nproject: demo\nstores:\n"
        f"  memory-zep: {{type: zep, base_url: '{zep_fake.base_url}', api_key_env: {KEY_ENV},"
        " timeout_s: 0.5, max_retries: 0}\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(KEY_ENV, zep_fake.api_key)
    with respx.mock(base_url=zep_fake.base_url, assert_all_called=False) as router:
        router.route().mock(side_effect=zep_fake.handle)
        yield tmp_path


def invoke(*args: str):
    return CliRunner().invoke(app, ["memory", *args, "--scope", "project"])


def test_put_get_query_and_prune_through_zep(project, zep_fake):
    zep_fake.index_delay_s = 0  # each command is a fresh process: no waiting in between
    put = invoke("put", "--key", "fx", "--value", '{"content": "EUR/USD at 1.09"}', "--json")
    assert put.exit_code == 0, put.output
    assert json.loads(put.stdout)["value"] == {"content": "EUR/USD at 1.09"}
    got = invoke("get", "--key", "fx", "--json")
    assert json.loads(got.stdout)["key"] == "fx"
    hits = json.loads(invoke("query", "--query", "EUR/USD", "--json").stdout)["hits"]
    assert [hit["key"] for hit in hits] == ["fx"]
    assert json.loads(invoke("prune", "--dry-run", "--json").stdout) == {"would_delete": 1}
    assert json.loads(invoke("prune", "--json").stdout) == {"deleted": 1}
    for result in (put, got):
        assert zep_fake.api_key not in result.output


@pytest.mark.parametrize(
    "status,code,message",
    [
        (401, 2, "error: Zep at https://zep.test/api/v2 refused the API key (HTTP 401 on memory."),
        (403, 2, "error: Zep at https://zep.test/api/v2 refused the API key (HTTP 403 on memory."),
        (503, 1, "error: Zep answered HTTP 503 to memory.get_session_messages: echo ***"),
        (500, 1, "error: Zep answered HTTP 500 to memory.get_session_messages: echo ***"),
    ],
)
def test_http_failures_are_one_line_and_never_show_the_key(
    project, zep_fake, status, code, message
):
    zep_fake.fail_next(status, times=1000, body=f'{{"message": "echo {zep_fake.api_key}"}}')
    result = invoke("get", "--key", "fx")
    assert result.exit_code == code, result.output
    assert result.stderr.startswith(message)
    assert len(result.stderr.strip().splitlines()) == 1
    assert zep_fake.api_key not in result.output
    assert result.stdout == ""


def test_a_missing_key_names_the_environment_variable(project, monkeypatch):
    monkeypatch.delenv(KEY_ENV)
    result = invoke("get", "--key", "fx")
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        f"error: stores.memory-zep: no Zep API key; set the {KEY_ENV} environment variable "
        "(or name another one with api_key_env)"
    )
