"""Secret redaction at ingest: find credentials in text and replace them with typed markers.

Runs on every write path (the memory layer, `animus memory put`, the write-back hook, MCP) and
on audit details. Patterns favour precision: ordinary hex ids, UUIDs, git SHAs and prose pass
through untouched. This is a safety net, not a vault: rotate anything that slips through.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

_PRIVATE_KEY = (
    r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----[\s\S]*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----"
)
_ASSIGNED = (
    r"(?i)\b(?:password|passwd|pwd|secret|api[_-]?key|access[_-]?token|auth[_-]?token|"
    r"client[_-]?secret)\b[\"']?\s*[:=]\s*[\"']?([^\s\"',;]{4,})"
)

# (type, pattern, group replaced: 0 is the whole match, 1 keeps the surrounding context)
_SOURCES = [
    ("private_key", _PRIVATE_KEY, 0),
    ("anthropic_key", r"\bsk-ant-[A-Za-z0-9_-]{20,}", 0),
    ("openai_key", r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}", 0),
    ("aws_access_key", r"\b(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}\b", 0),
    (
        "aws_secret_key",
        r"(?i)\baws_?secret_?(?:access_?)?key\b\s*[:=]\s*[\"']?([A-Za-z0-9/+]{40})(?![A-Za-z0-9/+])",
        1,
    ),
    ("github_token", r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{40,})", 0),
    ("slack_token", r"\bxox[abposr]-[A-Za-z0-9-]{10,}", 0),
    ("slack_webhook", r"https://hooks\.slack\.com/services/[A-Z0-9]+/[A-Z0-9]+/[A-Za-z0-9]+", 0),
    ("jwt", r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}", 0),
    ("url_password", r"(?i)\b[a-z][a-z0-9+.-]*://[^\s:/@]+:([^\s@/]+)@", 1),
    ("password", _ASSIGNED, 1),
]
_PATTERNS = [(kind, re.compile(source), group) for kind, source, group in _SOURCES]


@dataclass(frozen=True)
class Redaction:
    """Redacted text and what was found in it."""

    text: str
    count: int
    types: tuple[str, ...]


def marker(kind: str) -> str:
    return f"[REDACTED:{kind}]"


def redact(text: str) -> Redaction:
    """Replace every secret in `text` with `[REDACTED:<type>]`."""
    found: list[str] = []
    for kind, pattern, group in _PATTERNS:

        def replace(match: re.Match[str], kind: str = kind, group: int = group) -> str:
            if marker(kind) in match.group(0) or "[REDACTED:" in match.group(group):
                return match.group(0)
            found.append(kind)
            start, end = match.start(group) - match.start(0), match.end(group) - match.start(0)
            whole = match.group(0)
            return whole[:start] + marker(kind) + whole[end:]

        text = pattern.sub(replace, text)
    return Redaction(text, len(found), tuple(dict.fromkeys(found)))


def redact_text(text: str) -> str:
    """`text` with its secrets replaced (for logs, errors and audit details)."""
    return redact(text).text


def redact_value(value: Any) -> tuple[Any, dict[str, Any]]:
    """Redact every string inside a JSON value.

    Returns the clean value and the metadata to record with it: `_redaction_count` and
    `_redaction_types` when something was found, else nothing.
    """
    count = 0
    types: list[str] = []

    def walk(node: Any) -> Any:
        nonlocal count
        if isinstance(node, str):
            result = redact(node)
            count += result.count
            types.extend(result.types)
            return result.text
        if isinstance(node, list):
            return [walk(item) for item in node]
        if isinstance(node, dict):
            return {key: walk(item) for key, item in node.items()}
        return node

    clean = walk(value)
    if not count:
        return clean, {}
    return clean, {"_redaction_count": count, "_redaction_types": sorted(set(types))}
