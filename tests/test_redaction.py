"""Secret redaction: a corpus of secrets that must go and look-alikes that must stay."""

import pickle
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from animus_flows.errors import InvalidRequest
from animus_flows.redaction import (
    _BEARER,
    _PATTERNS,
    _SECRET_NAMES,
    _URL_PASSWORD,
    REDACTION_TYPES,
    _may_name_a_secret,
    get_logger,
    looks_like_secret,
    redact,
    redact_head,
    redact_item,
    redact_json,
    redaction_metadata,
    refuse_secret_in_key,
    shown_url,
)

# Sample credentials: published documentation examples or random strings, none of them live.
POSITIVES = [
    ("aws_access_key", "deploy with AKIAIOSFODNN7EXAMPLE today", "AKIAIOSFODNN7EXAMPLE"),
    ("aws_access_key", "session ASIAY34FZKBOKMUTVV7A expired", "ASIAY34FZKBOKMUTVV7A"),
    (
        "openai_api_key",
        "OPENAI key sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z here",
        "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z",
    ),
    (
        "openai_api_key",
        "legacy sk-4fGh7JkL0mNq3RsT6vWx9YzA2bCd5EfG8hIj1KlM",
        "sk-4fGh7JkL0mNq3RsT6vWx9YzA2bCd5EfG8hIj1KlM",
    ),
    (
        "anthropic_api_key",
        "claude: sk-ant-api03-Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Jh1Gf0Ed-AAAA",
        "sk-ant-api03-Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Jh1Gf0Ed-AAAA",
    ),
    (
        "github_token",
        "push with ghp_16C7e42F292c6912E7710c838347Ae178B4a now",
        "ghp_16C7e42F292c6912E7710c838347Ae178B4a",
    ),
    (
        "github_token",
        "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
        "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
    ),
    ("slack_token", "bot xoxb-123456789012-1234567890123-AbCdEf", "xoxb-123456789012"),
    (
        "slack_webhook",
        "post to https://hooks.slack.com/services/T000/B000/XXXXXXXX please",
        "hooks.slack.com/services/T000",
    ),
    (
        "jwt",
        "auth eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0."
        "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c ok",
        "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9",
    ),
    (
        "private_key",
        "key:\n-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA1c7\nq0s=\n"
        "-----END RSA PRIVATE KEY-----\nthanks",
        "MIIEowIBAAKCAQEA1c7",
    ),
    (
        "private_key",
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAA (truncated paste)",
        "b3BlbnNzaC1rZXktdjEAAAA",
    ),
    (
        "stripe_key",
        "charge with sk_live_4eC39HqLyjWDarjtT1zdp7dc",
        "sk_live_4eC39HqLyjWDarjtT1zdp7dc",
    ),
    (
        "google_api_key",
        "maps AIzaSyA-1234567890abcdefghijklmnopqrstu works",
        "AIzaSyA-1234567890abcdefghijklmnopqrstu",
    ),
    (
        "bearer_token",
        "Authorization: Bearer 8f14e45fceea167a5a36dedd4bea2543",
        "8f14e45fceea167a5a36dedd4bea2543",
    ),
    (
        "url_password",
        "DATABASE_URL=postgres://app:Tr0ub4dor&3@db.internal:5432/prod",
        "Tr0ub4dor&3",
    ),
    ("url_password", "clone https://bob:s3cret@git.example.com/repo.git", "s3cret"),
    ("password", "login with password=hunter2 tomorrow", "hunter2"),
    ("password", "DB_PASSWORD: 'correct horse battery staple'", "correct horse"),
    ("password", 'config {"password": "Pa55word!"}', "Pa55word!"),
    ("password", "password: hunter22", "hunter22"),
    ("api_key", "export WEATHER_API_KEY=0123abcd", "0123abcd"),
    ("api_key", "apikey = 'abc'", "abc'"),
    ("secret", "client_secret=9d8c7b6a5f4e", "9d8c7b6a5f4e"),
    ("secret", "access_token: ya29.A0ARrdaM-xyz", "ya29.A0ARrdaM-xyz"),
]

NEGATIVES = [
    "User prefers dark mode and vim keybindings.",
    "Story MIS-4 completed with 121 tests; p95 latency 45 ms.",
    "request id 3f2a9c1b8d7e6f5a4b3c2d1e0f9a8b7c failed twice",
    "memory 3f2a9c1b-8d7e-4f5a-9b3c-2d1e0f9a8b7c was versioned",
    "fixed in e83c5163316f89bfbde7d9ab23ca2e25604af290 (short: e83c516)",
    "sha256 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "we use sk-learn-model-evaluation-pipeline for scoring",
    "task-0123456789abcdefghijklmnop is done",
    "The password policy requires 12 characters; password: see the vault.",
    "Reset your password in settings. api_key: required",
    "api_key = os.environ['WEATHER_API_KEY'] and password=${DB_PASSWORD}",
    "password=None, secret=<your-secret>, token count 4000",
    "password_hash=abc123 is stored, not the password",
    "ssh://git@github.com:org/repo.git and https://user@example.com/path",
    "https://example.com:8443/a?email=someone@example.com",
    "Bearer tokens expire after 3600 seconds",
    "AKIA is the prefix of AWS access key ids",
    "eyJ is how base64 JSON starts",
    "ratio=0.5, time 12:30, x: y",
    "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIU\n-----END CERTIFICATE-----",
    "ghp_short and xoxb-bot are placeholder names in the docs",
    "café, 東京, emoji 🙂 and <|endoftext|> stay as they are",
]


