"""Fixtures shared by several test modules."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def formats_dir() -> Path:
    """``../shared/data/extrap-formats`` beside the repository (CI: X/main and X/shared)."""
    path = REPO.parent / "shared" / "data" / "extrap-formats"
    if not path.is_dir():
        pytest.skip(f"Extra-P example data not found at {path} (expected beside the repository)")
    return path
