"""`type: postgres` in the workflow file, the registry and saved blocks, and the `animus memory`
commands over the PostgreSQL store, as real subprocesses against the session's cluster."""

import itertools
import json
import os
import subprocess
import sys
import textwrap

import pytest

from animus_flows.blocks import PostgresMemoryStore
from animus_flows.config import load_workflow
from animus_flows.errors import ConfigError
from animus_flows.protocol import Scope
from animus_flows.stores.jsonrpc import JsonRpcStore
from animus_flows.stores.postgres import PostgresStore
from animus_flows.stores.redacting import RedactingStore
from animus_flows.stores.registry import PluginRegistry

_schemas = itertools.count()
SECRET = "cli-s3cret-word"


@pytest.fixture
def schema(postgres_dsn):
    return f"cfg{next(_schemas)}"


def workflow(folder, schema, extra=""):
    path = folder / "animus.yaml"
    path.write_text(
        f"version: 1\nproject: desk\nstores:\n  team: {{type: postgres, schema: {schema}{extra}}}\n"
    )
    return path


def test_a_postgres_entry_loads_with_its_defaults(tmp_path):
    path = tmp_path / "animus.yaml"
    path.write_text("version: 1\nstores:\n  team: {type: postgres}\n")
    spec = load_workflow(path).stores["team"]
    assert (spec.dsn_env, spec.schema_, spec.language, spec.embedder) == (
        "ANIMUS_DATABASE_URL",
        "animus",
        "english",
        None,
    )


@pytest.mark.parametrize(
    "entry,message",
    [
        (
            "schema: Team-Memory",
            "stores.team.schema: 'Team-Memory' is not a schema name this store uses; use "
            "lowercase letters, digits and '_' (at most 63, not starting with a digit or pg_), "
            "e.g. animus",
        ),
        (
            "language: 'english; drop'",
            "stores.team.language: 'english; drop' is not a text search configuration name; use "
            "a lowercase name such as english, german or simple (optionally schema.name)",
        ),
        (
            f"dsn_env: 'postgresql://app:{SECRET}@db/prod'",
            "stores.team.dsn_env: looks like a connection string, not the name of an environment "
            "variable; put the DSN in an environment variable such as ANIMUS_DATABASE_URL and "
            "write the variable's name here (dsn_env: ANIMUS_DATABASE_URL)",
        ),
        ("schma: x", "stores.team.schma: unknown key 'schma'; did you mean 'schema'?"),
        ("pool_max_size: 0", "stores.team.pool_max_size: must be >= 1, got 0"),
    ],
    ids=["schema", "language", "dsn-pasted", "typo", "pool"],
)
def test_a_postgres_entry_with_a_mistake_is_one_located_line(tmp_path, entry, message):
    path = tmp_path / "animus.yaml"
    path.write_text(f"version: 1\nstores:\n  team: {{type: postgres, {entry}}}\n")
    with pytest.raises(ConfigError) as raised:
        load_workflow(path)
    assert str(raised.value).endswith(message), str(raised.value)
    assert SECRET not in str(raised.value) and raised.value.exit_code == 2


def test_the_config_models_load_a_postgres_entry_without_psycopg(tmp_path):
    path = workflow(tmp_path, "animus", ", language: german, embedder: {type: local}")
    script = textwrap.dedent(
        f"""
        import sys
        sys.modules["psycopg"] = None
        sys.modules["psycopg_pool"] = None
        from animus_flows.config import load_workflow
        from animus_flows.stores.specs import open_store
        from animus_flows.errors import ConfigError
        workflow = load_workflow({str(path)!r})
        print(workflow.stores["team"].language)
        try:
            open_store(workflow.stores["team"], workflow, "team")
        except ConfigError as exc:
            print(exc)
        """
    )
    env = {**os.environ, "ANIMUS_DATABASE_URL": "postgresql://localhost/x"}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env)
    assert done.stdout.splitlines() == [
        "german",
        "the PostgreSQL store needs psycopg and psycopg-pool, and psycopg is not installed; "
        'install the postgres extra: pip install "animus-flows[postgres]"',
    ], done.stderr


def test_a_missing_dsn_variable_is_one_line_naming_it(tmp_path, schema, monkeypatch):
    monkeypatch.delenv("TEAM_DB", raising=False)
    registry = PluginRegistry(load_workflow(workflow(tmp_path, schema, ", dsn_env: TEAM_DB")))
    with pytest.raises(ConfigError) as raised:
        registry.get("team")
    assert str(raised.value) == (
        "stores.team: no PostgreSQL DSN; set the TEAM_DB environment variable to "
        "postgresql://USER:PASSWORD@HOST:PORT/DATABASE (or name another one with dsn_env)"
    )


async def test_the_registry_opens_the_store_behind_redaction(
    tmp_path, schema, postgres_dsn, monkeypatch
):
    monkeypatch.setenv("ANIMUS_DATABASE_URL", postgres_dsn)
    registry = PluginRegistry(load_workflow(workflow(tmp_path, schema, ", language: simple")))
    store = registry.get("team")
    assert isinstance(store, RedactingStore) and isinstance(store.inner, PostgresStore)
    assert (store.inner.schema, store.inner.language) == (schema, "simple")
    item = await store.put(Scope("desk"), "deploy", "key AKIAIOSFODNN7EXAMPLE for the walrus")
    assert item.value == "key [REDACTED:aws_access_key] for the walrus"
    assert [hit.key for hit in await store.query(Scope("desk"), "walrus")] == ["deploy"]
    await registry.aclose()


