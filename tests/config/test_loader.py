"""The workflow file: a full document loads; every kind of mistake names file, line and fix."""

import json
import os
import textwrap

import pytest

from animus_flows.config import SQLiteSpec, load_workflow, parse_workflow
from animus_flows.config.loader import workflow_warnings
from animus_flows.config.schema import workflow_json_schema
from animus_flows.errors import ConfigError

FULL = textwrap.dedent(
    """\
    version: 1
    project: trade-desk
    stores:
      memory-local:
        type: sqlite
        path: .animus/memory.db
      memory-zep:
        type: block
        block: animus-zep-memory-store/memory-zep
    budget:
      flow_tokens: 12000
      phase_tokens: 4000
      encoding: cl100k_base
    agents:
      trade-analyst:
        runner: animus_flows.runners:echo
        memory:
          enabled: true
          scope: trade-analyst
          max_context_chars: 6000
        memory_bindings:
          - plugin: memory-local
            binding: market-context
            scope: {kind: agent}
            read: true
            write: true
            query_strategy: semantic
            top_k: 8
            budget_tokens: 2000
            inject_when: {phases: [research, plan]}
            tiers: [hot, warm]
            memory_types: [semantic, procedural]
            timeout_ms: 500
    workflows:
      research:
        memory_bindings:
          - plugin: memory-zep
            binding: company-wiki
            query_strategy: key
            key: "{task_id}/brief"
        hooks:
          pre_phase: [memory_bindings, scratchpad, "my_pkg.hooks:guardrails"]
          post_phase: [write_back]
        phases:
          - id: research
            agent: trade-analyst
            prompt: "Gather market context for {task_id}."
          - id: plan
            agent: trade-analyst
            prompt: "Draft a plan from the research."
    """
)


def test_the_design_example_loads_with_every_field(tmp_path):
    path = tmp_path / "workflow.yaml"
    path.write_text(FULL)
    wf = load_workflow(path)
    assert wf.project_id == "trade-desk"
    assert wf.source == path and wf.base_dir == tmp_path
    assert isinstance(wf.stores["memory-local"], SQLiteSpec)
    assert wf.resolve_path(wf.stores["memory-local"].path) == tmp_path / ".animus/memory.db"
    binding = wf.agents["trade-analyst"].memory_bindings[0]
    assert (binding.scope.kind, binding.write, binding.top_k, binding.timeout_ms) == (
        "agent",
        True,
        8,
        500,
    )
    assert binding.applies_to("plan") and not binding.applies_to("act")
    research = wf.workflows["research"]
    assert research.memory_bindings[0].key == "{task_id}/brief"
    assert research.hooks.pre_phase[-1] == "my_pkg.hooks:guardrails"
    assert [p.id for p in research.phases] == ["research", "plan"]
    assert wf.budget.flow_tokens == 12000


def test_defaults_fill_a_minimal_file(tmp_path):
    folder = tmp_path / "my-project"
    folder.mkdir()
    path = folder / "animus.yaml"
    path.write_text("version: 1\nagents: {a: {}}\nworkflows: {w: {phases: [{id: p, agent: a}]}}\n")
    wf = load_workflow(path)
    assert wf.project_id == "my-project"
    assert wf.agents["a"].runner == "animus_flows.runners:echo"
    assert wf.workflows["w"].hooks.pre_phase == ["memory_bindings", "scratchpad"]
    assert wf.workflows["w"].hooks.post_phase == ["write_back"]
    assert wf.budget.flow_tokens is None and wf.budget.encoding == "cl100k_base"


def _error(text: str) -> str:
    with pytest.raises(ConfigError) as info:
        parse_workflow(text, "workflow.yaml")
    return str(info.value)


def _mutate(old: str, new: str) -> str:
    assert old in FULL, old
    return _error(FULL.replace(old, new, 1))


