"""The compilers ``perfcast build`` drives, and the measurement runtime built with them.

Everything that can be missing is looked up here, once, so the user gets one message naming
the package to install instead of a compiler error half-way through a ``make``. The C
runtime (``runtime/*.c``) is compiled on first use into a cache directory keyed by a hash of
its sources, the compiler and the MPI wrapper, so an upgrade of any of them rebuilds it and
concurrent builds (``make -j``) never see a half-written object.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

from perfcast.clang import Clang, command_output, find_clang
from perfcast.errors import PerfcastError

MPI_HINT = "install Open MPI (apt-get install libopenmpi-dev openmpi-bin; scripts/setup.sh does)"

RUNTIME_DIR = Path(__file__).parent / "runtime"
CORE_SOURCE = "perfcast_rt.c"
MPI_SOURCE = "perfcast_mpi.c"
TRACE_SOURCE = "perfcast_trace.c"
RUNTIME_CFLAGS = ("-O2", "-fPIC", "-Wall", "-Wextra", "-std=gnu11")
"""Flags for the runtime itself: optimised, never instrumented (it must raise no events)."""

CACHE_VARIABLE = "XDG_CACHE_HOME"
MPI_COMPILER_VARIABLES = {"c": ("OMPI_CC", "MPICH_CC"), "c++": ("OMPI_CXX", "MPICH_CXX")}
"""How Open MPI and MPICH wrappers are told which compiler to run underneath."""


@functools.cache
def find_xray_clang() -> Clang:
    """clang-16 with its XRay runtime, or a PerfcastError saying what to install."""
    clang = find_clang()
    clang.require_runtime("xray", "XRay")
    return clang


def find_mpicc() -> str:
    """The MPI C wrapper that compiles the PMPI layer."""
    path = shutil.which("mpicc")
    if path is None:
        raise PerfcastError(f"mpicc was not found on PATH, but this program uses MPI: {MPI_HINT}")
    return path


def mpi_environment(language: str, clang: Clang) -> dict[str, str]:
    """Environment that makes an MPI wrapper run clang instead of its default compiler."""
    compiler = clang.for_language(language)
    return {variable: compiler for variable in MPI_COMPILER_VARIABLES[language]}


def cache_directory() -> Path:
    """``$XDG_CACHE_HOME/perfcast``, or ``~/.cache/perfcast`` as the XDG spec says."""
    base = os.environ.get(CACHE_VARIABLE) or str(Path.home() / ".cache")
    return Path(base) / "perfcast"


def _describe_mpi(mpicc: str) -> str:
    """What the wrapper runs (``--showme`` for Open MPI, ``-show`` for MPICH), for the key."""
    for flag in ("--showme", "-show"):
        try:
            return command_output([mpicc, flag])
        except (subprocess.CalledProcessError, OSError):
            continue
    return mpicc


def _compile(cmd: list[str], env: dict[str, str] | None = None) -> None:
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise PerfcastError(
            f"building the perfcast runtime failed ({' '.join(cmd)}):\n{done.stderr.strip()}"
        )


def cached_object(key_parts: list[str], name: str, build: Callable[[Path], None]) -> Path:
    """``build(target)`` once per distinct key; later calls return the cached file.

    The object is written to a temporary file in the cache and renamed into place, so a
    concurrent build either sees nothing or a complete file.
    """
    digest = hashlib.sha256("\0".join(key_parts).encode()).hexdigest()[:20]
    target = cache_directory() / f"{Path(name).stem}-{digest}{Path(name).suffix}"
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    os.close(handle)
    try:
        build(Path(temporary))
        os.replace(temporary, target)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)
    return target


def runtime_objects(*, mpi: bool, trace: bool = False) -> list[Path]:
    """The runtime's object files: the core, plus the PMPI layer for MPI programs, plus the
    trace writer (``perfcast build --trace``; MPI programs only)."""
    clang = find_xray_clang()
    header = (RUNTIME_DIR / "perfcast_rt.h").read_text()
    core_source = RUNTIME_DIR / CORE_SOURCE
    core_key = [clang.version, *RUNTIME_CFLAGS, header, core_source.read_text()]
    objects = [
        cached_object(
            core_key,
            "perfcast_rt.o",
            lambda target: _compile(
                [clang.cc, *RUNTIME_CFLAGS, "-c", str(core_source), "-o", str(target)]
            ),
        )
    ]
    if not mpi:
        return objects
    mpicc = find_mpicc()
    env = {**os.environ, **mpi_environment("c", clang)}
    mpi_description = _describe_mpi(mpicc)
    for source_name, wanted in ((MPI_SOURCE, True), (TRACE_SOURCE, trace)):
        if not wanted:
            continue
        source = RUNTIME_DIR / source_name
        key = [clang.version, mpi_description, *RUNTIME_CFLAGS, header, source.read_text()]

        def build(target: Path, source: Path = source) -> None:
            _compile([mpicc, *RUNTIME_CFLAGS, "-c", str(source), "-o", str(target)], env)

        objects.append(cached_object(key, source.with_suffix(".o").name, build))
    return objects


def filter_object(names: list[str]) -> Path:
    """An object defining ``perfcast_embedded_filter``: the names to measure as bytes.

    The names come from a file the user was given (a filter, a taint profile), so they are
    never pasted into the generated source as text: a string literal can be escaped (a
    backslash-newline splices lines before the literal ends) and what follows it would be
    compiled into every rank. The source holds only the names' byte values, each name ended
    by a zero byte, and ``perfcast_embedded_filter_size`` the total; the runtime reads them
    as data.
    """
    clang = find_xray_clang()
    data = b"".join(name.encode() + b"\0" for name in names)
    values = ",".join(str(byte) for byte in data) or "0"
    source = (
        "/* generated by perfcast build --filter: the function names' bytes, each ended by 0 */\n"
        f"const unsigned char perfcast_embedded_filter[] = {{{values}}};\n"
        f"const unsigned long perfcast_embedded_filter_size = {len(data)}UL;\n"
    )

    def build(target: Path) -> None:
        with tempfile.TemporaryDirectory(prefix="perfcast-filter-") as scratch:
            path = Path(scratch) / "filter.c"
            path.write_text(source)
            _compile([clang.cc, "-O0", "-fPIC", "-c", str(path), "-o", str(target)])

    return cached_object([clang.version, source], "perfcast_filter.o", build)
