"""Start-up: `perfcast --help` lists every command without importing one, and a command
imports what it uses, nothing more.

The import checks run in a fresh interpreter (this one has every stage loaded by other
tests) and look at ``sys.modules`` after the command; they assert what is imported, never
how long it took, which a shared machine cannot promise.
"""

import argparse
import importlib
import json
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import perfcast.cli
from perfcast.cli import COMMANDS, main

EXAMPLE = Path(__file__).parents[1] / "examples" / "data" / "relearn.txt"

HEAVY = ("numpy", "pandas", "scipy", "clang", "pycubexr")
"""Third-party packages that cost a tenth of a second or more to import (libclang's
bindings are ``clang``)."""

STAGES = (
    "perfcast.effort",
    "perfcast.experiment",
    "perfcast.measure",
    "perfcast.modeling",
    "perfcast.report",
    "perfcast.static",
    "perfcast.synth",
    "perfcast.taint",
)
"""The stage packages, which ``perfcast --help`` has no reason to load."""

RUN_AND_LIST_MODULES = """
import json, sys
from perfcast.cli import main
try:
    main(sys.argv[2:])
except SystemExit:
    pass
with open(sys.argv[1], "w") as out:
    json.dump(sorted(sys.modules), out)
"""


def modules_after(tmp_path: Path, *argv: str) -> set[str]:
    """The modules a fresh interpreter has loaded after running ``perfcast ARGV``."""
    listing = tmp_path / "modules.json"
    subprocess.run(
        [sys.executable, "-c", RUN_AND_LIST_MODULES, str(listing), *argv],
        check=True,
        capture_output=True,
        cwd=tmp_path,
    )
    return set(json.loads(listing.read_text()))


def heavy(modules: set[str]) -> set[str]:
    return {name for name in modules if name.split(".")[0] in HEAVY}


def test_help_imports_no_command_and_no_heavy_package(tmp_path: Path) -> None:
    modules = modules_after(tmp_path, "--help")
    assert heavy(modules) == set()
    assert not any(name.startswith(("perfcast.cli.", *STAGES)) for name in modules)


def test_help_lists_every_command_with_its_line(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["--help"])
    assert done.value.code == 0
    listing = " ".join(capsys.readouterr().out.split())  # argparse wraps long lines
    for name, summary in COMMANDS.items():
        assert f"{name} {summary}" in listing


def test_every_command_module_is_declared() -> None:
    modules = {info.name for info in pkgutil.iter_modules(perfcast.cli.__path__)}
    assert modules == set(COMMANDS)


@pytest.mark.parametrize("name", COMMANDS)
def test_each_module_registers_its_declared_command(name: str) -> None:
    subparsers = argparse.ArgumentParser().add_subparsers()
    importlib.import_module(f"perfcast.cli.{name}").register(subparsers)
    assert list(subparsers.choices) == [name]
    assert callable(subparsers.choices[name].get_default("handler"))


def test_command_help_shows_the_commands_own_options(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as done:
        main(["predict", "--help"])
    assert done.value.code == 0
    shown = capsys.readouterr().out
    assert shown.startswith("usage: perfcast predict")
    assert "--full-names" in shown


def test_an_unknown_command_is_refused_with_the_list(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["modle"])
    assert done.value.code == 2
    assert "invalid choice: 'modle'" in capsys.readouterr().err


def test_build_loads_only_the_compiler_wrapper(tmp_path: Path) -> None:
    modules = modules_after(tmp_path, "build", "--", "true")  # refused: not a compiler
    assert "perfcast.measure.build" in modules
    assert heavy(modules) == set()


def test_predict_reads_models_without_pandas(tmp_path: Path) -> None:
    """A model file needs NumPy to evaluate, not the measurement table (pandas), the
    modeler (SciPy) or the other stages."""
    models = tmp_path / "models.json"
    assert main(["model", str(EXAMPLE), "-o", str(models)]) == 0
    modules = modules_after(tmp_path, "predict", str(models), "p=64", "n=5000")
    assert "perfcast.modeling.modelset" in modules
    assert heavy(modules) == {name for name in modules if name.split(".")[0] == "numpy"}
    assert not any(
        name.startswith(
            ("perfcast.experiment.experiment", "perfcast.measure.", "perfcast.modeling.modeler")
        )
        for name in modules
    )


@pytest.mark.parametrize("package", ["perfcast.experiment", "perfcast.modeling", "perfcast.taint"])
def test_lazy_package_exports_resolve_and_are_listed(package: str) -> None:
    module = importlib.import_module(package)
    for name in module.__all__:
        assert name in dir(module)
        value = getattr(module, name)
        assert vars(module)[name] is value  # kept: later reads are plain lookups
    with pytest.raises(AttributeError, match=f"module '{package}' has no attribute 'Experimnet'"):
        module.Experimnet  # noqa: B018 (the attribute access is the test)
