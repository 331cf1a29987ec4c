"""Static performance models from C/C++ source and the compiled binary (``perfcast static``).

Pipeline: :mod:`source` (libclang: loops, branches, calls, annotations) ->
:mod:`domains` (isl/barvinok iteration domains and counts) -> :mod:`binary` (ELF, DWARF
lines and inlined frames, capstone basic blocks) -> :mod:`loops` (natural loops, source
iterations per trip) -> :mod:`mapping` + :mod:`flow` (block execution counts) ->
:mod:`model` (counts per category and function, with :mod:`arch`) -> :mod:`codegen`
(Python model and JSON summary) and :mod:`prior` (modeler priors).

isl with barvinok is GPL; it is imported lazily, only when a model is built, and never by
the rest of perfcast. Generated models evaluate without it.
"""

from __future__ import annotations

from pathlib import Path

from perfcast.static.arch import DEFAULT_ARCHITECTURE, Architecture, load_architecture
from perfcast.static.prior import prior_from_formula, prior_from_summary


def analyze(
    source: str | Path,
    binary: str | Path,
    architecture: str | Path | Architecture = DEFAULT_ARCHITECTURE,
    flags: tuple[str, ...] = (),
    only: str | None = None,
):
    """Build the static model of ``source`` compiled into ``binary`` (with ``-g``); with
    ``only``, of that function and its callees alone."""
    from perfcast.static.model import build_model

    arch = (
        architecture if isinstance(architecture, Architecture) else load_architecture(architecture)
    )
    return build_model(source, binary, arch, tuple(flags), only)


__all__ = [
    "DEFAULT_ARCHITECTURE",
    "Architecture",
    "analyze",
    "load_architecture",
    "prior_from_formula",
    "prior_from_summary",
]
