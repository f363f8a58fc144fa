"""Pydantic models of the workflow YAML file (schema version 1).

Every model forbids unknown keys. Store specs are a union discriminated by `type`, so a typo in
any field fails at load with a path into the document. Nothing here imports a store backend.
"""

from __future__ import annotations

import re
import string
from pathlib import Path
from typing import Annotated, Literal, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    SecretStr,
    StrictBool,
    ValidationError,
    ValidatorFunctionWrapHandler,
    field_validator,
)

from animus_flows.config.embedder import EmbedderSpec
from animus_flows.redaction import looks_like_secret

ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"
ID_HINT = "letters, digits, '.', '_' and '-', starting with a letter or digit"
ENV_NAME_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
TEMPLATE_FIELDS = frozenset({"project_id", "agent_id", "task_id", "phase_id"})

Identifier = Annotated[str, Field(pattern=ID_PATTERN, max_length=128)]
MemoryTypeName = Literal["episodic", "semantic", "procedural", "active", "reflective"]
TierName = Literal["hot", "warm", "cold"]


class Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


ModelT = TypeVar("ModelT", bound=Model)


def template_fields(template: str) -> list[str]:
    """The `{field}` names used by a format template; raises ValueError on broken braces."""
    names = []
    for _, name, spec, conversion in string.Formatter().parse(template):
        if name is None:
            continue
        if not name or spec or conversion or not name.isidentifier():
            raise ValueError(
                f"placeholder {{{name}}} is not a plain field; use one of "
                f"{', '.join(sorted(TEMPLATE_FIELDS))}, or double the braces for a literal"
            )
        names.append(name)
    return names


def check_template(template: str) -> str:
    try:
        unknown = [name for name in template_fields(template) if name not in TEMPLATE_FIELDS]
    except ValueError as exc:
        problem = str(exc).replace("Single ", "single ").replace("format string", repr(template))
        raise ValueError(f"{problem}; write {{{{ and }}}} for literal braces") from None
    if unknown:
        raise ValueError(
            f"unknown placeholder {{{unknown[0]}}}; use "
            + ", ".join(f"{{{f}}}" for f in sorted(TEMPLATE_FIELDS))
        )
    return template


# -- stores --------------------------------------------------------------------------------


class SQLiteSpec(Model):
    """The embedded SQLite store."""

    type: Literal["sqlite"]
    path: str = Field(".animus/memory.db", description="Database file, relative to the YAML file.")
    busy_timeout_ms: int = Field(5000, ge=0, description="How long a write waits for a lock.")
    language: str = Field(
        "english",
        description="Stop words and stemming (Snowball's languages, or simple: neither).",
    )
    embedder: EmbedderSpec | None = Field(
        None, description="A model to rank by meaning too (section 11); omitted: words only."
    )

    @field_validator("language")
    @classmethod
    def _known_language(cls, language: str) -> str:
        from animus_flows.stores.analysis import languages

        known = languages()
        if language not in known:
            raise ValueError(f"unknown language {language[:40]!r}; use one of {', '.join(known)}")
        return language


class ZepSpec(Model):
    """The Zep reference store (https://www.getzep.com)."""

    type: Literal["zep"]
    base_url: str = Field("https://api.getzep.com", description="Zep API base URL.")
    api_key: SecretStr | None = Field(
        None, description="Zep API key; prefer api_key_env to keep it out of the file."
    )
    api_key_env: str = Field(
        "ZEP_API_KEY", description="Name of the environment variable holding the API key."
    )
    timeout_s: float = Field(10.0, gt=0, description="Deadline for one call, retries included.")
    max_retries: int = Field(
        3, ge=0, description="Retries of a 408, 429 or 5xx answer (the SDK's backoff)."
    )

    @field_validator("api_key_env")
    @classmethod
    def _env_name(cls, name: str) -> str:
        # A key pasted here would otherwise be echoed by every "set the ... variable" message.
        if looks_like_secret(name):
            raise ValueError(
                "looks like an API key, not the name of an environment variable; put the key "
                "in an environment variable such as ZEP_API_KEY and write the variable's name "
                "here (api_key_env: ZEP_API_KEY)"
            )
        if not ENV_NAME_PATTERN.match(name):
            raise ValueError(
                f"{name!r} is not an environment variable name; use letters, digits and '_', "
                "not starting with a digit (e.g. api_key_env: ZEP_API_KEY)"
            )
        return name


