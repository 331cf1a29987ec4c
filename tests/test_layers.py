"""The layer contract (``[tool.importlinter]`` in pyproject.toml) and the reader plug-ins
that let the measure stage sit above the measurement table it feeds.

The contract is checked by the real tool, ``lint-imports``, as ``make lint`` and CI run it;
one test breaks a copy of the package on purpose to show the check can fail.
"""

from __future__ import annotations

import importlib.metadata
import os
import pkgutil
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

import perfcast
from perfcast.errors import PerfcastError
from perfcast.experiment.io import read_experiment, registry
from perfcast.experiment.io.registry import READERS_GROUP, Format, detect_format, get_format
from perfcast.experiment.io.text import read_text

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = ROOT / "pyproject.toml"


def _lint_imports() -> str:
    tool = shutil.which("lint-imports")
    if tool is None:
        pytest.skip("import-linter is not installed (pip install -e .[dev])")
    return tool


def _layers_contract() -> dict:
    config = tomllib.loads(PYPROJECT.read_text())["tool"]["importlinter"]
    # the package's layers; csource has layers of its own
    (contract,) = [
        c for c in config["contracts"] if c["type"] == "layers" and c["containers"] == ["perfcast"]
    ]
    return contract


def _declared_layers(contract: dict) -> tuple[set[str], set[str]]:
    """The module names the layers declare: all of them, and the optional ones."""
    names: set[str] = set()
    optional: set[str] = set()
    for layer in contract["layers"]:
        for raw in layer.replace(":", "|").split("|"):
            name = raw.strip()
            if name.startswith("(") and name.endswith(")"):
                name = name[1:-1]
                optional.add(name)
            names.add(name)
    return names, optional


def test_the_import_contracts_are_kept():
    result = subprocess.run(
        [_lint_imports(), "--config", str(PYPROJECT), "--no-cache"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_the_layers_name_every_top_level_module():
    contract = _layers_contract()
    assert contract["exhaustive"] is True
    declared, optional = _declared_layers(contract)
    modules = {module.name for module in pkgutil.iter_modules(perfcast.__path__)}
    assert modules - declared == set(), "give these modules a layer in pyproject.toml"
    assert declared - optional - modules == set(), "these layers name no module"


def test_the_contract_catches_an_import_from_a_higher_layer(tmp_path):
    # The same check on a copy of the package whose lowest layer imports the CLI.
    copy = tmp_path / "perfcast"
    shutil.copytree(Path(perfcast.__file__).parent, copy, ignore=shutil.ignore_patterns("*.pyc"))
    errors = copy / "errors.py"
    errors.write_text(errors.read_text() + "\n\ndef _cli():\n    import perfcast.cli  # noqa\n")
    result = subprocess.run(
        [_lint_imports(), "--config", str(PYPROJECT), "--no-cache"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode != 0
    assert "perfcast.errors -> perfcast.cli" in result.stdout


# -- readers declared as entry points -------------------------------------------------------


def test_the_campaign_store_reader_is_declared_like_a_third_party_reader():
    points = {
        point.name: point.value for point in importlib.metadata.entry_points(group=READERS_GROUP)
    }
    assert points["sqlite"] == "perfcast.measure.reader:FORMAT"
    config = tomllib.loads(PYPROJECT.read_text())
    assert config["project"]["entry-points"][READERS_GROUP] == {
        "sqlite": "perfcast.measure.reader:FORMAT"
    }


def test_declared_readers_are_listed_without_importing_them(tmp_path):
    store = tmp_path / "campaign.sqlite"
    store.write_bytes(b"SQLite format 3\x00")
    script = (
        "import sys\n"
        "from perfcast.experiment.io import FORMATS\n"
        "from perfcast.experiment.io.registry import detect_format\n"
        "assert FORMATS[-1] == 'sqlite', FORMATS\n"
        "assert 'perfcast.measure' not in sys.modules\n"
        f"print(detect_format(__import__('pathlib').Path({str(store)!r})).name)\n"
        "assert 'perfcast.measure.reader' in sys.modules\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "sqlite"


@pytest.fixture
def declared(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[importlib.metadata.EntryPoint]]:
    """Entry points of group ``perfcast.readers`` as a test installs them."""
    points: list[importlib.metadata.EntryPoint] = []
    monkeypatch.setattr(
        importlib.metadata,
        "entry_points",
        lambda group: [p for p in points if p.group == group],
    )
    registry._declared.cache_clear()
    registry._load.cache_clear()
    yield points
    registry._declared.cache_clear()
    registry._load.cache_clear()


def _point(name: str, value: str) -> importlib.metadata.EntryPoint:
    return importlib.metadata.EntryPoint(name=name, value=value, group=READERS_GROUP)


TABBED = Format(
    name="tabbed",
    summary="Extra-P text under another extension: a reader a third party declares",
    reader=read_text,
    suffixes=(".tabbed",),
)


def test_a_declared_reader_detects_and_reads_its_files(declared, tmp_path):
    declared.append(_point("tabbed", f"{__name__}:TABBED"))
    path = tmp_path / "runs.tabbed"
    path.write_text("PARAMETER p\nPOINTS 1 2 4\nREGION main\nMETRIC time\nDATA 1\nDATA 2\nDATA 4\n")
    assert registry.format_names()[-1] == "tabbed"
    assert detect_format(path) is TABBED
    assert read_experiment(path).parameters == ["p"]
    assert read_experiment(path, format="tabbed").callpaths == ["main"]


def test_a_declared_name_must_name_its_format(declared):
    declared.append(_point("tabbed", "perfcast.experiment.io.text:FORMAT"))
    with pytest.raises(PerfcastError, match="must name a Format called 'tabbed', not the 'text'"):
        get_format("tabbed")


def test_a_reader_that_cannot_be_loaded_is_named(declared):
    declared.append(_point("lost", "perfcast_lost_plugin.reader:FORMAT"))
    assert registry.format_names()[-1] == "lost"
    with pytest.raises(PerfcastError, match=r"cannot load file format 'lost' from entry point"):
        get_format("lost")


def test_a_reader_may_not_take_a_built_in_name(declared):
    declared.append(_point("text", "perfcast.measure.reader:FORMAT"))
    with pytest.raises(PerfcastError, match="file format 'text' is declared twice"):
        registry.format_names()
