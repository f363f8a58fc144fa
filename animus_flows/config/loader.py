"""Load a workflow YAML file into validated models, with errors that point into the file.

Errors read `FILE:LINE:COL: key.path: message`, one line each: pydantic's error locations are
walked back through the YAML node tree to the line and column of the offending key or value.
"""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from animus_flows.config.models import ID_HINT, STORE_TYPES, WorkflowFile, has_control_character
from animus_flows.errors import ConfigError
from animus_flows.protocol import is_valid_unicode
from animus_flows.redaction import looks_like_secret, redact_head

Loc = tuple[str | int, ...]


@dataclass(frozen=True)
class Issue:
    """One problem in a document: where it is and what to do about it."""

    loc: Loc
    message: str
    at_key: bool = False  # point at the key itself (unknown keys) rather than its value


#: The most values a workflow file may expand to, aliases counted each time they are used: a
#: sane file holds a few thousand; a few hundred bytes of nested aliases can expand to billions.
MAX_VALUES = 100_000
#: The deepest nesting of mappings and lists a workflow file may have (a real one needs ~8).
MAX_DEPTH = 64
#: How much of a value an error line quotes.
SHOWN_CHARS = 60


class _Loader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys instead of silently keeping the last one, and
    integers too long to read with the line they are on."""

    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
        try:
            return super().construct_yaml_int(node)
        except ValueError:  # more digits than int() reads (sys.get_int_max_str_digits)
            raise yaml.MarkedYAMLError(
                problem=f"the number {node.value[:20]}... has {len(node.value)} digits, too "
                "many to read; quote it if it is text, or use a smaller number",
                problem_mark=node.start_mark,
            ) from None

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, yaml.Node] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if isinstance(key, typing.Hashable) and key in seen:
                raise yaml.MarkedYAMLError(
                    problem=f"duplicate key {key!r} (first defined on line "
                    f"{seen[key].start_mark.line + 1}); keep one",
                    problem_mark=key_node.start_mark,
                )
            seen[key] = key_node
        return super().construct_mapping(node, deep=deep)


_Loader.add_constructor("tag:yaml.org,2002:int", _Loader.construct_yaml_int)


def _shown(value: object) -> str:
    """`value` as an error line quotes it: its repr, cut to `SHOWN_CHARS`, secrets redacted."""
    text = repr(value)
    return redact_head(text, SHOWN_CHARS) + ("..." if len(text) > SHOWN_CHARS else "")


def _check_size(root: yaml.Node) -> None:
    """Refuse a document whose aliases expand past `MAX_VALUES` values, nest deeper than
    `MAX_DEPTH` or refer to themselves, before anything is built from it (aliases share nodes:
    the walk sizes each node once)."""
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()
    stack: list[tuple[yaml.Node, int]] = [(root, 1)]
    while stack:
        node, depth = stack.pop()
        if depth < 0:  # its children are sized: size it
            size = 1 + sum(sizes[id(child)] for child in _children(node))
            open_nodes.discard(id(node))
            if size > MAX_VALUES:
                _refuse(
                    node,
                    f"the aliases here expand to more than {MAX_VALUES} values; a workflow "
                    "file needs far fewer: use fewer or smaller aliases",
                )
            sizes[id(node)] = size
            continue
        if id(node) in sizes:
            continue
        if id(node) in open_nodes:
            _refuse(node, "an alias refers to a value that contains it; remove the loop")
        if depth > MAX_DEPTH:
            _refuse(
                node,
                f"values nest more than {MAX_DEPTH} levels deep; a workflow file needs far "
                "fewer: flatten it",
            )
        open_nodes.add(id(node))
        stack.append((node, -1))
        stack.extend((child, depth + 1) for child in _children(node))


def _refuse(node: yaml.Node, problem: str) -> None:
    raise yaml.MarkedYAMLError(problem=problem, problem_mark=node.start_mark)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def load_workflow(path: str | Path) -> WorkflowFile:
    """Read and validate a workflow YAML file.

    Raises:
        ConfigError: with one `FILE:LINE:COL: key.path: message` line per problem.

    Example:
        ```python
        from animus_flows import load_workflow

        wf = load_workflow("examples/trade-desk/animus.yaml")
        print(wf.project_id, list(wf.workflows))
        ```
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file; pass the path of a workflow YAML file") from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a folder; pass the path of a workflow YAML file") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text ({exc.reason}); save it as UTF-8") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read ({exc.strerror})") from None
    workflow = parse_workflow(text, str(path))
    workflow._source = path
    if workflow.project is None:
        _check_folder_project(workflow.project_id, path)
    return workflow