@pytest.mark.parametrize(
    "old,new,expected",
    [
        (
            "top_k: 8",
            "top_k: 0",
            "workflow.yaml:28:16: agents.trade-analyst.memory_bindings[0].top_k: must be >= 1",
        ),
        (
            "budget_tokens: 2000",
            "budget_token: 2000",
            "workflow.yaml:29:9: agents.trade-analyst.memory_bindings[0].budget_token: unknown key "
            "'budget_token'; did you mean 'budget_tokens'?",
        ),
        (
            "type: sqlite",
            "type: sqlit",
            "workflow.yaml:5:11: stores.memory-local.type: unknown store type 'sqlit'; expected one "
            "of 'sqlite', 'postgres', 'zep', 'jsonrpc', 'block'",
        ),
        (
            "read: true",
            "read: maybe",
            "workflow.yaml:25:15: agents.trade-analyst.memory_bindings[0].read: must be true or "
            "false, got 'maybe'",
        ),
        (
            "query_strategy: semantic",
            "query_strategy: vector",
            "agents.trade-analyst.memory_bindings[0].query_strategy: must be one of 'semantic', "
            "'key' or 'none'",
        ),
        (
            "kind: agent",
            "kind: team",
            "agents.trade-analyst.memory_bindings[0].scope.kind: must be one of 'project', 'agent' "
            "or 'task'",
        ),
        (
            "plugin: memory-local",
            "plugin: memory local",
            "agents.trade-analyst.memory_bindings[0].plugin: 'memory local' is not a valid id",
        ),
        (
            "binding: market-context",
            "binding: 'market/context'",
            "memory_bindings[0].binding: 'market/context' is not a valid id",
        ),
        (
            'agent: trade-analyst\n        prompt: "Gather',
            'agent: trade-analist\n        prompt: "Gather',
            "workflow.yaml:46:16: workflows.research.phases[0].agent: unknown agent 'trade-analist'; "
            "define it under agents (did you mean 'trade-analyst'?)",
        ),
        (
            "id: plan",
            "id: research",
            "workflows.research.phases[1].id: duplicate phase id 'research'",
        ),
        (
            "{task_id}.",
            "{tusk}.",
            "workflows.research.phases[0].prompt: unknown placeholder {tusk}",
        ),
        (
            'key: "{task_id}/brief"',
            'key: "{subject}/brief"',
            "workflows.research.memory_bindings[0].key: unknown placeholder {subject}",
        ),
        (
            '        key: "{task_id}/brief"\n',
            "",
            "workflows.research.memory_bindings[0].query_strategy: query_strategy key needs a `key`",
        ),
        (
            "phases: [research, plan]",
            "phases: [research, plna]",
            "agents.trade-analyst.memory_bindings[0].inject_when.phases[1]: unknown phase 'plna'",
        ),
        (
            "post_phase: [write_back]",
            "post_phase: [writeback]",
            "workflows.research.hooks.post_phase: unknown post_phase hook 'writeback'",
        ),
        (
            "runner: animus_flows.runners:echo",
            "runner: echo",
            "agents.trade-analyst.runner: runner 'echo' is not an import path",
        ),
        (
            "runner: animus_flows.runners:echo",
            "runner: 7",
            "agents.trade-analyst.runner: must be an import path such as "
            "'package.module:function', a mapping {python: 'package.module:function', "
            "timeout_s: 600} for one with a deadline, or a mapping {command: [...]} for a "
            "process, got 7",
        ),
        (
            "runner: animus_flows.runners:echo",
            "runner: {command: []}",
            "agents.trade-analyst.runner.command: must not be empty",
        ),
        ("enabled: true", 'enabled: "yes"', "memory.enabled: must be true or false, got 'yes'"),
        ("enabled: true", "enabled: 1", "memory.enabled: must be true or false, got 1"),
        ("timeout_ms: 500", "timeout_ms: .inf", "timeout_ms: must be a finite number, got inf"),
        (
            "{task_id}.",
            "{task_id} }.",
            "prompt: single '}' encountered in 'Gather market context for {task_id} }.'; "
            "write {{ and }} for literal braces",
        ),
        (
            "encoding: cl100k_base",
            "encoding: gpt2",
            "budget.encoding: must be one of 'cl100k_base' or 'o200k_base'",
        ),
        ("flow_tokens: 12000", "flow_tokens: -1", "budget.flow_tokens: must be >= 0"),
        (
            "max_context_chars: 6000",
            "max_context_chars: lots",
            "agents.trade-analyst.memory.max_context_chars: must be an integer, got 'lots'",
        ),
        (
            "block: animus-zep-memory-store/memory-zep",
            "block: memory-zep",
            "stores.memory-zep.block: 'memory-zep' must look like '<block-type-slug>/<block-name>'",
        ),
        ("version: 1", "version: 2", "workflow.yaml:1:10: version: must be one of 1"),
        (
            "    type: block\n",
            "",
            "stores.memory-zep.type: missing `type`; expected one of 'sqlite', 'postgres', 'zep', "
            "'jsonrpc', 'block'",
        ),
    ],
)
def test_each_mistake_is_one_located_line_with_a_fix(old, new, expected):
    message = _mutate(old, new)
    assert expected in message
    assert all(line.startswith("workflow.yaml:") for line in message.splitlines())


