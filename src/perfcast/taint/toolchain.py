"""The compilers and libraries the taint analysis drives, found once and checked up front.

Everything that can be missing on a machine is looked up here so that the user gets one
clear message naming the package to install, instead of a compiler error half-way through.
"""

from __future__ import annotations

import functools
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from perfcast.clang_toolchain import command_output, find_clang


@dataclass(frozen=True)
class Toolchain:
    clang: str
    clangxx: str
    resource_dir: Path

    @property
    def builtin_includes(self) -> Path:
        """Clang's own headers (stddef.h, sanitizer/dfsan_interface.h); the pip libclang
        wheel ships none, so every parse gets this directory."""
        return self.resource_dir / "include"

    @property
    def default_abilist(self) -> Path:
        return self.resource_dir / "share" / "dfsan_abilist.txt"


@functools.cache
def find_toolchain() -> Toolchain:
    """Locate clang and the DataFlowSanitizer runtime; PerfcastError if either is missing."""
    clang = find_clang()
    clang.require_runtime("dfsan", "DataFlowSanitizer")
    return Toolchain(clang=clang.cc, clangxx=clang.cxx, resource_dir=clang.resource_dir)


@functools.cache
def mpi_compile_flags(wrapper: str = "mpicc") -> tuple[str, ...]:
    """Include flags of the MPI compiler wrapper (Open MPI's ``--showme:compile``)."""
    path = shutil.which(wrapper)
    if path is None:
        return ()
    try:
        return tuple(command_output([path, "--showme:compile"]).split())
    except subprocess.CalledProcessError:
        return ()


@functools.cache
def mpi_library() -> Path | None:
    """The shared MPI library the wrappers link (``libmpi.so``), if MPI is installed."""
    path = shutil.which("mpicc")
    if path is None:
        return None
    try:
        flags = command_output([path, "--showme:link"]).split()
    except subprocess.CalledProcessError:
        return None
    dirs = [Path(f[2:]) for f in flags if f.startswith("-L")]
    for directory in dirs:
        candidate = directory / "libmpi.so"
        if candidate.exists():
            return candidate.resolve()
    return None
