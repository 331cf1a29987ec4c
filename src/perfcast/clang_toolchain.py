"""Debian's clang-16: the compiler every instrumenting stage (build, taint) drives.

Looked up in one place so that a missing compiler or sanitizer runtime always produces the
same message naming the packages to install. Stages cache what they find themselves.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from perfcast.errors import PerfcastError

CLANG_VERSION = 16
"""The clang whose XRay, SanitizerCoverage and DataFlowSanitizer behaviour perfcast was checked
on (DataFlowSanitizer's 8-bit label ABI in particular)."""

INSTALL_HINT = (
    f"install clang-{CLANG_VERSION} and libclang-rt-{CLANG_VERSION}-dev (scripts/setup.sh "
    f"does: apt-get install clang-{CLANG_VERSION} libclang-rt-{CLANG_VERSION}-dev)"
)


def command_output(cmd: list[str]) -> str:
    return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip()


@dataclass(frozen=True)
class Clang:
    """clang and clang++ of :data:`CLANG_VERSION`."""

    cc: str
    cxx: str
    version: str
    resource_dir: Path

    def for_language(self, language: str) -> str:
        return self.cxx if language == "c++" else self.cc

    def require_runtime(self, library: str, what: str) -> Path:
        """The path of ``libclang_rt.<library>-x86_64.a``, or a PerfcastError naming ``what``
        is missing and which package brings it."""
        path = Path(command_output([self.cc, f"-print-file-name=libclang_rt.{library}-x86_64.a"]))
        if not path.is_file():
            raise PerfcastError(
                f"{self.cc} has no {what} runtime (libclang_rt.{library}): {INSTALL_HINT}"
            )
        return path


def find_clang() -> Clang:
    """clang-16 on PATH, or a PerfcastError saying what to install."""
    cc = shutil.which(f"clang-{CLANG_VERSION}")
    cxx = shutil.which(f"clang++-{CLANG_VERSION}")
    if cc is None or cxx is None:
        raise PerfcastError(f"clang-{CLANG_VERSION} was not found on PATH: {INSTALL_HINT}")
    return Clang(
        cc=cc,
        cxx=cxx,
        version=command_output([cc, "--version"]).splitlines()[0],
        resource_dir=Path(command_output([cc, "-print-resource-dir"])),
    )


DEMANGLERS = ("c++filt", "llvm-cxxfilt-16", "llvm-cxxfilt")
"""Demanglers in order of preference: binutils' spells names as libstdc++ (which the
runtime uses) and Score-P do."""


def demangle(symbols: Iterable[str]) -> dict[str, str]:
    """Demangled form of each C++ symbol (``_Z...``), as libstdc++'s demangler (which the
    runtime uses) writes it; symbols that are not mangled, or with no demangler on PATH,
    stay as they are."""
    mangled = sorted({s for s in symbols if s.startswith("_Z") and "\n" not in s})
    tool = next((t for t in map(shutil.which, DEMANGLERS) if t), None)
    if not mangled or tool is None:
        return {}
    done = subprocess.run(
        [tool], input="\n".join(mangled) + "\n", capture_output=True, text=True, check=False
    )
    lines = done.stdout.splitlines()
    if done.returncode != 0 or len(lines) != len(mangled):
        return {}
    return dict(zip(mangled, lines, strict=True))
