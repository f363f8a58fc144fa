"""The JSONL audit sink refuses a path it cannot write when it is made, not inside a phase."""

import pytest

from animus_flows.errors import ConfigError
from animus_flows.retrieval.audit import JsonlSink, unwritable_reason


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