@pytest.mark.parametrize(("kind", "text", "secret"), POSITIVES)
def test_secrets_are_replaced_by_a_typed_marker(kind, text, secret):
    result = redact(text)
    assert secret not in result.text
    assert f"[REDACTED:{kind}]" in result.text
    assert result.count >= 1 and kind in result.types
    assert kind in REDACTION_TYPES


@pytest.mark.parametrize("text", NEGATIVES)
def test_ordinary_text_ids_and_hashes_survive(text):
    result = redact(text)
    assert (result.text, result.count, result.types) == (text, 0, ())


def test_context_around_a_secret_is_kept():
    assert redact("postgres://app:pw1234@db:5432/x").text == (
        "postgres://app:[REDACTED:url_password]@db:5432/x"
    )
    assert redact("password='hunter2', user=bob").text == (
        "password='[REDACTED:password]', user=bob"
    )
    assert redact("Authorization: Bearer 8f14e45fceea167a5a36").text == (
        "Authorization: Bearer [REDACTED:bearer_token]"
    )


def test_counts_every_secret_and_lists_each_type_once():
    result = redact("AKIAIOSFODNN7EXAMPLE then AKIAI44QH8DHBEXAMPLE and password=x1")
    assert result.count == 3 and result.types == ("aws_access_key", "password")


def test_redacting_twice_changes_nothing_more():
    once = redact(POSITIVES[0][1] + " " + POSITIVES[17][1])
    twice = redact(once.text)
    assert twice.text == once.text and twice.count == 0


@given(st.text(max_size=300))
def test_redaction_never_fails_and_is_idempotent(text):
    once = redact(text)
    assert redact(once.text).text == once.text
    assert (once.count > 0) == (once.text != text)
    assert once.count >= len(once.types)


# Each pattern runs only on text holding one of its literals; these check that none of its
# matches lacks one, so skipping it never misses a secret.
@pytest.mark.parametrize("kind, needed, pattern", _PATTERNS, ids=[kind for kind, *_ in _PATTERNS])
@given(data=st.data())
def test_a_pattern_never_matches_text_without_its_literals(kind, needed, pattern, data):
    match = data.draw(st.from_regex(pattern, fullmatch=True))
    assert any(literal in match for literal in needed)


@pytest.mark.parametrize(
    "pattern, needed", [(_BEARER, ("bearer",)), (_URL_PASSWORD, ("://", "@"))], ids=str
)
@given(data=st.data())
def test_bearer_tokens_and_url_passwords_need_their_literals(pattern, needed, data):
    match = pattern.search(data.draw(st.from_regex(pattern)))  # (a lookahead ends the URL's)
    assert all(literal in match.group(0).lower() for literal in needed)  # any scheme case


@pytest.mark.parametrize("kind", list(_SECRET_NAMES))
@given(data=st.data())
def test_every_spelling_of_a_secret_name_is_looked_at(kind, data):
    name = data.draw(st.from_regex(re.compile(_SECRET_NAMES[kind], re.IGNORECASE), fullmatch=True))
    assert _may_name_a_secret(f"the {name}=Zq81xv90 here")


@pytest.mark.parametrize(
    "text", ["pa\u017fsword=hunter2x9", "ap\u0131_key=4f8a9c2e71", "DB_PASSWORD=hunter2x9"]
)
def test_names_spelled_with_case_folded_characters_are_redacted(text):
    assert redact(text).count == 1  # the long s, the dotless i: Unicode case folding


def test_json_values_are_walked_and_secret_named_keys_redacted_whole():
    result = redact_json(
        {
            "content": "key AKIAIOSFODNN7EXAMPLE",
            "password": "plain words",
            "DB_Password": "hunter2",
            "api_key": "",
            "nested": [{"client_secret": "abc"}, "fine", 3, None, True],
            "tokens": 4000,
        }
    )
    assert result.value == {
        "content": "key [REDACTED:aws_access_key]",
        "password": "[REDACTED:password]",
        "DB_Password": "[REDACTED:password]",
        "api_key": "",
        "nested": [{"client_secret": "[REDACTED:secret]"}, "fine", 3, None, True],
        "tokens": 4000,
    }
    assert result.count == 4
    assert result.types == ("aws_access_key", "password", "secret")


def test_redaction_metadata_adds_to_what_was_recorded():
    assert redaction_metadata(0, [], {"a": 1}) == {"a": 1}
    merged = redaction_metadata(
        2, ["jwt"], {"_redaction_count": 1, "_redaction_types": ["password"]}
    )
    assert merged == {"_redaction_count": 3, "_redaction_types": ["jwt", "password"]}


