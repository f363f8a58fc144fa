"""The scratchpad file: hard limit, atomic replacement, and real processes writing at once."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from animus_flows.memory.scratchpad import Scratchpad, ScratchpadFull


def test_a_write_past_the_limit_is_refused_with_both_counts_and_changes_nothing(tmp_path):
    pad = Scratchpad(tmp_path, "desk", "analyst", max_chars=20)
    pad.write("0123456789")
    before = pad.path.read_bytes()
    with pytest.raises(ScratchpadFull) as refused:
        pad.append("abcdefghijk")  # 10 + newline + 11 = 22
    assert (refused.value.chars_current, refused.value.chars_limit) == (10, 20)
    assert refused.value.chars_requested == 22
    assert "would hold 22 characters, over its limit of 20 (currently 10)" in str(refused.value)
    with pytest.raises(ScratchpadFull):
        pad.write("x" * 21)
    assert pad.path.read_bytes() == before
    assert pad.write("x" * 20).chars_current == 20  # exactly the limit fits


@pytest.mark.parametrize("project", ["..", ".", "../..", "a/b", "100%", "é"])
@pytest.mark.parametrize("scope", ["..", ".", "x/../y"])
def test_any_id_stays_one_file_inside_the_scratchpad_folder(tmp_path, project, scope):
    root = tmp_path / ".animus"
    pad = Scratchpad(root, project, scope, max_chars=100)
    pad.write("note")
    assert pad.path.parent.parent == root / "scratchpad"
    assert [p for p in tmp_path.rglob("*.md")] == [pad.path]
    others = {Scratchpad(root, other, scope, max_chars=100).path for other in ("..", ".", "%2E")}
    assert len(others) == 3  # distinct ids, distinct files


def test_append_adds_a_line_and_an_empty_append_changes_nothing(tmp_path):
    pad = Scratchpad(tmp_path, "desk", "analyst")
    assert pad.append("first").text == "first"
    assert pad.append("second\n").text == "first\nsecond\n"
    assert pad.append("third").text == "first\nsecond\nthird"
    assert pad.append("").text == "first\nsecond\nthird"
    assert pad.read().chars_limit == 6000


def test_a_failed_write_keeps_the_old_text_and_leaves_no_temporary_file(tmp_path, monkeypatch):
    pad = Scratchpad(tmp_path, "desk", "analyst")
    pad.write("kept")

    def crash(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", crash)
    with pytest.raises(OSError, match="No space left"):
        pad.write("lost")
    monkeypatch.undo()
    assert pad.read().text == "kept"
    assert sorted(p.name for p in pad.path.parent.iterdir()) == ["analyst.lock", "analyst.md"]


WRITER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from animus_flows.memory.scratchpad import Scratchpad

    root, name, count = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    pad = Scratchpad(root, "desk", "shared", max_chars=1_000_000)
    print("ready", flush=True)
    sys.stdin.readline()  # start together
    for n in range(count):
        pad.append(f"{name}-{n}")
    """
)


