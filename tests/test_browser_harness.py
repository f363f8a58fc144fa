"""The browser tests' rule without a browser: outside CI they skip with the reason, under
CI=true they fail (CI must never pass without having looked at the UI)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ONE_BROWSER_TEST = "tests/browser/test_ui.py::test_a_failed_phase_keeps_its_memory_audit"


def browser_test_without_chromium(ci: str | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["ANIMUS_CHROMIUM"] = "/nonexistent/chromium"
    if ci is not None:
        env["CI"] = ci
    return subprocess.run(
        [sys.executable, "-m", "pytest", ONE_BROWSER_TEST, "-rsf", "-p", "no:cacheprovider"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize(
    "ci,outcome,reason",
    [
        (None, "1 skipped", "SKIPPED"),
        ("true", "1 error", "(CI=true: the browser tests must run)"),
    ],
)
def test_without_chromium_the_browser_tests_skip_or_under_ci_fail(ci, outcome, reason):
    done = browser_test_without_chromium(ci)
    assert outcome in done.stdout, done.stdout[-2000:]
    assert "Debian's chromium is not installed at /nonexistent/chromium" in done.stdout
    assert reason in done.stdout
