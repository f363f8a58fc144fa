"""Secret redaction at ingest: every write path replaces secrets with typed markers.

`redact(text)` is the one implementation. Every write goes through the store wrapper
`animus_flows.stores.redacting.RedactingStore`, which calls `redact_item` on the value and the
metadata (strings, object keys, and whole values under password-named keys), so a secret caught on
one path is caught on all. Detected secrets become `[REDACTED:<type>]` and the item's metadata
records `_redaction_count` and `_redaction_types`. Identities cannot be redacted (a redacted key
names another item): `refuse_secret_in_key` and `refuse_secret_in_id` refuse them.

Errors are redacted where they leave the program (the CLI, JSON-RPC and MCP error answers, the
log filter `RedactingFilter`, Prefect states), so values, plugin output and runner stderr quoted
in an error never carry a secret further. `redact_head` quotes the start of a long text,
`shown_url` hides a displayed URL's credentials, and `looks_like_secret` tells a pasted key from
a name in fields that want a name.

Patterns favour precision: ordinary hex ids, UUIDs, git SHAs and prose survive. Redaction is a
safety net, not a vault: a secret in a shape not listed here is stored as written.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from animus_flows.errors import InvalidRequest, InvalidScope

JSON = Any

MARKER = "[REDACTED:{}]"
_MARKER_PREFIX = "[REDACTED:"

#: What each marker type stands for, in the order the patterns run.
REDACTION_TYPES: dict[str, str] = {
    "private_key": "PEM private key blocks (RSA, EC, OPENSSH, PGP, ...)",
    "jwt": "JSON Web Tokens (three base64url parts, header and payload starting eyJ)",
    "anthropic_api_key": "Anthropic API keys (sk-ant-...)",
    "openai_api_key": "OpenAI API keys (sk-..., sk-proj-...) of 20+ characters with a digit",
    "aws_access_key": "AWS access key ids (AKIA/ASIA/ABIA/ACCA + 16 characters)",
    "github_token": "GitHub tokens (ghp_, gho_, ghu_, ghs_, ghr_, github_pat_)",
    "slack_webhook": "Slack incoming-webhook URLs",
    "slack_token": "Slack tokens (xoxb-, xoxp-, xoxa-, xoxo-, xoxs-, xoxr-, xoxe-)",
    "stripe_key": "Stripe secret and restricted keys (sk_live_, rk_test_, ...)",
    "google_api_key": "Google API keys (AIza...)",
    "bearer_token": "Bearer tokens after `Bearer ` (16+ characters with a digit)",
    "url_password": "the password in a URL's user:password@host part",
    "password": "values assigned to password/passwd names (`password=...`, `DB_PASSWORD: ...`)",
    "api_key": "values assigned to api_key/apikey names",
    "secret": "values assigned to secret, token and private-key names",
}

# Each pattern with literals it cannot match without: a pattern runs only on text holding one
# of them (an `in` test costs a fraction of a regex scan, and most text holds none).
_PATTERNS: list[tuple[str, tuple[str, ...], re.Pattern[str]]] = [
    (
        "private_key",
        ("-----BEGIN",),
        re.compile(
            r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"
            r".*?(?:-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)",
            re.DOTALL,
        ),
    ),
    ("jwt", ("eyJ",), re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*")),
    ("anthropic_api_key", ("sk-ant-",), re.compile(r"\bsk-ant-[A-Za-z0-9_-]{20,}")),
    (
        "openai_api_key",
        ("sk-",),
        re.compile(r"\bsk-(?:proj-|svcacct-|admin-)?(?=[A-Za-z0-9_-]*\d)[A-Za-z0-9_-]{20,}"),
    ),
    (
        "aws_access_key",
        ("AKIA", "ASIA", "ABIA", "ACCA"),
        re.compile(r"\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b"),
    ),
    (
        "github_token",
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
        re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})\b"),
    ),
    (
        "slack_webhook",
        ("https://hooks.slack.com/services/",),
        re.compile(r"https://hooks\.slack\.com/services/[A-Za-z0-9/_-]+"),
    ),
    ("slack_token", ("xox",), re.compile(r"\bxox[abposre]-(?=[A-Za-z0-9-]*\d)[A-Za-z0-9-]{10,}")),
    ("stripe_key", ("k_live_", "k_test_"), re.compile(r"\b[sr]k_(?:live|test)_[A-Za-z0-9]{16,}")),
    ("google_api_key", ("AIza",), re.compile(r"\bAIza[0-9A-Za-z_-]{35}(?![0-9A-Za-z_-])")),
]

# Secrets inside a larger match: only the named group is replaced, the context stays readable.
_BEARER = re.compile(r"(?i)\bBearer\s+(?P<secret>(?=[A-Za-z0-9._~+/-]*\d)[A-Za-z0-9._~+/-]{16,}=*)")
# user:password@host, the user possibly empty (redis://:pw@host). The password runs to the last
# `@` before the host, so one holding `@` or `/` is caught whole (https://u:p@ss@h); a port
# followed by a path that has an `@` in it (host:443/@scope) is not a password.
_URL_PASSWORD = re.compile(
    r"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s:/@\[\]]*:(?P<secret>\S+)@(?=[^\s/@]*[A-Za-z0-9])"
)
_PORT_AND_PATH = re.compile(r"^\d+/")

_SECRET_NAMES = {
    "password": r"passw(?:or)?d",
    "api_key": r"api[_-]?key",
    "secret": r"secret(?:[_-]?(?:access)?[_-]?key)?|(?:access|auth|refresh|bearer)[_-]?token"
    r"|private[_-]?key",
}
_NAME = "|".join(f"(?P<name_{kind}>{pattern})" for kind, pattern in _SECRET_NAMES.items())
# A name (optionally prefixed, as in DB_PASSWORD), an optional closing quote, `=` or `:`, a
# value: quoted, or up to the next space, comma or semicolon.
_ASSIGNMENT = re.compile(
    rf"(?i)(?<![A-Za-z0-9])[A-Za-z0-9_.-]*?(?:{_NAME})[\"']?\s*(?P<sep>:=|=|:)\s*"
    r"(?P<secret>\"[^\"\n]*\"|'[^'\n]*'|[^\s,;\"'&]+)"
)
# What every name in `_SECRET_NAMES` contains, in lowercase: `_ASSIGNMENT` cannot match ASCII
# text without one of them (its lazy prefix makes it cost 40 microseconds on a short paragraph).
_NAME_STEMS = ("passw", "api", "secret", "token", "private")
_PLACEHOLDER = re.compile(
    r"(?i)^(?:|none|null|nil|true|false|undefined|\*+|x{3,}|\.{3}|<.*>|\{\{.*|\$.*|%\(.*"
    r"|os\.environ.*|os\.getenv.*|getenv\(.*|env\(.*|\[REDACTED.*|REDACTED)$"
)


def _placeholder(value: str) -> bool:
    return bool(_PLACEHOLDER.match(value.strip("\"'").strip()))


@dataclass(frozen=True)
class Redaction:
    """The redacted text, how many secrets were replaced, and their types (sorted, unique)."""

    text: str
    count: int
    types: tuple[str, ...]


def redact(text: str) -> Redaction:
    """Replace every secret in `text` with `[REDACTED:<type>]`.

    Example:
        ```python
        from animus_flows.redaction import redact

        redact("deploy with AKIAIOSFODNN7EXAMPLE").text
        # 'deploy with [REDACTED:aws_access_key]'
        ```
    """
    text, found = _redact(text)
    return Redaction(text, len(found), tuple(sorted(set(found))))


def refuse_secret_in_key(key: str) -> None:
    """Refuse an item key that holds a secret, with an `InvalidRequest` quoting it redacted.

    A value's secrets are redacted; a key's cannot be: keys are identities, stored, listed,
    audited and shown as written, and a redacted key would name another item. So a write whose
    key holds one is refused before anything is stored.
    """
    found = redact(key)
    if found.count:
        raise InvalidRequest(
            f"key {found.text!r} holds a secret ({', '.join(found.types)}); name the memory in "
            "its key and keep the secret, if at all, in its value, where it is redacted"
        )


def refuse_secret_in_id(label: str, ident: str) -> None:
    """Refuse a scope id that holds a secret, with an `InvalidScope` naming `label` (such as
    `scope task_id`) and quoting the id redacted: ids are shown in every listing, audit line and
    artifact, as written."""
    found = redact(ident)
    if found.count:
        raise InvalidScope(
            f"{label} {found.text!r} holds a secret ({', '.join(found.types)}); use an id that "
            "names the project, agent or task, and keep secrets out of ids"
        )


def redact_head(text: str, limit: int) -> str:
    """The first `limit` characters of `text`, secrets redacted: how a message quotes a value.

    Redacted before the cut, which could leave a piece of a secret that no pattern knows. Only
    the first 16 * `limit` characters are read, so quoting a huge value stays cheap.
    """
    return redact(text[: 16 * limit]).text[:limit]


# The scheme, then the userinfo: everything of the authority up to its last `@`.
_USERINFO = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://)[^/?#]*@")


def shown_url(url: str) -> str:
    """`url` as it may be displayed: a `user:password@` (or `token@`) part becomes `***@`.

    Example:
        ```python
        from animus_flows.redaction import shown_url

        shown_url("https://me:hunter2@zep.example.com/api")  # 'https://***@zep.example.com/api'
        ```
    """
    return _USERINFO.sub(r"\1***@", url)


# A run of 16+ letters and digits mixing lowercase letters and digits: the shape of a generated
# key (`z_4f9ac1...`), not of a name (`ZEP_API_KEY`, `zep_key_2`).
_KEY_RUN = re.compile(r"[A-Za-z0-9]{16,}")


def redact_exception(exc: BaseException) -> None:
    """Redact, in place, the messages of `exc` and of the exceptions it was raised from.

    For user code's exceptions (a runner's, a hook's) that the runtime wraps: Prefect logs a
    failed task's whole chain, causes included. Only messages built from `args` change (most
    are); the traceback's frames stay for debugging.
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if any(isinstance(arg, str) and redact(arg).count for arg in current.args):
            current.args = tuple(redact(a).text if isinstance(a, str) else a for a in current.args)
        current = current.__cause__ or current.__context__


