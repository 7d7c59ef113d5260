"""The distribution installs one import package, `memoryd`, mapped from the daemon/ and workers/
folders; nothing imports the folders' own names (a second copy of every module, and a clash
with python-daemon's `daemon`); `python -m memoryd` is the command line."""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
FOLDERS = {"memoryd": ROOT / "daemon", "memoryd.workers": ROOT / "workers"}


def _folder_packages() -> set[str]:
    """Every package the folders hold: each folder with an __init__.py, and the folders of SQL
    files the store ships as data."""
    found = set()
    for name, folder in FOLDERS.items():
        for init in folder.rglob("__init__.py"):
            relative = init.parent.relative_to(folder).parts
            found.add(".".join((name, *relative)))
    for sql_folder in {p.parent for p in (ROOT / "daemon" / "store" / "migrations").rglob("*.sql")}:
        relative = sql_folder.relative_to(ROOT / "daemon").parts
        found.add(".".join(("memoryd", *relative)))
    return found


def test_the_package_list_names_every_folder() -> None:
    setuptools = PYPROJECT["tool"]["setuptools"]
    assert setuptools["package-dir"] == {"memoryd": "daemon", "memoryd.workers": "workers"}
    assert set(setuptools["packages"]) == _folder_packages()


def _top_level_imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_nothing_imports_the_folders_by_their_own_names() -> None:
    offenders = []
    for folder in ("daemon", "workers", "tools", "bench", "tests"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if _top_level_imports(path) & {"daemon", "workers"}:
                offenders.append(str(path.relative_to(ROOT)))
    assert offenders == []


def test_python_dash_m_memoryd_is_the_command_line(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "memoryd", "--version"], capture_output=True, text=True, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("memoryd, version ")
    # A failing command exits with the code the `memoryd` script gives (2: a usage error).
    for command in ([sys.executable, "-m", "memoryd"], [str(Path(sys.executable).parent / "memoryd")]):
        done = subprocess.run([*command, "no-such-command"], capture_output=True, text=True, cwd=tmp_path)
        assert done.returncode == 2, (command, done.stderr)
        assert "No such command 'no-such-command'" in done.stderr


def test_the_wheel_holds_memoryd_only_with_its_data(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
         "--wheel-dir", str(tmp_path), str(ROOT)],
        check=True, capture_output=True,
    )  # fmt: skip
    (wheel,) = tmp_path.glob("memoryd-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert {name.split("/")[0] for name in names} == {"memoryd", wheel.name.split("-py3")[0] + ".dist-info"}
    assert "memoryd/py.typed" in names and "memoryd/__main__.py" in names
    assert "memoryd/workers/settings.py" in names
    shipped = {n for n in names if n.endswith(".sql")}
    expected = {
        "memoryd/" + str(p.relative_to(ROOT / "daemon"))
        for p in (ROOT / "daemon" / "store" / "migrations").rglob("*.sql")
    }
    assert shipped == expected and expected