class JsonRpcSpec(Model):
    """An out-of-process plugin speaking the JSON-RPC memory-store protocol on stdio."""

    type: Literal["jsonrpc"]
    command: list[str] = Field(min_length=1, description="The plugin's command line.")
    env: dict[str, str] = Field(default_factory=dict, description="Extra environment variables.")
    cwd: str | None = Field(
        None, description="Working folder, relative to the YAML file; default: its folder."
    )
    startup_timeout_ms: int = Field(5000, ge=1, description="Deadline for `initialize`.")
    call_timeout_ms: int = Field(5000, ge=1, description="Deadline for one call.")


class PostgresSpec(Model):
    """PostgreSQL, the store many workers share (DESIGN section 12); needs the postgres extra
    at run time, not to load the file."""

    type: Literal["postgres"]
    dsn_env: str = Field(
        "ANIMUS_DATABASE_URL",
        description="Environment variable holding the DSN (postgresql://USER:PASSWORD@HOST/DB);"
        " the DSN itself never goes in the file.",
    )
    schema_: str = Field(
        "animus",
        alias="schema",
        description="The PostgreSQL schema holding the store's tables (lowercase letters, "
        "digits and '_').",
    )
    language: str = Field(
        "english",
        description="The text search configuration: stop words and stemming (english, german, "
        "...; simple: neither); the server must have it.",
    )
    pool_max_size: int = Field(10, ge=1, description="The most connections a process opens.")
    embedder: EmbedderSpec | None = Field(
        None, description="A model to rank by meaning too (section 11); omitted: words only."
    )

    @field_validator("dsn_env")
    @classmethod
    def _env_name(cls, name: str) -> str:
        # A DSN pasted here would be echoed by every "set the ... variable" message.
        if "://" in name or "=" in name or looks_like_secret(name):
            raise ValueError(
                "looks like a connection string, not the name of an environment variable; put "
                "the DSN in an environment variable such as ANIMUS_DATABASE_URL and write the "
                "variable's name here (dsn_env: ANIMUS_DATABASE_URL)"
            )
        if not ENV_NAME_PATTERN.match(name):
            raise ValueError(
                f"{name[:80]!r} is not an environment variable name; use letters, digits and "
                "'_', not starting with a digit (e.g. dsn_env: ANIMUS_DATABASE_URL)"
            )
        return name

    @field_validator("schema_")
    @classmethod
    def _schema_name(cls, schema: str) -> str:
        from animus_flows.stores.postgres.schema import schema_problem  # no psycopg needed

        problem = schema_problem(schema)
        if problem is not None:
            raise ValueError(problem)
        return schema

    @field_validator("language")
    @classmethod
    def _configuration_name(cls, language: str) -> str:
        from animus_flows.stores.postgres.schema import language_problem

        problem = language_problem(language)
        if problem is not None:
            raise ValueError(problem)
        return language


class BlockRef(Model):
    """A saved Prefect block document of a memory-store block type."""

    type: Literal["block"]
    block: str = Field(
        pattern=r"^[a-z0-9-]+/[^/]+$",
        description="`<block-type-slug>/<document-name>`, e.g. animus-zep-memory-store/memory-zep.",
    )


STORE_TYPES = ("sqlite", "postgres", "zep", "jsonrpc", "block")
StoreSpec = Annotated[
    SQLiteSpec | PostgresSpec | ZepSpec | JsonRpcSpec | BlockRef, Field(discriminator="type")
]


# -- budget, bindings, agents, workflows ----------------------------------------------------


class BudgetConfig(Model):
    flow_tokens: int | None = Field(None, ge=0, description="Tokens for all phases together.")
    phase_tokens: int | None = Field(None, ge=0, description="Default cap for one phase.")
    encoding: Literal["cl100k_base", "o200k_base"] = "cl100k_base"


class BindingScope(Model):
    kind: Literal["project", "agent", "task"] = "project"


class InjectWhen(Model):
    phases: list[Identifier] = Field(default_factory=list)


