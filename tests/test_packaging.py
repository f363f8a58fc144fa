"""`blocks/` and `hooks/` ship as `animus_flows.blocks` and `animus_flows.hooks`."""

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHECK = (
    "import animus_flows.blocks as b, animus_flows.hooks as h; "
    "from importlib.metadata import entry_points; "
    "eps = entry_points(group='prefect.collections'); "
    "assert any(ep.value == 'animus_flows.blocks' for ep in eps), eps; "
    "print(b.__file__); print(h.__file__)"
)


def test_the_editable_install_maps_the_top_level_folders():
    out = subprocess.run(
        [sys.executable, "-c", CHECK], capture_output=True, text=True, check=True, cwd="/"
    )
    blocks_file, hooks_file = out.stdout.split()
    assert Path(blocks_file) == ROOT / "blocks" / "__init__.py"
    assert Path(hooks_file) == ROOT / "hooks" / "__init__.py"


def test_nothing_is_importable_as_top_level_blocks_or_hooks():
    code = "import importlib.util as u; print(u.find_spec('blocks'), u.find_spec('hooks'))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd="/")
    assert out.stdout.strip() == "None None"


@pytest.mark.slow
def test_the_wheel_ships_and_imports_both_subpackages(tmp_path):
    # build from a copy: setuptools leaves build/ behind, and a stale one would ship old files
    source = tmp_path / "source"
    ignore = shutil.ignore_patterns(
        ".venv", ".git", "build", "dist", "*.egg-info", ".animus", "__pycache__", ".*_cache"
    )
    shutil.copytree(ROOT, source, ignore=ignore)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path),
            str(source),
        ],
        check=True,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("animus_flows-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "animus_flows/blocks/__init__.py" in names
    assert "animus_flows/hooks/__init__.py" in names
    assert not any(name.startswith(("blocks/", "hooks/", "tests/")) for name in names)
    target = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "-q",
            "--target",
            str(target),
            str(wheel),
        ],
        check=True,
        capture_output=True,
    )
    # only the wheel's copy on the path: run isolated from the editable install's finder
    code = f"import sys; sys.path.insert(0, {str(target)!r}); " + CHECK.replace(
        "from importlib.metadata import entry_points; ",
        "from importlib.metadata import entry_points; import importlib.metadata as m; ",
    )
    out = subprocess.run(
        [sys.executable, "-S", "-c", _with_site(code, target)],
        capture_output=True,
        text=True,
        cwd="/",
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[0].startswith(str(target))


def _with_site(code: str, target: Path) -> str:
    # -S skips site (and the editable finder); add the venv's site-packages after the wheel
    import site

    paths = [p for p in site.getsitepackages()]
    return (
        "import sys, re; "
        f"sys.path[:0] = [{str(target)!r}]; sys.path += {paths!r}; "
        "sys.meta_path[:] = [f for f in sys.meta_path if 'editable' not in repr(f)]; " + code
    )