@contextmanager
def redacted_errors() -> Iterator[None]:
    """Redact, in place, whatever escapes the block (`redact_exception`): for code whose
    errors leave the program through Prefect (flow-run states and their logged tracebacks)."""
    try:
        yield
    except BaseException as exc:
        redact_exception(exc)
        raise


def looks_like_secret(text: str) -> bool:
    """Whether `text` holds a secret `redact` finds, or a run shaped like a generated key.

    For fields that hold a name, never a key (`api_key_env`): an error about such a field
    should not quote a key pasted into it.
    """
    if redact(text).count:
        return True
    return any(
        any(c.isdigit() for c in run) and any(c.islower() for c in run)
        for run in _KEY_RUN.findall(text)
    )


def _redact(text: str) -> tuple[str, list[str]]:
    """The redacted text and the type of every secret replaced, one entry each."""
    found: list[str] = []

    def marker(kind: str) -> Callable[[re.Match[str]], str]:
        def replace(match: re.Match[str]) -> str:
            found.append(kind)
            return MARKER.format(kind)

        return replace

    for kind, needed, pattern in _PATTERNS:
        for literal in needed:
            if literal in text:
                text = pattern.sub(marker(kind), text)
                break
    if "bearer" in text.lower():
        text = _replace_group(_BEARER, text, lambda _: "bearer_token", found)
    if "://" in text and "@" in text:
        text = _replace_group(_URL_PASSWORD, text, _url_password_kind, found)
    if _may_name_a_secret(text):
        text = _replace_group(_ASSIGNMENT, text, _assignment_kind, found)
    return text, found


