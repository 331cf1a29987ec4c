"""Fixtures shared by several test modules, and the rules CI holds the suite to.

Two rules live here because they concern every test module:

* **Under ``CI=true`` a skip is a failure** unless its reason is one of
  :data:`ALLOWED_SKIPS`. Tests skip when a tool they drive (clang-16, Open MPI, valgrind,
  Slurm) or the shared data beside the repository (``../shared``) is missing; on a developer's
  machine that is a convenience, in CI it would hide that half a test file never ran (21 of
  the 42 reader tests need ``../shared``). The failure names what is missing and how to get
  it. Skips for reasons no installation fixes (the machine forbids a tmpfs mount, root reads
  every directory) stay skips.
* **``long`` tests run only when the ``-m`` expression names them** (``-m long``): they are
  many-thousand-case fuzz campaigns. Deselecting them here rather than in ``addopts`` keeps
  them out of ``pytest -m "not slow"`` too, whose ``-m`` would replace one from ``addopts``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Generator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
"""The shared data and applications, checked out beside the repository (CI: X/main and
X/shared)."""

CI = os.environ.get("CI", "").lower() == "true"
"""``CI=true`` (as GitHub Actions, GitLab CI and ``.ci/run``'s callers set it)."""

ALLOWED_SKIPS = (
    # the kernel or container forbids it; no package provides it
    re.compile(r"cannot mount a tmpfs here"),
    re.compile(r"root reads directories without permission"),
    re.compile(r"Slurm cannot start: its daemons need root here"),
)
"""Skip reasons that stay skips under ``CI=true``: properties of the machine, not missing
installations."""

INSTALL_HINTS = (
    (
        re.compile(r"Open MPI|MPI wrappers|mpicc|mpicxx|mpirun"),
        "apt-get install openmpi-bin libopenmpi-dev",
    ),
    (re.compile(r"clang"), "apt-get install clang-16 libclang-rt-16-dev llvm-16"),
    (re.compile(r"valgrind"), "apt-get install valgrind"),
    (re.compile(r"Slurm|slurm|munge"), "apt-get install slurm-wlm munge"),
    (re.compile(r"SimGrid|smpirun"), "apt-get install libsimgrid-dev"),
    (
        re.compile(r"could not import|islpy|import-linter"),
        "pip install -e '.[dev,static,taint,thicket]'",
    ),
    (re.compile(r"shared|Extra-P example data|LULESH"), f"check out the shared data at {SHARED}"),
)
"""What to install for a skip reason; ``bash scripts/setup.sh`` installs all of them."""


def _skip_reason(longrepr: object) -> str:
    """The reason of a skipped report (pytest keeps it as ``(file, line, "Skipped: why")``)."""
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


def ci_failure(reason: str) -> str | None:
    """The failure message for a skip under ``CI=true``, or None if the skip may stay."""
    if not CI or any(allowed.search(reason) for allowed in ALLOWED_SKIPS):
        return None
    hints = [hint for pattern, hint in INSTALL_HINTS if pattern.search(reason)]
    fix = "; ".join(hints) if hints else "install what it names"
    return (
        f"CI=true: a required tool or data set is missing, so this test would be skipped: "
        f"{reason}\nfix: {fix} (bash scripts/setup.sh installs every tool); a skip that no "
        f"installation can fix belongs in ALLOWED_SKIPS in {Path(__file__).name}"
    )


def _fail_skip(report: pytest.TestReport | pytest.CollectReport) -> None:
    if not report.skipped or hasattr(report, "wasxfail"):
        return
    message = ci_failure(_skip_reason(report.longrepr))
    if message is not None:
        report.outcome = "failed"
        report.longrepr = message


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport() -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Skips from ``skipif`` marks, ``pytest.skip`` in fixtures and tests: see the module."""
    report = yield
    _fail_skip(report)
    return report


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report() -> Generator[None, pytest.CollectReport, pytest.CollectReport]:
    """Whole modules skipped at import (``pytest.importorskip``): see the module."""
    report = yield
    _fail_skip(report)
    return report


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect ``long`` tests unless ``-m`` names them (see the module docstring)."""
    if "long" in (config.getoption("markexpr") or ""):
        return
    long = [item for item in items if item.get_closest_marker("long") is not None]
    if long:
        config.hook.pytest_deselected(items=long)
        items[:] = [item for item in items if item.get_closest_marker("long") is None]


@pytest.fixture(scope="session")
def formats_dir() -> Path:
    """Extra-P's example files, ``../shared/data/extrap-formats``."""
    path = SHARED / "data" / "extrap-formats"
    if not path.is_dir():
        pytest.skip(f"Extra-P example data not found at {path} (expected beside the repository)")
    return path
