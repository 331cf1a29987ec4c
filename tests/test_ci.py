"""What CI relies on: ``CI=true`` turns skips for missing tools and data into failures
(tests/conftest.py), ``long`` tests stay out unless ``-m`` names them, and the package
works installed from a wheel, without the checkout."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

SUITE = """\
import pytest

@pytest.mark.skipif(True, reason="needs Open MPI")
def test_needs_mpi():
    pass

def test_needs_a_tmpfs():
    pytest.skip("cannot mount a tmpfs here: permission denied")

@pytest.mark.xfail(reason="a known bug", strict=True)
def test_known_bug():
    assert False

@pytest.mark.long
def test_long():
    pass

@pytest.mark.slow
def test_slow():
    pass
"""


def _pytest(directory: Path, *args: str, ci: bool) -> subprocess.CompletedProcess[str]:
    """pytest in ``directory`` (which holds a copy of the suite's conftest), CI set or not."""
    environment = {k: v for k, v in os.environ.items() if k != "CI"}
    environment["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"  # hypothesis & co.: seconds to load
    if ci:
        environment["CI"] = "true"
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rA", *args],
        cwd=directory,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def suite(tmp_path: Path) -> Path:
    shutil.copy(REPO / "tests" / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    slow\n    long\n")
    (tmp_path / "test_suite.py").write_text(SUITE)
    return tmp_path


def test_skips_for_missing_tools_fail_under_ci_with_what_to_install(suite):
    done = _pytest(suite, ci=True)
    assert done.returncode == 1, done.stdout
    out = done.stdout
    assert "ERROR test_suite.py::test_needs_mpi" in out
    assert "CI=true: a required tool or data set is missing" in out
    assert "needs Open MPI" in out and "apt-get install openmpi-bin libopenmpi-dev" in out
    # a reason no installation fixes stays a skip; expected failures stay expected
    assert "SKIPPED [1] test_suite.py:8: cannot mount a tmpfs here" in out
    assert "XFAIL test_suite.py::test_known_bug" in out
    assert "1 passed, 1 skipped, 1 deselected, 1 xfailed, 1 error" in out  # long: deselected


def test_a_module_skipped_at_import_fails_collection_under_ci(suite):
    (suite / "test_suite.py").write_text(
        'import pytest\n\npytest.importorskip("perfcast_no_such_module")\n'
    )
    done = _pytest(suite, ci=True)
    assert done.returncode == 2, done.stdout  # collection errors stop the session
    assert "ERROR test_suite.py - CI=true: a required tool or data set is missing" in done.stdout
    assert "No module named 'perfcast_no_such_module'" in done.stdout
    assert "fix: pip install -e '.[dev,static,taint,thicket]'" in done.stdout


def test_outside_ci_skips_stay_skips_and_long_tests_run_only_when_named(suite):
    fast = _pytest(suite, "-m", "not slow", ci=False)
    assert fast.returncode == 0, fast.stdout
    assert "SKIPPED [1] test_suite.py:3: needs Open MPI" in fast.stdout
    assert "2 skipped, 2 deselected, 1 xfailed" in fast.stdout  # slow and long left out
    long = _pytest(suite, "-m", "long", ci=False)
    assert "PASSED test_suite.py::test_long" in long.stdout
    assert "1 passed, 4 deselected" in long.stdout