def test_processes_appending_at_once_lose_no_note(tmp_path):
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    writers = [
        subprocess.Popen(
            [sys.executable, str(script), str(tmp_path), f"w{i}", "60"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for i in range(3)
    ]
    for writer in writers:
        assert writer.stdout.readline().strip() == "ready"
    for writer in writers:
        writer.stdin.write("go\n")
        writer.stdin.flush()
    for writer in writers:
        assert writer.wait(timeout=120) == 0
    lines = Scratchpad(tmp_path, "desk", "shared").read().text.splitlines()
    assert sorted(lines) == sorted(f"w{i}-{n}" for i in range(3) for n in range(60))
    for i in range(3):  # each writer's notes stay in its own order
        mine = [line for line in lines if line.startswith(f"w{i}-")]
        assert mine == [f"w{i}-{n}" for n in range(60)]


REWRITER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from animus_flows.memory.scratchpad import Scratchpad

    pad = Scratchpad(Path(sys.argv[1]), "desk", "crash", max_chars=2_000_000)
    print("ready", flush=True)
    n = 0
    while True:
        letter = "AB"[n % 2]
        pad.write(letter * (400_000 if letter == "A" else 900_000))
        n += 1
    """
)


def test_a_writer_killed_mid_write_never_leaves_half_a_file(tmp_path):
    # The file always holds a whole write: anything else (even empty) is a torn file.
    script = tmp_path / "rewriter.py"
    script.write_text(REWRITER)
    pad = Scratchpad(tmp_path, "desk", "crash", max_chars=2_000_000)
    for delay in (0.0, 0.013, 0.029, 0.047, 0.071, 0.089):
        pad.write("A" * 400_000)
        writer = subprocess.Popen(
            [sys.executable, str(script), str(tmp_path)], stdout=subprocess.PIPE, text=True
        )
        assert writer.stdout.readline().strip() == "ready"
        deadline = time.monotonic() + 30
        while not pad.read().text.startswith("B"):  # the writer is cycling through writes
            assert time.monotonic() < deadline, "the writer never completed a write"
            time.sleep(0.001)
        time.sleep(delay)
        writer.send_signal(signal.SIGKILL)
        writer.wait(timeout=30)
        text = pad.read().text
        assert text in ("A" * 400_000, "B" * 900_000), f"torn file: {len(text)} characters"
    # a killed writer may leave its temporary file; the next write clears it away
    pad.write("after")
    assert sorted(p.name for p in pad.path.parent.iterdir()) == ["crash.lock", "crash.md"]
    assert pad.read().text == "after"


@pytest.mark.parametrize(
    "scope",
    [
        "日本語のエージェント名" * 3,  # 9 bytes per character, percent-encoded
        "日" * 256,
        "a" * 256,
        "é" * 200 + "%",
    ],
)
def test_any_valid_id_gets_a_file_name_within_the_limit(tmp_path, scope):
    pad = Scratchpad(tmp_path, "p" * 256, scope, max_chars=100)
    assert pad.write("x").text == "x"
    assert pad.read().text == "x"
    temporary = f".{pad.path.name}.tmp-{'0' * 32}"  # what a write renames into place
    assert len(temporary.encode()) <= 255
    assert len(pad.path.parent.name.encode()) <= 255


def test_long_ids_stay_distinct_and_readable(tmp_path):
    names = {Scratchpad(tmp_path, "desk", "日" * 200 + tail).path.name for tail in "abc"}
    assert len(names) == 3
    assert all(name.startswith("%E6%97%A5%E6%97%A5") for name in names)
    # an id whose encoding is short keeps the name it always had
    assert Scratchpad(tmp_path, "desk", "trade-analyst").path.name == "trade-analyst.md"
    assert Scratchpad(tmp_path, "desk", "é").path.name == "%C3%A9.md"
    assert Scratchpad(tmp_path, "desk", "a" * 214).path.name == "a" * 214 + ".md"


@pytest.mark.parametrize("max_chars", [0, -1, None, 1.5, True])
def test_the_limit_must_be_a_positive_integer(tmp_path, max_chars):
    from animus_flows.errors import ConfigError

    with pytest.raises(ConfigError, match=f"max_chars {max_chars!r} must be an integer >= 1"):
        Scratchpad(tmp_path, "desk", "analyst", max_chars=max_chars)


def test_empty_ids_and_text_that_is_not_a_string_are_refused(tmp_path):
    from animus_flows.errors import InvalidRequest, InvalidScope

    with pytest.raises(InvalidScope, match="^scratchpad scope is empty; pass a non-empty string$"):
        Scratchpad(tmp_path, "desk", "")
    with pytest.raises(InvalidScope, match="^scratchpad project_id is empty; pass a non-empty"):
        Scratchpad(tmp_path, "", "analyst")
    with pytest.raises(InvalidScope, match="^scratchpad scope 7 is a int; pass a string$"):
        Scratchpad(tmp_path, "desk", 7)
    pad = Scratchpad(tmp_path, "desk", "analyst")
    for call in (pad.write, pad.append):
        with pytest.raises(InvalidRequest, match="scratchpad text None is a NoneType"):
            call(None)
    assert list(tmp_path.rglob("*.md")) == []


@pytest.mark.parametrize("project,scope", [("desk", "a\ud800"), ("a\udcff", "analyst")])
def test_an_id_with_a_lone_surrogate_is_refused_before_any_file(tmp_path, project, scope):
    from animus_flows.errors import InvalidScope

    # what a JSON "\\ud800" or a folder name that is not UTF-8 becomes: no file can be named so
    with pytest.raises(InvalidScope) as refused:
        Scratchpad(tmp_path, project, scope)
    name = "project_id" if project != "desk" else "scope"
    assert str(refused.value).startswith(f"scratchpad {name} ")
    assert "contains the lone surrogate" in str(refused.value)
    assert "\n" not in str(refused.value)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", ["project_id", "scope"])
def test_a_secret_looking_id_is_redacted_before_the_message_cuts_it(tmp_path, name):
    from animus_flows.errors import InvalidScope

    # the digits that make it look like a key come last: a cut start of it looks like nothing
    secret = "sk-" + "q" * 290 + "0123456789"
    ids = {"project_id": "desk", "scope": "analyst", name: secret}
    with pytest.raises(InvalidScope) as refused:
        Scratchpad(tmp_path, ids["project_id"], ids["scope"])
    message = str(refused.value)
    assert message.startswith(f"scratchpad {name} '[REDACTED:openai_api_key]")
    assert message.endswith("is 303 characters; use at most 256")
    assert "sk-" not in message and "qqqq" not in message