async def test_a_saved_block_resolves_to_a_store_and_keeps_its_dsn_secret(
    tmp_path, schema, postgres_dsn, prefect_api
):
    from prefect.client.orchestration import get_client

    dsn = postgres_dsn.replace("animus@", f"animus:{SECRET}@")  # the cluster trusts any password
    await PostgresMemoryStore(dsn=dsn, schema=schema).save("team-pg", overwrite=True)
    path = tmp_path / "animus.yaml"
    path.write_text("version: 1\nproject: desk\n")
    registry = PluginRegistry(load_workflow(path))
    store = await registry.resolve("team-pg")
    await store.put(Scope("desk"), "k", "walrus")
    assert [hit.key for hit in await store.query(Scope("desk"), "walrus")] == ["k"]
    await registry.aclose()
    async with get_client() as client:
        document = await client.read_block_document_by_name(
            "team-pg", "animus-postgres-memory-store", include_secrets=False
        )
    assert SECRET not in json.dumps(document.model_dump(mode="json"))
    assert document.data["schema"] == schema


# -- the CLI, as a real subprocess ------------------------------------------------------------


def animus(folder, *args, dsn):
    env = {**os.environ, "ANIMUS_DATABASE_URL": dsn}
    return subprocess.run(
        [sys.executable, "-m", "animus_flows", *args],
        cwd=folder,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


def test_memory_commands_put_get_query_list_delete_and_reindex(tmp_path, schema, postgres_dsn):
    workflow(tmp_path, schema)
    dsn = postgres_dsn.replace("animus@", f"animus:{SECRET}@")
    scope = ["--plugin", "team", "--scope", "agent", "--agent-id", "analyst"]
    put = animus(
        tmp_path,
        *("memory", "put", *scope, "--key", "fx", "--json"),
        *("--value", '{"content": "EUR/USD was exploring the 1.10 range"}'),
        dsn=dsn,
    )
    assert put.returncode == 0, put.stderr
    assert json.loads(put.stdout)["scope"] == {
        "project_id": "desk",
        "agent_id": "analyst",
        "task_id": None,
    }
    question = ("--query", "what did the euro explore", "--json")
    query = animus(tmp_path, "memory", "query", *scope, *question, dsn=dsn)
    assert query.returncode == 0, query.stderr
    (hit,) = json.loads(query.stdout)["hits"]
    assert hit["key"] == "fx" and 0 < hit["score"] < 1
    got = animus(tmp_path, "memory", "get", *scope, "--key", "fx", "--json", dsn=dsn)
    assert json.loads(got.stdout)["value"]["content"].startswith("EUR/USD")
    listed = animus(tmp_path, "memory", "list-scopes", "--plugin", "team", "--json", dsn=dsn)
    assert json.loads(listed.stdout)["scopes"] == [
        {"project_id": "desk", "agent_id": "analyst", "task_id": None}
    ]
    reindexed = animus(tmp_path, "memory", "reindex", "--plugin", "team", "--json", dsn=dsn)
    assert json.loads(reindexed.stdout) == {"reindexed": 1}, reindexed.stderr
    deleted = animus(tmp_path, "memory", "delete", *scope, "--key", "fx", "--json", dsn=dsn)
    assert deleted.returncode == 0, deleted.stderr
    for done in (put, query, got, listed, reindexed, deleted):
        assert SECRET not in done.stdout + done.stderr


def test_cli_errors_are_one_line_without_the_dsn(tmp_path, schema):
    workflow(tmp_path, schema)
    args = ("memory", "get", "--plugin", "team", "--scope", "project", "--key", "k")
    unreachable = animus(tmp_path, *args, dsn=f"postgresql://animus:{SECRET}@127.0.0.1:1/x")
    assert unreachable.returncode == 1
    assert unreachable.stderr.count("\n") == 1 and "Traceback" not in unreachable.stderr
    assert "cannot reach PostgreSQL" in unreachable.stderr and SECRET not in unreachable.stderr
    missing = animus(tmp_path, *args, dsn="")
    assert missing.returncode == 2
    assert "set the ANIMUS_DATABASE_URL environment variable" in missing.stderr
    assert missing.stderr.count("\n") == 1


async def test_memory_serve_exposes_the_store_as_a_plugin(tmp_path, schema, postgres_dsn):
    workflow(tmp_path, schema)
    command = [sys.executable, "-m", "animus_flows", "memory", "serve", "--plugin", "team"]
    store = JsonRpcStore(
        command,
        plugin_id="served-postgres",
        cwd=tmp_path,
        env={"ANIMUS_DATABASE_URL": postgres_dsn},
        startup_timeout_ms=60000,
        call_timeout_ms=30000,
    )
    hello = await store.connect()
    assert hello.capabilities.native_ttl and hello.capabilities.strong_consistency
    await store.put(Scope("desk", task_id="t-1"), "k", "the walrus rests")
    hits = await store.query(Scope("desk", task_id="t-1"), "walruses resting")
    assert [hit.key for hit in hits] == ["k"]
    assert await store.delete(Scope("desk", task_id="t-1"), "k") is True
    await store.aclose()