class MemoryBinding(Model):
    """A corpus binding: which store to query before a phase, in which scope, within what budget."""

    plugin: Identifier
    binding: Identifier
    scope: BindingScope = BindingScope()
    read: StrictBool = True
    write: StrictBool = False
    query_strategy: Literal["semantic", "key", "none"] = "semantic"
    top_k: int | None = Field(
        None,
        ge=1,
        description="The most hits asked of the store; omitted: as many as fit budget_tokens.",
    )
    budget_tokens: int = Field(2000, ge=0)
    inject_when: InjectWhen = InjectWhen()
    key: str | None = None
    tiers: list[TierName] = Field(default_factory=lambda: ["hot", "warm"], min_length=1)
    memory_types: list[MemoryTypeName] | None = None
    timeout_ms: int = Field(500, ge=1)

    @field_validator("key")
    @classmethod
    def _key_template(cls, key: str | None) -> str | None:
        return None if key is None else check_template(key)

    def applies_to(self, phase_id: str) -> bool:
        return not self.inject_when.phases or phase_id in self.inject_when.phases


class ScratchpadConfig(Model):
    """The per-agent scratchpad (the `memory:` block)."""

    enabled: StrictBool = False
    scope: Identifier | None = None
    max_context_chars: int = Field(6000, ge=1)


class CommandRunner(Model):
    """An agent process: the contract goes in as a JSON file, its stdout is the phase output."""

    command: list[str] = Field(min_length=1)
    timeout_s: float = Field(600.0, gt=0, allow_inf_nan=False)
    env: dict[str, str] = Field(default_factory=dict)


def check_import_path(path: str) -> str:
    """`path` if it reads `module:function` (or `file.py:function`); else a ValueError."""
    module, sep, function = path.rpartition(":")
    if not sep or not module or not function.isidentifier():
        raise ValueError(
            f"runner {path!r} is not an import path; write 'package.module:function'"
            " or 'path/to/file.py:function'"
        )
    return path


class PythonRunner(Model):
    """A Python runner with a deadline: `{python: "module:function", timeout_s: 600}`.

    The plain string form `runner: "module:function"` is the same runner without one.
    """

    python: str = Field(
        description="The runner's import path: 'package.module:function', or "
        "'path/to/file.py:function' relative to the workflow file."
    )
    timeout_s: float | None = Field(
        None,
        gt=0,
        allow_inf_nan=False,
        description="Seconds the runner may take; past them the phase fails. None: no deadline.",
    )

    _python = field_validator("python")(check_import_path)


class MemoryLoaderConfig(Model):
    """The memory loader's settings for one agent (seed 002); every field is optional."""

    budget: int | None = Field(
        None,
        ge=0,
        description="Token budget of one memory load for this agent (seed 002's memoryBudget); "
        "default 2000.",
    )
    sectors: list[MemoryTypeName] | None = Field(
        None,
        min_length=1,
        description="Memory types the loader brings this agent (seed 002's sectors); default by "
        "role for dev, qa, architect, pm, po and sm, else every type.",
    )


def _validate_member(model: type[ModelT], value: dict[str, object]) -> ModelT:
    """`model.model_validate(value)` with its errors located under the model's name, the way
    pydantic locates a union member's errors: the loader drops the name from the path and
    lists that model's keys when one is unknown."""
    try:
        return model.model_validate(value)
    except ValidationError as exc:
        errors = [
            {
                "type": e["type"],
                "loc": (model.__name__, *e["loc"]),
                "input": e["input"],
                "ctx": e.get("ctx", {}),
            }
            for e in exc.errors()
        ]
        raise ValidationError.from_exception_data(exc.title, errors) from None  # type: ignore[arg-type]


class AgentConfig(Model):
    runner: str | PythonRunner | CommandRunner = "animus_flows.runners:echo"
    memory: ScratchpadConfig = ScratchpadConfig()
    memory_bindings: list[MemoryBinding] = Field(default_factory=list)
    memory_loader: MemoryLoaderConfig = MemoryLoaderConfig()

    @field_validator("runner", mode="wrap")
    @classmethod
    def _runner(
        cls, runner: object, validate: ValidatorFunctionWrapHandler
    ) -> str | PythonRunner | CommandRunner:
        # The value's shape picks the member, so a mistake gets one message about that member,
        # not one per member of the union.
        if isinstance(runner, dict) and "command" in runner:
            return _validate_member(CommandRunner, runner)
        if isinstance(runner, dict) and "python" in runner:
            return _validate_member(PythonRunner, runner)
        if not isinstance(runner, str | PythonRunner | CommandRunner):
            # a mapping's values are not quoted: a command runner's `env` may hold secrets
            got = (
                f"a mapping with keys {', '.join(repr(str(k)) for k in runner) or 'none'}"
                if isinstance(runner, dict)
                else repr(runner)
            )
            raise ValueError(
                "must be an import path such as 'package.module:function', a mapping "
                "{python: 'package.module:function', timeout_s: 600} for one with a deadline, "
                f"or a mapping {{command: [...]}} for a process, got {got}"
            )
        if isinstance(runner, str):
            check_import_path(runner)
        return validate(runner)