def located(workflow: WorkflowFile, loc: tuple[str | int, ...]) -> str:
    """`FILE:LINE:COL: key.path` of `loc` in the file `workflow` came from (the file is read
    again: a located message is the rare case); just `key.path` when that is not possible."""
    source = workflow.source
    root = None
    if source is not None:
        loader = None
        try:
            loader = _Loader(source.read_text(encoding="utf-8"))
            root = loader.get_single_node()
        except (OSError, ValueError, yaml.YAMLError):
            root = None
        finally:
            if loader is not None:
                loader.dispose()
    node, path = _locate(root, loc, at_key=False)
    if node is None or source is None:
        return path
    mark = node.start_mark
    return f"{source}:{mark.line + 1}:{mark.column + 1}: {path}"


def _check_folder_project(project_id: str, path: Path) -> None:
    """Without `project:`, the folder's name is the project id: it must be one."""
    if is_valid_unicode(project_id) and not has_control_character(project_id):
        return
    raise ConfigError(
        f"{path}: without `project:` the project id is the folder name {project_id!r}, which "
        "is not valid UTF-8 or holds a control character; set `project:` in the file"
    )


def parse_workflow(text: str, filename: str = "<string>") -> WorkflowFile:
    """Validate workflow YAML text; `filename` prefixes every error line."""
    loader: _Loader | None = None
    try:
        loader = _Loader(text)  # reads the text: a character YAML refuses fails here
        root = loader.get_single_node()
        if root is not None:
            _check_size(root)
        data = loader.construct_document(root) if root is not None else None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, column = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        problem = " ".join(str(exc.problem or exc.context or "invalid YAML").split())
        raise ConfigError(f"{filename}:{line}:{column}: invalid YAML: {problem}") from None
    except yaml.reader.ReaderError as exc:  # a character YAML does not allow (a NUL, ...)
        line = text.count("\n", 0, exc.position) + 1
        column = exc.position - (text.rfind("\n", 0, exc.position) + 1) + 1
        raise ConfigError(
            f"{filename}:{line}:{column}: invalid YAML: the character {chr(exc.character)!r} "
            "is not allowed in YAML; remove it"
        ) from None
    except RecursionError:  # nesting too deep for the YAML parser itself
        mark = loader.get_mark()  # type: ignore[union-attr]
        raise ConfigError(
            f"{filename}:{mark.line + 1}:{mark.column + 1}: invalid YAML: values nest more than "
            f"{MAX_DEPTH} levels deep; a workflow file needs far fewer: flatten it"
        ) from None
    except yaml.YAMLError as exc:
        problem = " ".join(str(exc).split())
        raise ConfigError(f"{filename}:1:1: invalid YAML: {problem}") from None
    finally:
        if loader is not None:
            loader.dispose()
    if not isinstance(data, dict):
        what = "empty" if data is None else f"a {type(data).__name__}, not a mapping"
        raise ConfigError(f"{filename}:1:1: the document is {what}; start it with `version: 1`")
    try:
        workflow = WorkflowFile.model_validate(data)
    except ValidationError as exc:
        issues = [_issue_from_pydantic(error) for error in exc.errors()]
        raise ConfigError(_format(issues, root, filename)) from None
    issues = list(cross_check(workflow))
    if issues:
        raise ConfigError(_format(issues, root, filename))
    return workflow


def cross_check(wf: WorkflowFile) -> Iterator[Issue]:
    """Rules that span several parts of the document."""
    all_phases = {phase.id for flow in wf.workflows.values() for phase in flow.phases}
    for wf_name, workflow in wf.workflows.items():
        seen: dict[str, int] = {}
        for index, phase in enumerate(workflow.phases):
            loc: Loc = ("workflows", wf_name, "phases", index)
            if phase.id in seen:
                yield Issue(
                    (*loc, "id"),
                    f"duplicate phase id {phase.id!r} (also phases[{seen[phase.id]}]); "
                    "phase ids must be unique within a workflow",
                )
            seen.setdefault(phase.id, index)
            if phase.agent not in wf.agents:
                yield Issue((*loc, "agent"), _unknown("agent", phase.agent, wf.agents, "agents"))
        yield from _check_bindings(
            ("workflows", wf_name), workflow.memory_bindings, {p.id for p in workflow.phases}
        )
        yield from _check_label_clashes(wf, wf_name)
    for agent_id, agent in wf.agents.items():
        # an agent can serve in any workflow: its bindings may name any phase id
        yield from _check_bindings(("agents", agent_id), agent.memory_bindings, all_phases)