def _may_name_a_secret(text: str) -> bool:
    """False only when `_ASSIGNMENT` cannot match: ASCII text without a name's stem in any
    case. Other text goes to the pattern: Unicode case folding equates a few more characters
    with ASCII letters (the long s with `s`, the dotless i with `i`)."""
    if not text.isascii():
        return True
    lowered = text.lower()
    return any(stem in lowered for stem in _NAME_STEMS)


def _replace_group(
    pattern: re.Pattern[str],
    text: str,
    kind_of: Callable[[re.Match[str]], str | None],
    found: list[str],
) -> str:
    def replace(match: re.Match[str]) -> str:
        kind = kind_of(match)
        secret = match.group("secret")
        if kind is None or secret.startswith(_MARKER_PREFIX) or _placeholder(secret):
            return match.group(0)
        found.append(kind)
        start, end = match.span("secret")
        offset = match.start()
        quote = secret[0] if secret[0] in "\"'" and len(secret) > 1 else ""
        redacted = f"{quote}{MARKER.format(kind)}{quote}"
        whole = match.group(0)
        return whole[: start - offset] + redacted + whole[end - offset :]

    return pattern.sub(replace, text)


def _url_password_kind(match: re.Match[str]) -> str | None:
    return None if _PORT_AND_PATH.match(match.group("secret")) else "url_password"


