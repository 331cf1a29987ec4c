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

from perfcast.errors import PerfcastError

CLANG_VERSION = 16
"""DataFlowSanitizer's label ABI (8-bit labels) and the Debian runtime package match this."""

INSTALL_HINT = (
    f"install clang-{CLANG_VERSION} and libclang-rt-{CLANG_VERSION}-dev "
    "(scripts/setup.sh does), or put a clang with DataFlowSanitizer on PATH as "
    f"clang-{CLANG_VERSION}"
)


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


def _run(cmd: list[str]) -> str:
    return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip()


@functools.cache
def find_toolchain() -> Toolchain:
    """Locate clang and the DataFlowSanitizer runtime; PerfcastError if either is missing."""
    clang = shutil.which(f"clang-{CLANG_VERSION}")
    clangxx = shutil.which(f"clang++-{CLANG_VERSION}")
    if clang is None or clangxx is None:
        raise PerfcastError(f"clang-{CLANG_VERSION} was not found on PATH: {INSTALL_HINT}")
    resource = Path(_run([clang, "-print-resource-dir"]))
    runtime = _run([clang, "-print-file-name=libclang_rt.dfsan-x86_64.a"])
    if not Path(runtime).is_file():
        raise PerfcastError(
            f"{clang} has no DataFlowSanitizer runtime (libclang_rt.dfsan): {INSTALL_HINT}"
        )
    return Toolchain(clang=clang, clangxx=clangxx, resource_dir=resource)


@functools.cache
def mpi_compile_flags(wrapper: str = "mpicc") -> tuple[str, ...]:
    """Include flags of the MPI compiler wrapper (Open MPI's ``--showme:compile``)."""
    path = shutil.which(wrapper)
    if path is None:
        return ()
    try:
        return tuple(_run([path, "--showme:compile"]).split())
    except subprocess.CalledProcessError:
        return ()


@functools.cache
def mpi_library() -> Path | None:
    """The shared MPI library the wrappers link (``libmpi.so``), if MPI is installed."""
    path = shutil.which("mpicc")
    if path is None:
        return None
    try:
        flags = _run([path, "--showme:link"]).split()
    except subprocess.CalledProcessError:
        return None
    dirs = [Path(f[2:]) for f in flags if f.startswith("-L")]
    for directory in dirs:
        candidate = directory / "libmpi.so"
        if candidate.exists():
            return candidate.resolve()
    return None
