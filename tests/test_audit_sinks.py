"""The audit: the JSONL sink refuses a path it cannot write when it is made (not inside a
phase); each memory op reads as a sentence; a run's degraded operations are counted in one line."""

import pytest

from animus_flows.errors import ConfigError
from animus_flows.retrieval.audit import (
    JsonlSink,
    MemoryOpEvent,
    degraded_message,
    degraded_ops,
    unwritable_reason,
)


def test_a_writable_path_is_created_with_its_folders(tmp_path):
    path = tmp_path / "deep" / "er" / "audit.jsonl"
    assert unwritable_reason(path) is None
    JsonlSink(path)
    assert path.is_file() and path.read_text() == ""


def test_paths_that_cannot_hold_the_file_are_named_with_the_reason(tmp_path):
    (tmp_path / "folder").mkdir()
    (tmp_path / "plain").write_text("not a folder")
    assert unwritable_reason(tmp_path / "folder") == "is a folder"
    assert "which is not a folder" in unwritable_reason(tmp_path / "plain" / "x" / "a.jsonl")
    with pytest.raises(ConfigError, match=r"audit.path '.*plain/a.jsonl' cannot be written"):
        JsonlSink(tmp_path / "plain" / "a.jsonl")
    with pytest.raises(ConfigError, match="point audit.path at a file in a writable folder"):
        JsonlSink(tmp_path / "folder")
    assert (tmp_path / "plain").read_text() == "not a folder"


def op(status="ok", **fields):
    base = dict(op="query", plugin_id="memory-local", binding="market-context", scope=None)
    return MemoryOpEvent(**{**base, "status": status, **fields})


@pytest.mark.parametrize(
    "event,sentence",
    [
        (
            op(result_count=7, tokens_deducted=165, latency_ms=5.93, detail="injected 4"),
            "query market-context on memory-local: 7 hits, 165 tokens injected, 5.9 ms",
        ),
        (
            op(result_count=1, tokens_deducted=9, latency_ms=1, detail="injected 1; 2 refused: "
               "not public"),
            "query market-context on memory-local: 1 hit, 9 tokens injected, 1.0 ms "
            "(2 refused: not public)",
        ),
        (
            op(detail="not queried: the flow budget is spent"),
            "query market-context on memory-local: not queried: the flow budget is spent",
        ),
        (
            op("timeout", latency_ms=501.24, detail="no answer within 500 ms; went on without it"),
            "query market-context on memory-local timed out after 501.2 ms (no answer within "
            "500 ms); the phase went on without it",
        ),
        (
            op("error", latency_ms=3, detail="StoreUnavailable: plugin exited with code 3"),
            "query market-context on memory-local failed after 3.0 ms (StoreUnavailable: plugin "
            "exited with code 3); the phase went on without it",
        ),
        (
            op("unmatched", plugin_id="memory-confluence", binding="company-wiki",
               detail="no store or saved memory-store block named 'memory-confluence'"),
            "query company-wiki on memory-confluence: no store or saved memory-store block named "
            "'memory-confluence'; the binding did nothing",
        ),
        (
            op("denied", op="put", detail="this corpus is read-only"),
            "put market-context on memory-local was refused by the store: this corpus is "
            "read-only",
        ),
        (
            op(op="put", bytes_in=312, latency_ms=3.14, detail="stored phase-output/w/p/1"),
            "put market-context on memory-local: stored phase-output/w/p/1, 312 bytes, 3.1 ms",
        ),
    ],
)  # fmt: skip
def test_each_memory_op_reads_as_a_sentence(event, sentence):
    assert event.sentence == sentence


def test_the_degraded_line_counts_timeouts_errors_and_unmatched_by_binding():
    events = [
        op("unmatched", binding="company-wiki"),
        op("ok"),
        op("denied", op="put"),  # a refused write is not a degradation
        op("timeout"),
        op("unmatched", binding="company-wiki", phase_id="plan"),
        op("error", binding="desk-playbook"),
        op("unmatched", binding="other-wiki"),
    ]
    assert degraded_message(events) == (
        "5 memory operations degraded: 1 timeout (market-context), 1 error (desk-playbook), "
        "3 unmatched (company-wiki, other-wiki)"
    )
    assert degraded_message([op("timeout")]) == (
        "1 memory operation degraded: 1 timeout (market-context)"
    )
    assert degraded_message([op("ok"), op("denied")]) is None
    assert [(d["status"], d["binding"], d["phase"]) for d in degraded_ops(events)][:2] == [
        ("unmatched", "company-wiki", None),
        ("timeout", "market-context", None),
    ]
    assert set(degraded_ops(events)[0]) == {"phase", "op", "binding", "plugin", "status", "detail"}