def test_redact_item_is_the_one_call_for_a_store_write():
    value, metadata = redact_item(
        {"content": "use ghp_16C7e42F292c6912E7710c838347Ae178B4a"},
        {"note": "password=hunter2", "tier": "hot", "tags": ["ops"]},
    )
    assert value == {"content": "use [REDACTED:github_token]"}
    assert metadata == {
        "note": "password=[REDACTED:password]",
        "tier": "hot",
        "tags": ["ops"],
        "_redaction_count": 2,
        "_redaction_types": ["github_token", "password"],
    }
    assert redact_item("nothing secret", None) == ("nothing secret", None)
    assert redact_item("AKIAIOSFODNN7EXAMPLE", None)[1] == {
        "_redaction_count": 1,
        "_redaction_types": ["aws_access_key"],
    }


# -- errors and displayed text ---------------------------------------------------------------


def test_errors_keep_their_message_until_they_leave_and_survive_pickling():
    # redaction happens where an error leaves the program (CLI, JSON-RPC, MCP, log filter)
    error = InvalidRequest("tier 'AKIAIOSFODNN7EXAMPLE' is not one of hot, warm, cold")
    assert str(error) == "tier 'AKIAIOSFODNN7EXAMPLE' is not one of hot, warm, cold"
    assert str(pickle.loads(pickle.dumps(error))) == str(error)  # Prefect pickles results


def test_the_log_filter_redacts_a_message_and_its_arguments(caplog):
    logger = get_logger("animus_flows.test_redaction")
    with caplog.at_level("INFO", logger="animus_flows.test_redaction"):
        logger.info("plugin said %s", "key AKIAIOSFODNN7EXAMPLE")
        logger.info("nothing %s here", "secret")
    assert [r.getMessage() for r in caplog.records] == [
        "plugin said key [REDACTED:aws_access_key]",
        "nothing secret here",
    ]


def test_redact_head_redacts_before_it_cuts():
    text = "x" * 90 + " AKIAIOSFODNN7EXAMPLE"
    assert redact_head(text, 100) == "x" * 90 + " [REDACTED"
    assert redact(text[:100]).text == text[:100]  # cut first, the piece would stay


@pytest.mark.parametrize(
    "url,shown",
    [
        ("https://user:hunter2@zep.example.com:8000/api", "https://***@zep.example.com:8000/api"),
        ("https://z_token1234@127.0.0.1:9/", "https://***@127.0.0.1:9/"),
        ("https://a@b@zep.example.com/x?next=c@d", "https://***@zep.example.com/x?next=c@d"),
        ("https://zep.example.com/users/a@b", "https://zep.example.com/users/a@b"),
        ("https://zep.example.com?next=a@b", "https://zep.example.com?next=a@b"),
        ("zep.example.com", "zep.example.com"),
    ],
)
def test_shown_url_hides_only_the_userinfo(url, shown):
    assert shown_url(url) == shown


@pytest.mark.parametrize(
    "text,secret",
    [
        ("z_supersecretkey1234567890abcdef", True),
        ("AKIAIOSFODNN7EXAMPLE", True),
        ("ZEP_API_KEY", False),
        ("zep_key_2", False),
        ("zep_api_key_for_project_2", False),
        ("ANIMUS_TEST_ZEP_KEY_2024", False),
    ],
)
def test_looks_like_secret_tells_keys_from_variable_names(text, secret):
    assert looks_like_secret(text) is secret


@pytest.mark.parametrize(
    "key",
    [
        "fx/eur-usd-range",
        "password-policy",
        "api_key_rotation",
        "auth:token",
        "ghp_notes",
        "0b7c9f2e-1d2a-4b7e-9c1a-2f3e4d5c6b7a",
        "d49758a1c3e5f7a9b1c3d5e7f9a1b3c5d7e9f1a3",
        "café/東京",
    ],
)
def test_keys_that_name_secrets_without_holding_one_are_accepted(key):
    refuse_secret_in_key(key)  # no error


def test_a_key_holding_a_secret_is_refused_quoted_redacted():
    with pytest.raises(InvalidRequest) as refused:
        refuse_secret_in_key("deploy/api_key=abcd1234secret")
    message = str(refused.value)
    assert message.startswith("key 'deploy/api_key=[REDACTED:api_key]' holds a secret (api_key)")
    assert "abcd1234secret" not in message


def test_json_deeper_than_the_limit_is_refused_at_a_fixed_depth():
    from animus_flows.redaction import MAX_JSON_DEPTH, redact_json

    def deep(levels):
        value = "AKIAIOSFODNN7EXAMPLE"
        for _ in range(levels):
            value = [value]
        return value

    redacted = redact_json(deep(MAX_JSON_DEPTH))  # walked to the bottom
    assert redacted.types == ("aws_access_key",)
    with pytest.raises(InvalidRequest, match="nests lists or objects too deeply"):
        redact_json(deep(MAX_JSON_DEPTH + 1))