def _check_label_clashes(wf: WorkflowFile, wf_name: str) -> Iterator[Issue]:
    """A workflow binding whose label an agent binding of one of its phases also uses: the two
    would share one budget cap and one audit line in that phase."""
    workflow = wf.workflows[wf_name]
    reported: set[tuple[str, int]] = set()
    for phase in workflow.phases:
        agent = wf.agents.get(phase.agent)
        if agent is None:
            continue  # reported as an unknown agent
        mine = {b.binding: i for i, b in enumerate(agent.memory_bindings) if b.applies_to(phase.id)}
        for index, binding in enumerate(workflow.memory_bindings):
            other = mine.get(binding.binding)
            if (
                other is None
                or not binding.applies_to(phase.id)
                or (phase.agent, index) in reported
            ):
                continue
            reported.add((phase.agent, index))
            yield Issue(
                ("workflows", wf_name, "memory_bindings", index, "binding"),
                f"label {binding.binding!r} is also agents.{phase.agent}.memory_bindings[{other}]"
                f"'s, and both apply to phase {phase.id!r}; bindings of one phase share a "
                "budget and an audit line by label: give each a distinct label",
            )


def _check_bindings(owner: Loc, bindings: list[Any], phases: set[str]) -> Iterator[Issue]:
    labels: set[str] = set()
    for index, binding in enumerate(bindings):
        loc: Loc = (*owner, "memory_bindings", index)
        if binding.binding in labels:
            yield Issue(
                (*loc, "binding"),
                f"duplicate binding label {binding.binding!r}; labels name audit trails, "
                "make each unique",
            )
        labels.add(binding.binding)
        if binding.query_strategy == "key" and binding.key is None:
            yield Issue(
                (*loc, "query_strategy"),
                'query_strategy key needs a `key` template, e.g. key: "{task_id}/brief"',
            )
        for p_index, phase in enumerate(binding.inject_when.phases):
            if phase not in phases:
                yield Issue(
                    (*loc, "inject_when", "phases", p_index),
                    _unknown("phase", phase, phases, "workflows.*.phases"),
                )


def workflow_warnings(wf: WorkflowFile, *, undeclared_plugins: bool = True) -> list[str]:
    """Things that load but deserve a look, such as plugins not declared under `stores:`
    (left out with `undeclared_plugins=False`: `animus preflight` looks them up and says
    what it found, one warning per binding)."""
    warnings = []
    owners = [(f"agents.{a}", agent.memory_bindings) for a, agent in wf.agents.items()]
    owners += [(f"workflows.{w}", flow.memory_bindings) for w, flow in wf.workflows.items()]
    for owner, bindings in owners:
        for index, binding in enumerate(bindings):
            where = f"{owner}.memory_bindings[{index}]"
            if undeclared_plugins and binding.plugin not in wf.stores:
                warnings.append(
                    f"{where}: plugin {binding.plugin!r} is not under `stores`; it will be looked "
                    "up as a saved Prefect block and is a no-op if none matches"
                )
            if binding.key is not None and binding.query_strategy != "key":
                # DESIGN.md's own example carries one: a template kept for later, not an error
                warnings.append(
                    f"{where}.key: ignored, `key` is only used with query_strategy: key (this "
                    f"binding uses {binding.query_strategy}); remove it or switch the strategy"
                )
    return warnings


def _unknown(what: str, value: str, known: typing.Iterable[str], where: str) -> str:
    known = sorted(known)
    close = difflib.get_close_matches(value, known, n=1)
    hint = f"did you mean {close[0]!r}?" if close else f"known: {', '.join(known) or 'none'}"
    return f"unknown {what} {value!r}; define it under {where} ({hint})"


# -- turning pydantic errors into located issues ---------------------------------------------


def _issue_from_pydantic(error: dict[str, Any]) -> Issue:
    loc = tuple(error["loc"])
    kind, ctx, value = error["type"], error.get("ctx") or {}, error.get("input")
    if kind == "extra_forbidden":
        fields = _fields_at(loc[:-1])
        close = difflib.get_close_matches(str(loc[-1]), fields, n=1)
        hint = f"did you mean {close[0]!r}?" if close else f"expected one of: {', '.join(fields)}"
        return Issue(loc, f"unknown key {loc[-1]!r}; {hint}", at_key=True)
    if kind == "missing":
        return Issue(loc, "required key is missing", at_key=True)
    if kind in ("union_tag_invalid", "union_tag_not_found"):
        expected = ctx.get("expected_tags") or ", ".join(repr(t) for t in STORE_TYPES)
        found = f"unknown store type {ctx.get('tag')!r}" if "tag" in ctx else "missing `type`"
        at_key = kind == "union_tag_not_found"
        return Issue((*loc, "type"), f"{found}; expected one of {expected}", at_key=at_key)
    shown = "" if _is_secret(loc, value) else f", got {_shown(value)}"
    messages = {
        "greater_than_equal": f"must be >= {ctx.get('ge')}{shown}",
        "greater_than": f"must be > {ctx.get('gt')}{shown}",
        "less_than_equal": f"must be <= {ctx.get('le')}{shown}",
        "literal_error": f"must be one of {ctx.get('expected')}{shown}",
        "int_type": f"must be an integer{shown}",
        "int_parsing": f"must be an integer{shown}",
        "int_from_float": f"must be a whole number{shown}",
        "float_type": f"must be a number{shown}",
        "float_parsing": f"must be a number{shown}",
        "finite_number": f"must be a finite number{shown}",
        "bool_type": f"must be true or false{shown}",
        "bool_parsing": f"must be true or false{shown}",
        "string_type": f"must be a string{shown}",
        "list_type": f"must be a list{shown}",
        "dict_type": f"must be a mapping{shown}",
        "model_type": f"must be a mapping{shown}",
        "model_attributes_type": f"must be a mapping{shown}",
        "too_short": "must not be empty",
        "string_too_short": "must not be empty",
        "string_too_long": f"must be at most {ctx.get('max_length')} characters",
    }
    if kind == "string_pattern_mismatch":
        if "/" in str(ctx.get("pattern", "")):
            message = f"{_shown(value)} must look like '<block-type-slug>/<block-name>'"
        else:
            message = f"{_shown(value)} is not a valid id; use {ID_HINT}"
        return Issue(loc, message)
    if kind == "value_error":
        return Issue(loc, str(error["msg"]).removeprefix("Value error, "))
    return Issue(loc, messages.get(kind, str(error["msg"])[:1].lower() + str(error["msg"])[1:]))


