"""Secret redaction: a corpus of secrets that must go and ordinary text that must stay."""

import pytest

from animus_flows.redaction import redact, redact_value

SECRETS = [
    ("openai_key", "token sk-proj-AbCdEfGhIjKlMnOpQrStUvWx0123456789 end"),
    ("openai_key", "sk-abcdefghijklmnopqrstuvwxyzABCD"),
    ("anthropic_key", "ANTHROPIC=sk-ant-api03-abcdefghijklmnopqrstuvwxyz-012345"),
    ("aws_access_key", "id AKIAIOSFODNN7EXAMPLE in config"),
    ("aws_secret_key", "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
    ("github_token", "ghp_" + "a1B2" * 9),
    ("github_token", "github_pat_" + "x" * 22 + "_" + "y" * 59),
    ("slack_token", "xoxb-123456789012-123456789012-abcdefghijklmnop"),
    ("slack_webhook", "https://hooks.slack.com/services/T000/B000/XXXXXXXXXXXXXXXX"),
    ("jwt", "Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N"),
    (
        "private_key",
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEow\nIBAAK\n-----END RSA PRIVATE KEY-----",
    ),
    (
        "private_key",
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3Blbn\n-----END OPENSSH PRIVATE KEY-----",
    ),
    ("url_password", "postgres://admin:hunter2@db.internal:5432/app"),
    ("password", "password=correct-horse-battery"),
    ("password", 'config: {"api_key": "abcd1234efgh"}'),
    ("password", "export CLIENT_SECRET: s3cr3tvalue"),
]

CLEAN = [
    "The desk hedged 60% of EUR receivables; EUR/USD fell to 1.06.",
    "request id 123e4567-e89b-12d3-a456-426614174000",
    "commit 9fceb02d0ae598e95dc970b74767f19372d61af8 fixed it",
    "sha256 223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    "the password policy requires 12 characters",
    "see https://example.com/docs/api-keys for how to rotate keys",
    "skip-ahead tokens like sk-short are fine",
    "AKIA is a prefix; AKIA123 is too short",
    "user@example.com wrote to ops@example.org",
]


@pytest.mark.parametrize("kind,text", SECRETS)
def test_secrets_are_replaced_by_a_typed_marker(kind, text):
    result = redact(text)
    assert f"[REDACTED:{kind}]" in result.text
    assert result.count >= 1 and kind in result.types


@pytest.mark.parametrize("text", CLEAN)
def test_ordinary_text_survives_untouched(text):
    result = redact(text)
    assert result.text == text and result.count == 0


def test_redaction_is_idempotent():
    once = redact(SECRETS[0][1]).text
    assert redact(once).text == once and redact(once).count == 0


def test_values_are_walked_and_metadata_reports_counts():
    value = {"content": "key AKIAIOSFODNN7EXAMPLE", "notes": ["password=abcdef12", 3, None]}
    clean, metadata = redact_value(value)
    assert clean == {
        "content": "key [REDACTED:aws_access_key]",
        "notes": ["password=[REDACTED:password]", 3, None],
    }
    assert metadata == {"_redaction_count": 2, "_redaction_types": ["aws_access_key", "password"]}
    assert redact_value("plain") == ("plain", {})
