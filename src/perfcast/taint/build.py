"""Build the instrumented program: runtime objects, ABI lists, and the rewritten compile.

DataFlowSanitizer renames every function it believes instrumented (``f`` -> ``f.dfsan``),
so each symbol the program takes from an uninstrumented library needs an ABI list entry.
clang's default list covers libc and libm; we generate the rest -- libstdc++ and libgcc_s
for C++, MPI from the library database, and any other ``-l`` library of the command -- with
one category per symbol. The perfcast runtime and the generated MPI wrappers are compiled
once per content hash into a cache directory (``$PERFCAST_CACHE`` or ``~/.cache/perfcast``).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from perfcast.errors import PerfcastError
from perfcast.taint.libdb import LibraryDatabase
from perfcast.taint.toolchain import Toolchain, mpi_compile_flags, mpi_library

RUNTIME_SOURCE = Path(__file__).parent / "runtime" / "perfcast_taint_rt.c"
CXX_RUNTIME_SOURCE = Path(__file__).parent / "runtime" / "perfcast_taint_stdlib.cc"
LIBSTDCXX_HEADER = Path(__file__).parent / "runtime" / "perfcast_libstdcxx.h"
"""Included first in C++ compiles: std::string's code goes into the program (see the file)."""
CXX_RUNTIME_LIBRARIES = ("libstdc++.so.6", "libgcc_s.so.1")
MPI_CXX_LIBRARY = "libmpi_cxx.so"
SYSTEM_LIBRARY_DIRS = (Path("/usr/lib/x86_64-linux-gnu"), Path("/lib/x86_64-linux-gnu"))
NOT_LISTED = {"c", "m", "pthread", "dl", "rt", "mpi"}
"""Libraries clang's default ABI list covers, and MPI, which the database covers."""

RUNTIME_ABI = {
    "__perfcast_enter": "discard",
    "__perfcast_leave": "discard",
    "__perfcast_loop_begin": "discard",
    "__perfcast_loop_end": "discard",
    "__perfcast_flow": "custom",
    "__perfcast_argv": "discard",
    "__perfcast_register": "discard",
    "atoi": "custom",
    "atol": "custom",
    "atoll": "custom",
    "atof": "custom",
    "sscanf": "custom",
    "__isoc99_sscanf": "custom",
}
"""ABI category of each runtime entry point; ``custom`` ones receive their arguments' labels."""

_SSTREAM = "_ZNSt7__cxx11{}IcSt11char_traitsIcESaIcEE{}"
_FROM_STRING = "ERKNS_12basic_stringIcS2_S3_EESt13_Ios_Openmode"
_STR_SETTER = "3strERKNS_12basic_stringIcS2_S3_EE"
_ISTREAM_STRING = (
    "IcSt11char_traitsIcESaIcEERSt13basic_istreamIT_T0_ES7_RNSt7__cxx1112basic_stringIS4_S5_T1_EE"
)
CXX_RUNTIME_ABI = {
    symbol: "custom"
    for symbol in (
        # istream >> T for the arithmetic T: out of line for short and int, the rest through
        # the extern-template _M_extract<T> (or the inline operator where not inlined)
        *(f"_ZNSirsER{t}" for t in "sitjlmxybfde"),
        *(f"_ZNSi10_M_extractI{t}EERSiRT_" for t in "tjlmxybfde"),
        f"_ZStrs{_ISTREAM_STRING}",  # istream >> std::string
        f"_ZSt7getline{_ISTREAM_STRING}",
        f"_ZSt7getline{_ISTREAM_STRING}S4_",
        # string streams built from a string (complete and base-object constructors), str(s)
        *(
            _SSTREAM.format(cls, member)
            for cls in ("15basic_stringbuf", "19basic_istringstream", "18basic_stringstream")
            for member in (f"C1{_FROM_STRING}", f"C2{_FROM_STRING}", _STR_SETTER)
        ),
    )
}
"""libstdc++ symbols the C++ part of the runtime wraps (perfcast_taint_stdlib.cc): their
labels would be lost inside the uninstrumented library. Listed once each: the generated list
of libstdc++'s symbols leaves them out (a second category, ``discard``, would win)."""


def cache_dir() -> Path:
    root = os.environ.get("PERFCAST_CACHE") or Path.home() / ".cache" / "perfcast"
    path = Path(root) / "taint"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _digest(*parts: str | bytes) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode() if isinstance(part, str) else part)
        h.update(b"\0")
    return h.hexdigest()[:16]


def _compile(cmd: Sequence[str], what: str) -> None:
    result = subprocess.run(list(cmd), capture_output=True, text=True)
    if result.returncode != 0:
        raise PerfcastError(f"building {what} failed:\n{result.stderr.strip()[-3000:]}")


def _abi_entries(symbols: Iterable[str], category: str) -> list[str]:
    lines = []
    for symbol in symbols:
        lines.append(f"fun:{symbol}=uninstrumented")
        lines.append(f"fun:{symbol}={category}")
    return lines


def exported_functions(library: Path) -> list[str]:
    """Function symbols a shared library defines (``nm -D --defined-only``), unversioned."""
    result = subprocess.run(
        ["nm", "-D", "--defined-only", str(library)], capture_output=True, text=True, check=True
    )
    names = set()
    for line in result.stdout.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in ("T", "W", "i"):
            names.add(parts[2].split("@")[0])
    return sorted(names)