def _is_secret(loc: Loc, value: Any) -> bool:
    """Whether an issue must not quote its value: `api_key`'s, an `env:` entry's, or any
    value shaped like a key."""
    secret_field = bool(loc) and (loc[-1] == "api_key" or "env" in loc[:-1])
    return secret_field or looks_like_secret(str(value))


def _fields_at(loc: Loc) -> list[str]:
    """Best effort: the keys allowed by the model at `loc` (for 'did you mean')."""
    annotation: Any = WorkflowFile
    for part in loc:
        annotation = _step(annotation, part)
        if annotation is None:
            return []
    model = _as_model(annotation)
    return [field.alias or name for name, field in model.model_fields.items()] if model else []


def _step(annotation: Any, part: str | int) -> Any:
    model = _as_model(annotation)
    if model is not None:
        fields = {field.alias or name: field for name, field in model.model_fields.items()}
        field = fields.get(str(part))
        return field.annotation if field else None
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        return _step(args[0], part)
    if origin in (list, tuple) and isinstance(part, int):
        return args[0] if args else None
    if origin is dict:
        return args[1] if len(args) == 2 else None
    if origin in (typing.Union, types.UnionType):
        for arg in args:  # a discriminator tag or a member's name picks the member
            member = _as_model(arg)
            if member is not None and (part == member.__name__ or _tag(member) == part):
                return member
        return annotation
    return None


def _tag(model: type[BaseModel]) -> Any:
    field = model.model_fields.get("type")
    return typing.get_args(field.annotation)[0] if field else None


def _as_model(annotation: Any) -> type[BaseModel] | None:
    if typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        models = [a for a in typing.get_args(annotation) if _as_model(a)]
        return models[0] if len(models) == 1 else None
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return None


def _clean_loc(loc: Loc) -> Loc:
    """`loc` without the union-member selectors pydantic inserts (tags and type names)."""
    annotation: Any = WorkflowFile
    cleaned: list[str | int] = []
    for part in loc:
        if annotation is not None and _is_union(annotation):
            member = _step(annotation, part)
            if _as_model(member) is not None and _is_union(annotation) != _is_union(
                member
            ):  # `part` selected a member: not a key in the file
                annotation = member
                continue
        cleaned.append(part)
        annotation = _step(annotation, part) if annotation is not None else None
    return tuple(cleaned)


def _is_union(annotation: Any) -> bool:
    if typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    return typing.get_origin(annotation) in (typing.Union, types.UnionType)


def _locate(root: yaml.Node | None, loc: Loc, at_key: bool) -> tuple[yaml.Node | None, str]:
    """The node a location points at and its dotted path."""
    node, found, path = root, root, ""
    for index, part in enumerate(loc):
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
        if isinstance(node, yaml.MappingNode):
            match = next(((k, v) for k, v in node.value if k.value == str(part)), None)
            if match is None:
                node = None
                continue
            key_node, node = match
            found = key_node if at_key and index == len(loc) - 1 else node
        elif (
            isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value)
        ):
            node = found = node.value[part]
        else:
            node = None
    return found, path


def _format(issues: list[Issue], root: yaml.Node | None, filename: str) -> str:
    lines = []
    for issue in issues:
        node, path = _locate(root, _clean_loc(issue.loc), issue.at_key)
        mark = node.start_mark if node is not None else None
        line, column = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        lines.append(
            (line, column, f"{filename}:{line}:{column}: {path or '<root>'}: {issue.message}")
        )
    return "\n".join(text for *_, text in sorted(lines))
