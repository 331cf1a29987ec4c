"""What the command line prints besides results: warnings as one line, like errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from perfcast.cli import _attach_negative_lists

REPO = Path(__file__).resolve().parents[1]


def test_a_stage_warning_is_one_line_naming_the_command(formats_dir):
    """A run directory without a profile is left out with a warning; the user sees one line
    `perfcast model: warning: ...`, not Python's file:line and the source of the warn call."""
    result = subprocess.run(
        [sys.executable, "-m", "perfcast", "model", str(formats_dir / "cubeset" / "extra_folder")],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    lines = result.stderr.splitlines()
    warning = [line for line in lines if "_test_folder" in line]
    assert warning == [
        f"perfcast model: warning: {formats_dir / 'cubeset' / 'extra_folder' / '_test_folder'}: "
        "no Cube profile (*.cubex) in this run directory; it is left out of the model"
    ]
    assert "warnings.warn" not in result.stderr and "UserWarning" not in result.stderr


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["model", "m.txt", "--exponents", "-1,0,1"], ["model", "m.txt", "--exponents=-1,0,1"]),
        (["build", "--", "cc", "--param", "-1,0"], ["build", "--", "cc", "--param", "-1,0"]),
    ],
)
def test_negative_lists_join_their_option_but_never_a_wrapped_command(argv, expected):
    assert _attach_negative_lists(argv) == expected