@dataclass(frozen=True)
class RuntimeParts:
    objects: tuple[Path, ...]
    abilists: tuple[Path, ...]


class RuntimeBuilder:
    """Compiles the runtime pieces a build needs, reusing the cache."""

    def __init__(self, toolchain: Toolchain, database: LibraryDatabase):
        self.toolchain = toolchain
        self.database = database
        self.cache = cache_dir()

    def parts(self, *, mpi: bool, cplusplus: bool, libraries: Sequence[Path]) -> RuntimeParts:
        objects = [self._runtime_object()]
        abilists = [self._runtime_abilist()]
        if cplusplus:
            found = [
                next((d / name for d in SYSTEM_LIBRARY_DIRS if (d / name).exists()), None)
                for name in CXX_RUNTIME_LIBRARIES
            ]
            objects.append(self._cxx_runtime_object())
            wrapped = _abi_entries(CXX_RUNTIME_ABI, "custom")
            abilists.append(self._write("stdlib", "\n".join(wrapped)))
            abilists.append(
                self._library_abilist([p for p in found if p is not None], set(CXX_RUNTIME_ABI))
            )
        if mpi:
            objects.append(self._mpi_wrappers())
            abilists.append(self._mpi_abilist())
            if cplusplus:
                libraries = [*libraries, *self._mpi_cxx_bindings()]
        if libraries:
            abilists.append(self._library_abilist(libraries))
        return RuntimeParts(tuple(objects), tuple(abilists))

    def _runtime_object(self) -> Path:
        source = RUNTIME_SOURCE.read_bytes()
        target = self.cache / f"rt-{_digest(source, self.toolchain.clang)}.o"
        if not target.exists():
            tmp = target.with_suffix(f".{os.getpid()}.o")
            _compile(
                [self.toolchain.clang, "-c", "-O2", "-fPIC", str(RUNTIME_SOURCE), "-o", str(tmp)],
                "the perfcast taint runtime",
            )
            tmp.replace(target)
        return target

    def _cxx_runtime_object(self) -> Path:
        source = CXX_RUNTIME_SOURCE.read_bytes()
        target = self.cache / f"rt-stdlib-{_digest(source, self.toolchain.clangxx)}.o"
        if not target.exists():
            tmp = target.with_suffix(f".{os.getpid()}.o")
            source_file = str(CXX_RUNTIME_SOURCE)
            _compile(
                [self.toolchain.clangxx, "-c", "-O2", "-fPIC", source_file, "-o", str(tmp)],
                "the perfcast taint runtime's libstdc++ wrappers",
            )
            tmp.replace(target)
        return target

    def _runtime_abilist(self) -> Path:
        lines = []
        for name, category in RUNTIME_ABI.items():
            lines += _abi_entries([name], category)
        return self._write("runtime", "\n".join(lines))

    def _mpi_wrappers(self) -> Path:
        source = self.database.wrapper_source()
        flags = mpi_compile_flags()
        if not flags:
            raise PerfcastError("the program uses MPI but mpicc was not found: install Open MPI")
        digest = _digest(source, self.toolchain.clang, *flags)
        target = self.cache / f"mpi-wrappers-{digest}.o"
        if not target.exists():
            c_file = self.cache / f"mpi-wrappers-{digest}.c"
            c_file.write_text(source)
            tmp = target.with_suffix(f".{os.getpid()}.o")
            _compile(
                [self.toolchain.clang, "-c", "-O2", "-fPIC", *flags, str(c_file), "-o", str(tmp)],
                "the MPI taint wrappers",
            )
            tmp.replace(target)
        return target

    def _mpi_abilist(self) -> Path:
        library = mpi_library()
        if library is None:
            raise PerfcastError("the program uses MPI but libmpi.so was not found")
        wrapped = set(self.database.routines)
        lines = []
        for symbol in exported_functions(library):
            # The library's own helpers (ompi_*) are called from the inline C++ bindings.
            routine = symbol.startswith(self.database.symbol_prefixes)
            category = "custom" if routine and symbol in wrapped else "discard"
            lines += _abi_entries([symbol], category)
        return self._write("mpi", "\n".join(lines))

    @staticmethod
    def _mpi_cxx_bindings() -> list[Path]:
        """Open MPI's C++ bindings (``MPI::Comm``), which ``mpi.h`` declares in C++ unless
        the program defines ``OMPI_SKIP_MPICXX``; their inline parts call into it."""
        library = mpi_library()
        bindings = None if library is None else library.parent / MPI_CXX_LIBRARY
        return [bindings] if bindings is not None and bindings.exists() else []

    def _library_abilist(self, libraries: Sequence[Path], wrapped: Collection[str] = ()) -> Path:
        lines = []
        for library in libraries:
            symbols = [s for s in exported_functions(library) if s not in wrapped]
            lines += _abi_entries(symbols, "discard")
        return self._write("libs", "\n".join(lines))

    def _write(self, kind: str, text: str) -> Path:
        target = self.cache / f"abilist-{kind}-{_digest(text)}.txt"
        if not target.exists():
            tmp = target.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(text + "\n")
            tmp.replace(target)
        return target


def find_library(name: str, search: Sequence[Path]) -> Path | None:
    """The shared object ``-l<name>`` resolves to, or None (static or missing)."""
    if name in NOT_LISTED:
        return None
    for directory in [*search, *SYSTEM_LIBRARY_DIRS]:
        candidate = directory / f"lib{name}.so"
        if candidate.exists():
            return candidate.resolve()
    return None