def _assignment_kind(match: re.Match[str]) -> str | None:
    secret = match.group("secret")
    quoted = secret[:1] in "\"'"
    # `password: it must be strong` is prose; `password: hunter2` is a secret. An unquoted value
    # after a colon counts only when it looks generated: 6+ characters with a digit or a symbol.
    if match.group("sep") == ":" and not quoted and (len(secret) < 6 or secret.isalpha()):
        return None
    return _named_kind(match)


def _named_kind(match: re.Match[str]) -> str:
    return next(kind for kind in _SECRET_NAMES if match.group(f"name_{kind}"))


# -- JSON values and store writes ------------------------------------------------------------

_KEY_NAME = re.compile(rf"(?i)^[A-Za-z0-9_.-]*?(?:{_NAME})$")


#: The deepest nesting of lists and objects `redact_json` walks; deeper values are refused.
MAX_JSON_DEPTH = 300


@dataclass(frozen=True)
class RedactedJSON:
    """A JSON value with its secrets replaced, and what was found."""

    value: JSON
    count: int
    types: tuple[str, ...]

    def metadata(self, existing: Mapping[str, JSON] | None = None) -> dict[str, JSON]:
        """`existing` plus the redaction keys, added to what it already recorded."""
        return redaction_metadata(self.count, self.types, existing)


def redact_json(value: JSON, *, skip_keys: Iterable[str] = ()) -> RedactedJSON:
    """Redact a JSON value: every string, every object key, and whatever a secret-named key
    (`"password"`, `"api_key"`, `"client_secret"`, ...) holds (a string, number, list or
    object) is replaced whole. A string that is itself JSON (an object or array encoded once
    more) is redacted inside and encoded again.

    `skip_keys` names top-level object keys whose values are left as they are (bookkeeping).

    Raises:
        InvalidRequest: the value nests too deeply to walk (stores refuse such values too).
    """
    found: list[str] = []
    skipped = frozenset(skip_keys)
    depth = 0

    def text(node: str) -> str:
        # JSON inside a string (an object, an array, or a string encoded again) hides its keys
        if (node[:1], node[-1:]) in (("{", "}"), ("[", "]"), ('"', '"')) and len(node) > 1:
            try:
                inner = json.loads(node)
            except ValueError:
                inner = None
            if isinstance(inner, dict | list | str):
                before = len(found)
                redacted = walk(inner, None)
                if len(found) > before:
                    return json.dumps(redacted, ensure_ascii=False)
        redacted_text, kinds = _redact(node)
        found.extend(kinds)
        return redacted_text

    def walk(node: JSON, key: str | None) -> JSON:
        if key is not None and _secret_value(node):
            named = _KEY_NAME.match(key)
            if named:
                found.append(_named_kind(named))
                return MARKER.format(_named_kind(named))
        if isinstance(node, str):
            return text(node)
        if isinstance(node, list | dict):
            return nested(node)
        return node

    def nested(node: list[JSON] | dict[str, JSON]) -> JSON:
        # Refused at a fixed depth rather than at the interpreter's RecursionError: near the
        # recursion limit, finalizers that run meanwhile fail too and print to stderr.
        nonlocal depth
        if depth >= MAX_JSON_DEPTH:
            raise RecursionError
        depth += 1
        try:
            return [walk(item, None) for item in node] if isinstance(node, list) else obj(node)
        finally:
            depth -= 1

    def obj(node: dict[str, JSON], skip: frozenset[str] = frozenset()) -> dict[str, JSON]:
        result: dict[str, JSON] = {}
        for k, v in node.items():
            name = text(k) if isinstance(k, str) else k
            while name in result:  # two secrets redacted to one marker stay two keys
                name = f"{name}#"
            result[name] = v if k in skip else walk(v, k if isinstance(k, str) else None)
        return result

    try:
        redacted = obj(value, skipped) if isinstance(value, dict) else walk(value, None)
    except RecursionError:
        raise InvalidRequest(
            "a value nests lists or objects too deeply to check for secrets; pass flatter JSON"
        ) from None
    return RedactedJSON(redacted, len(found), tuple(sorted(set(found))))