BUILTIN_HOOKS = {"pre_phase": ("memory_bindings", "scratchpad"), "post_phase": ("write_back",)}


def _check_hooks(names: list[str], stage: str) -> list[str]:
    for name in names:
        if ":" not in name and name not in BUILTIN_HOOKS[stage]:
            raise ValueError(
                f"unknown {stage} hook {name!r}; use a built-in "
                f"({', '.join(BUILTIN_HOOKS[stage])}) or 'package.module:function'"
            )
    return names


class HooksConfig(Model):
    pre_phase: list[str] = Field(default_factory=lambda: list(BUILTIN_HOOKS["pre_phase"]))
    post_phase: list[str] = Field(default_factory=lambda: list(BUILTIN_HOOKS["post_phase"]))

    @field_validator("pre_phase")
    @classmethod
    def _pre(cls, names: list[str]) -> list[str]:
        return _check_hooks(names, "pre_phase")

    @field_validator("post_phase")
    @classmethod
    def _post(cls, names: list[str]) -> list[str]:
        return _check_hooks(names, "post_phase")


class PhaseConfig(Model):
    id: Identifier
    agent: Identifier
    prompt: str = ""

    @field_validator("prompt")
    @classmethod
    def _prompt_template(cls, prompt: str) -> str:
        return check_template(prompt)


class WorkflowConfig(Model):
    memory_bindings: list[MemoryBinding] = Field(default_factory=list)
    hooks: HooksConfig = HooksConfig()
    phases: list[PhaseConfig] = Field(min_length=1)


class AuditConfig(Model):
    path: str | None = Field(None, description="JSONL audit file, relative to the YAML file.")


def has_control_character(project: str) -> bool:
    """Whether a project id holds a control character: the id lands in scopes, file names and
    one-line messages, so no NUL, newline or escape."""
    return any(ord(c) < 32 or ord(c) == 127 for c in project)


class WorkflowFile(Model):
    """The whole workflow YAML document, as `load_workflow` returns it.

    `source` is the file it came from (None when built in code); relative paths in the
    document resolve against its folder.
    """

    version: Literal[1]
    project: str | None = Field(None, min_length=1, max_length=256)
    stores: dict[Identifier, StoreSpec] = Field(default_factory=dict)
    budget: BudgetConfig = BudgetConfig()
    audit: AuditConfig = AuditConfig()
    agents: dict[Identifier, AgentConfig] = Field(default_factory=dict)
    workflows: dict[Identifier, WorkflowConfig] = Field(default_factory=dict)

    _source: Path | None = PrivateAttr(None)

    @field_validator("version", mode="before")
    @classmethod
    def _integer_version(cls, version: object) -> object:
        # Literal[1] alone takes `true` and `1.0` (both equal 1 in Python)
        if type(version) is not int:
            raise ValueError(
                f"must be the integer 1, got {str(version)[:20]!r}; write `version: 1`"
            )
        return version

    @field_validator("project")
    @classmethod
    def _printable_project(cls, project: str | None) -> str | None:
        if project is not None and has_control_character(project):
            raise ValueError(
                f"project {project!r} contains a control character; "
                "use a plain name such as 'trade-desk'"
            )
        return project

    @property
    def source(self) -> Path | None:
        return self._source

    @property
    def base_dir(self) -> Path:
        return self._source.parent if self._source is not None else Path.cwd()

    @property
    def project_id(self) -> str:
        """`project:`, else the name of the file's folder."""
        return self.project or self.base_dir.resolve().name or "default"

    def resolve_path(self, path: str | Path) -> Path:
        """A path from the document, relative to the file's folder."""
        return self.base_dir / Path(path).expanduser()