@pytest.mark.parametrize(
    "runner",
    [
        "7",
        "[a, b]",
        "{command: []}",
        "{command: [x], timeout_s: 0}",
        "{python: 'm:run', timeout_s: 0}",
        "{python: 'm:run', retries: 2}",
    ],
)
def test_a_wrong_runner_is_one_message_about_the_shape_it_has(runner):
    message = _mutate("runner: animus_flows.runners:echo", f"runner: {runner}")
    assert len(message.splitlines()) == 1, message
    assert "Runner" not in message and ".str:" not in message


@pytest.mark.parametrize(
    "runner,expected",
    [
        (
            "{python: 'm:run', timeout_s: 0}",
            "16:42: agents.trade-analyst.runner.timeout_s: must be > 0",
        ),
        ("{python: 'm:run', timeout_s: -1}", "runner.timeout_s: must be > 0.0, got -1"),
        (
            "{python: 'm:run', timeout_s: .inf}",
            "runner.timeout_s: must be a finite number, got inf",
        ),
        (
            "{command: [x], timeout_s: .inf}",
            "runner.timeout_s: must be a finite number, got inf",
        ),
        ("{python: 'm:run', timeout_s: x}", "runner.timeout_s: must be a number, got 'x'"),
        (
            "{python: 'm:run', timeout: 5}",
            "16:31: agents.trade-analyst.runner.timeout: unknown key 'timeout'; "
            "did you mean 'timeout_s'?",
        ),
        (
            "{python: 'm:run', retries: 2}",
            "runner.retries: unknown key 'retries'; expected one of: python, timeout_s",
        ),
        (
            "{command: [x], retries: 2}",
            "runner.retries: unknown key 'retries'; expected one of: command, timeout_s, env",
        ),
        (
            "{timeout_s: 5}",
            "16:13: agents.trade-analyst.runner: must be an import path such as "
            "'package.module:function', a mapping {python: 'package.module:function', "
            "timeout_s: 600} for one with a deadline, or a mapping {command: [...]} for a "
            "process, got a mapping with keys 'timeout_s'",
        ),
        ("{python: echo}", "runner.python: runner 'echo' is not an import path"),
    ],
)
def test_a_python_runner_mapping_is_checked_like_a_command_runner(runner, expected):
    message = _mutate("runner: animus_flows.runners:echo", f"runner: {runner}")
    assert message.startswith("workflow.yaml:") and expected in message, message


def test_a_python_runner_may_be_a_string_or_a_mapping_with_a_deadline():
    def runner(text):
        return (
            parse_workflow(FULL.replace("animus_flows.runners:echo", text))
            .agents["trade-analyst"]
            .runner
        )

    assert runner("my_pkg.agent:run") == "my_pkg.agent:run"  # the string form, unchanged
    assert runner("{python: 'my_pkg.agent:run'}").timeout_s is None
    spec = runner("{python: 'agents/run.py:run', timeout_s: 90}")
    assert (spec.python, spec.timeout_s) == ("agents/run.py:run", 90)


def test_several_mistakes_are_all_reported_in_file_order():
    text = FULL.replace("top_k: 8", "top_k: -1").replace("timeout_ms: 500", "timeout_ms: soon")
    lines = _error(text).splitlines()
    assert len(lines) == 2 and "top_k" in lines[0] and "timeout_ms" in lines[1]


def test_missing_required_keys_point_at_their_parent():
    message = _error(
        "version: 1\nagents: {a: {}}\nworkflows:\n  w:\n    phases:\n      - {id: p}\n"
    )
    assert message == "workflow.yaml:6:9: workflows.w.phases[0].agent: required key is missing"


@pytest.mark.parametrize(
    "text,expected",
    [
        ("version: 1\nagents: [\n", "workflow.yaml:3:1: invalid YAML: expected the node content"),
        (
            "version: 1\nagents: {}\nagents: {}\n",
            "workflow.yaml:3:1: invalid YAML: duplicate key 'agents' (first defined on line 2)",
        ),
        ("", "workflow.yaml:1:1: the document is empty; start it with `version: 1`"),
        ("- 1\n- 2\n", "the document is a list, not a mapping"),
        ("version: 1\n\tagents: {}\n", "invalid YAML"),
    ],
)
def test_broken_yaml_is_located(text, expected):
    assert expected in _error(text)