def _secret_value(node: JSON) -> bool:
    """Whether a value under a secret-named key is one to replace: not empty, not a
    placeholder (`None`, `***`, `${VAR}`), not already a marker, not a plain flag."""
    if node is None or isinstance(node, bool):
        return False
    if isinstance(node, str):
        return bool(node) and not _placeholder(node) and not node.startswith(_MARKER_PREFIX)
    if isinstance(node, list | dict):
        return bool(node)
    return True  # a number: a PIN, a numeric password


def redaction_metadata(
    count: int, types: Iterable[str], existing: Mapping[str, JSON] | None = None
) -> dict[str, JSON]:
    """`existing` metadata with `_redaction_count` and `_redaction_types` increased by a
    redaction; unchanged when nothing was redacted."""
    metadata = dict(existing or {})
    if count <= 0:
        return metadata
    before = metadata.get("_redaction_count", 0)
    before_types = metadata.get("_redaction_types") or []
    metadata["_redaction_count"] = (before if isinstance(before, int) else 0) + count
    metadata["_redaction_types"] = sorted(
        {*(t for t in before_types if isinstance(t, str)), *types}
        if isinstance(before_types, list)
        else set(types)
    )
    return metadata


def redact_item(
    value: JSON, metadata: Mapping[str, JSON] | None = None, *, bookkeeping: Iterable[str] = ()
) -> tuple[JSON, dict[str, JSON] | None]:
    """Redact a store write: the value and the metadata (but the values of its `bookkeeping`
    keys, the memory layer's own fields), with the redaction keys merged into the metadata.
    `animus_flows.stores.redacting.RedactingStore` calls it on every write.

    Example:
        ```python
        from animus_flows.protocol import Scope
        from animus_flows.redaction import redact_item
        from animus_flows.stores import SQLiteStore

        store = SQLiteStore(".animus/memory.db")
        output = "deployed with AKIAIOSFODNN7EXAMPLE"
        value, metadata = redact_item({"content": output}, {"phase": "research"})
        await store.put(Scope("trade-desk"), "research-1", value, metadata=metadata)
        ```
    """
    body = redact_json(value)
    meta = None if metadata is None else redact_json(dict(metadata), skip_keys=bookkeeping)
    count = body.count + (meta.count if meta else 0)
    types = {*body.types, *(meta.types if meta else ())}
    merged = None if meta is None else dict(meta.value)  # type: ignore[arg-type]
    if count:
        merged = redaction_metadata(count, types, merged)
    return body.value, merged


class RedactingFilter(logging.Filter):
    """A logging filter that redacts a record's message, arguments included, before any
    handler formats it: log lines quote values, plugin output and errors."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        redacted = redact(message)
        if redacted.count:
            record.msg, record.args = redacted.text, None
        return True


def get_logger(name: str) -> logging.Logger:
    """`logging.getLogger(name)` with a `RedactingFilter`: how animus-flows modules get theirs
    (a logger's filters do not apply to its children's records, so each has its own)."""
    logger = logging.getLogger(name)
    if not any(isinstance(f, RedactingFilter) for f in logger.filters):
        logger.addFilter(RedactingFilter())
    return logger
