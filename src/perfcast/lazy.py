"""Imports on first use: package exports (PEP 562), as hatchet and scikit-image do, and the
optional libraries of one stage.

``perfcast.experiment`` exports the Experiment, whose module imports pandas (0.4 s), and
``perfcast.modeling`` the modeler with the whole fitting stack. A light command reaches
small modules inside these packages (``perfcast predict`` needs the call-path helpers and
the model file, not pandas), and Python runs a package's ``__init__`` before any of its
modules: eager exports there would make every such command pay for the heaviest one.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any

from perfcast.errors import PerfcastError


def lazy_exports(
    package: str, exports: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package`` whose ``exports`` map each public
    name to the module that defines it; the module is imported when the name is first
    read, and the value kept in the package so later reads are plain lookups."""
    namespace = importlib.import_module(package).__dict__

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *exports})

    return __getattr__, __dir__


def optional_module(
    name: str, needs: str, install: str = "pip install 'perfcast[static]'"
) -> ModuleType:
    """The module ``name`` of an optional dependency, imported when a command first needs
    it; if it is not installed, a PerfcastError that says what ``needs`` it
    (``perfcast static needs capstone``) and how to ``install`` it, not a bare
    ModuleNotFoundError from deep inside the stage."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:  # pragma: no cover - depends on the installation
        raise PerfcastError(f"{needs}: {install}") from exc