def test_file_problems_are_config_errors(tmp_path):
    with pytest.raises(ConfigError, match="no such file"):
        load_workflow(tmp_path / "missing.yaml")
    with pytest.raises(ConfigError, match="is a folder"):
        load_workflow(tmp_path)
    bad = tmp_path / "latin1.yaml"
    bad.write_bytes("version: 1\nproject: caf\xe9\n".encode("latin-1"))
    with pytest.raises(ConfigError, match="not UTF-8"):
        load_workflow(bad)


def test_secret_values_never_appear_in_errors():
    text = "version: 1\nstores:\n  z: {type: zep, api_key: [sk-live-123456]}\n"
    message = _error(text)
    assert "stores.z.api_key" in message and "sk-live" not in message


def test_plugins_missing_from_stores_are_warnings_not_errors():
    text = FULL.replace("plugin: memory-zep", "plugin: memory-confluence")
    warnings = workflow_warnings(parse_workflow(text))
    assert len(warnings) == 1 and "'memory-confluence' is not under `stores`;" in warnings[0]


def test_a_key_template_beside_another_strategy_is_ignored_with_a_warning():
    # as in DESIGN.md's example workflow: the template stays, the binding queries semantically
    text = FULL.replace("query_strategy: key\n", "query_strategy: semantic\n")
    assert 'key: "{task_id}/brief"' in text
    workflow = parse_workflow(text)
    (warning,) = workflow_warnings(workflow)
    assert warning.startswith("workflows.research.memory_bindings[0].key: ignored")
    assert "only used with query_strategy: key (this binding uses semantic)" in warning


def test_json_schema_describes_the_file():
    schema = workflow_json_schema()
    json.dumps(schema)
    assert schema["title"].startswith("animus-flows workflow file")
    assert {"version", "stores", "agents", "workflows", "budget"} <= set(schema["properties"])
    assert schema["additionalProperties"] is False
    runner = json.dumps(schema["$defs"]["AgentConfig"]["properties"]["runner"])
    assert "PythonRunner" in runner and "CommandRunner" in runner
    python = schema["$defs"]["PythonRunner"]
    assert python["required"] == ["python"] and python["additionalProperties"] is False
    assert set(python["properties"]) == {"python", "timeout_s"}


def test_an_agent_may_set_its_memory_loader_budget_and_sectors():
    workflow = parse_workflow(
        "version: 1\nagents:\n  dev: {memory_loader: {budget: 3000, sectors: [procedural]}}\n"
        "  qa: {}\n",
        "w.yaml",
    )
    assert workflow.agents["dev"].memory_loader.budget == 3000
    assert workflow.agents["dev"].memory_loader.sectors == ["procedural"]
    assert workflow.agents["qa"].memory_loader.budget is None
    with pytest.raises(ConfigError) as caught:
        parse_workflow(
            "version: 1\nagents:\n  dev:\n    memory_loader: {budget: -1, sector: [x]}\n",
            "w.yaml",
        )
    assert str(caught.value).splitlines() == [
        "w.yaml:4:29: agents.dev.memory_loader.budget: must be >= 0, got -1",
        "w.yaml:4:33: agents.dev.memory_loader.sector: unknown key 'sector'; "
        "did you mean 'sectors'?",
    ]


@pytest.mark.parametrize("project", ['"a\\0b"', '"a\\nerror: x"', '"tab\\there"', '"esc\\e[31m"'])
def test_a_project_id_with_control_characters_is_refused_at_its_line(project):
    message = _error(f"version: 1\nproject: {project}\n")
    assert message.startswith("workflow.yaml:2:") and "contains a control character" in message
    assert "use a plain name such as 'trade-desk'" in message and "\n" not in message


@pytest.mark.parametrize("folder", [b"desk\xff", b"desk\x1b[31m"])
def test_a_folder_name_that_cannot_be_the_project_id_asks_for_project(tmp_path, folder):
    # without `project:` the folder names the project: a name that is not UTF-8 (it comes back
    # with lone surrogates) or holds a control character could name no scope
    path = tmp_path / os.fsdecode(folder) / "animus.yaml"
    path.parent.mkdir()
    path.write_text("version: 1\n")
    with pytest.raises(ConfigError) as caught:
        load_workflow(path)
    message = str(caught.value)
    assert message.endswith("set `project:` in the file") and "\n" not in message
    assert repr(os.fsdecode(folder)) in message
    path.write_text("version: 1\nproject: desk\n")
    assert load_workflow(path).project_id == "desk"
