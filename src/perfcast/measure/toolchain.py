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
from dataclasses import dataclass
from pathlib import Path

from perfcast.clang_toolchain import Clang, command_output, find_clang
from perfcast.errors import PerfcastError

MPI_HINT = "install Open MPI (apt-get install libopenmpi-dev openmpi-bin; scripts/setup.sh does)"

RUNTIME_DIR = Path(__file__).parent / "runtime"
CORE_SOURCE = "perfcast_rt.c"
MPI_SOURCE = "perfcast_mpi.c"
TRACE_SOURCE = "perfcast_trace.c"
THRESHOLD_SOURCE = "perfcast_threshold.c"
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


@dataclass(frozen=True)
class Compiler:
    """A compiler as ``--version`` names it: what a build ran, for the user and the store."""

    command: str
    """What runs (``gcc``, ``/usr/bin/clang-16``)."""
    version: str
    """The first line of its ``--version`` (``gcc (Debian 12.2.0-14) 12.2.0``), or the
    command where it does not answer."""

    @property
    def is_clang(self) -> bool:
        return "clang" in self.version.lower()


@functools.cache
def identify(command: str) -> Compiler:
    """The compiler ``command`` runs, named by its ``--version``."""
    try:
        lines = command_output([command, "--version"]).splitlines()
    except (subprocess.CalledProcessError, OSError):
        lines = []
    return Compiler(command, lines[0].strip() if lines else command)


@functools.cache
def user_compiler(command: str, language: str) -> Compiler:
    """The compiler the user's own build runs for ``command``: behind an MPI wrapper, the
    one ``OMPI_CC``/``MPICH_CC`` (``..._CXX`` for C++) names in the user's environment, else
    the wrapper's own (Open MPI's ``--showme:command``, MPICH's and SimGrid's ``-show``);
    any other command is its own compiler.

    Why: ``perfcast build`` replaces it by clang-16 (XRay), and a gcc build can run at a
    very different speed than the clang build perfcast measures (issue 25: 1.61 s against
    1.02 s); what was measured must say which compiler made it.
    """
    if not Path(command).name.startswith(("mpi", "smpi")):
        return identify(command)
    for variable in MPI_COMPILER_VARIABLES[language]:
        if os.environ.get(variable):
            return identify(os.environ[variable])
    for flag in ("--showme:command", "-show"):
        try:
            words = command_output([command, flag]).split()
        except (subprocess.CalledProcessError, OSError):
            continue
        if words:
            return identify(words[0])
    return identify(command)


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


def _compile(cmd: list[str], env: dict[str, str] | None = None, cwd: str | None = None) -> None:
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd)
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
    """An object defining ``perfcast_embedded_filter``: the names to measure as bytes
    (:func:`strings_object`), ``perfcast_embedded_filter_size`` their total."""
    return strings_object("perfcast_embedded_filter", names, "the function names of --filter")


def compilers_object(measured: str, user: str) -> Path:
    """An object defining ``perfcast_build_compilers``: the ``--version`` lines of the
    compiler that built the program and of the one the user's own build runs. Why: a trace
    must say which build it timed (``trace.json``'s ``compilers``), and only the link step
    knows; the trace writer reads it as data."""
    return strings_object("perfcast_build_compilers", [measured, user], "the build's compilers")


def strings_object(symbol: str, texts: list[str], what: str) -> Path:
    """An object defining ``SYMBOL[]``, the bytes of ``texts`` each ended by a zero byte, and
    ``SYMBOL_size``, their total.

    The texts come from files and commands the user gave (a filter, a taint profile, a
    compiler's ``--version``), so they are never pasted into the generated source as text:
    a string literal can be escaped (a backslash-newline splices lines before the literal
    ends) and what follows it would be compiled into every rank. The source holds only byte
    values; the runtime reads them as data.
    """
    clang = find_xray_clang()
    data = b"".join(text.encode(errors="surrogateescape") + b"\0" for text in texts)
    values = ",".join(str(byte) for byte in data) or "0"
    source = (
        f"/* generated by perfcast build: {what}, as bytes, each ended by 0 */\n"
        f"const unsigned char {symbol}[] = {{{values}}};\n"
        f"const unsigned long {symbol}_size = {len(data)}UL;\n"
    )

    def build(target: Path) -> None:
        with tempfile.TemporaryDirectory(prefix="perfcast-strings-") as scratch:
            path = Path(scratch) / "strings.c"
            path.write_text(source)
            _compile([clang.cc, "-O0", "-fPIC", "-c", str(path), "-o", str(target)])

    return cached_object([clang.version, source], f"{symbol}.o", build)


SIMGRID_HINT = "install SimGrid (apt-get install libsimgrid-dev simgrid)"
SMPI_COMPILERS = {"c": "smpicc", "c++": "smpicxx"}
_SMPI_MARKER = "perfcast-smpi-arguments"


def smpi_arguments(wrapper: str, *, compile_only: bool) -> tuple[list[str], list[str]]:
    """What SimGrid's wrapper adds around the user's arguments: (before, after).

    smpicc/smpicxx are shell scripts that run a fixed compiler (``/usr/bin/cc``) with the
    SMPI helper header forced in, SMPI's include directory and, when linking, ``-shared
    -lsimgrid``. perfcast needs clang-16 there, so it asks the wrapper for its command line
    (``-show``) around a marker argument and runs clang-16 with the same additions: the
    installed SimGrid, not perfcast, decides what an SMPI build needs.
    """
    path = shutil.which(wrapper)
    if path is None:
        raise PerfcastError(f"{wrapper} was not found on PATH: {SIMGRID_HINT}")
    shown = command_output([path, "-show", *(["-c"] if compile_only else []), _SMPI_MARKER])
    words = shown.split()
    if _SMPI_MARKER not in words:
        raise PerfcastError(f"cannot read the command line of {path} -show: {shown!r}")
    at = words.index(_SMPI_MARKER)
    before = [word for word in words[1:at] if word != "-c"]
    return before, words[at + 1 :]


def smpi_include_directory() -> Path:
    """SMPI's header directory (``mpi.h`` beside ``smpi.h``; ``/usr/include`` may hold another
    MPI's ``mpi.h``), for compiling the PMPI layer against SimGrid's MPI."""
    before, _after = smpi_arguments("smpicc", compile_only=True)
    for word in before:
        if word.startswith("-I") and (Path(word[2:]) / "smpi.h").is_file():
            return Path(word[2:])
    raise PerfcastError(f"smpicc names no include directory with smpi.h: {SIMGRID_HINT}")


def xray_for_shared_object() -> Path:
    """clang-16's XRay runtime as an archive a shared object can link.

    The runtime starts from ``.preinit_array``, which the linker refuses in a shared object
    ("``.preinit_array`` section is not allowed in DSO"), and clang-16 links no XRay runtime
    into ``-shared`` outputs at all. The copy made here is the same objects with that one
    section removed; perfcast's runtime calls ``__xray_init`` from its constructor instead
    (``PERFCAST_SMPI`` in ``perfcast_rt.c``). Everything else of XRay, the sleds' patching
    included, is unchanged: it finds the instrumentation map of the object it is linked
    into, which under SMPI is each rank's copy of the program.
    """
    clang = find_xray_clang()
    archive = clang.require_runtime("xray", "XRay")
    tools = {name: shutil.which(name) for name in ("ar", "objcopy")}
    missing = [name for name, path in tools.items() if path is None]
    if missing:
        raise PerfcastError(f"{', '.join(missing)} not found on PATH: apt-get install binutils")

    def build(target: Path) -> None:
        with tempfile.TemporaryDirectory(prefix="perfcast-xray-") as scratch:
            _compile([str(tools["ar"]), "x", str(archive)], cwd=scratch)
            members = sorted(p.name for p in Path(scratch).glob("*.o"))
            for member in members:
                _compile(
                    [str(tools["objcopy"]), "--remove-section=.preinit_array", member], cwd=scratch
                )
            # ar cannot add to the empty file cached_object hands out: write, then copy
            _compile([str(tools["ar"]), "rcs", "xray.a", *members], cwd=scratch)
            shutil.copyfile(Path(scratch) / "xray.a", target)

    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    return cached_object([clang.version, digest], "libperfcast_xray_shared.a", build)


def smpi_runtime_objects(*, trace: bool = False, threshold: bool = False) -> list[Path]:
    """The runtime for a program SimGrid SMPI loads: the core and the PMPI layer compiled
    with ``PERFCAST_SMPI`` (simulated clock, the program read from its shared object),
    the PMPI layer against SMPI's ``mpi.h``, and XRay made linkable into a shared object;
    with ``trace`` the trace writer and with ``threshold`` the threshold rule's runtime,
    both compiled the same way (blocks on the thread CPU clock SMPI charges bursts with,
    the rank from the rank's own copy of the MPI layer: docs/smpi-backend.md)."""
    clang = find_xray_clang()
    header = (RUNTIME_DIR / "perfcast_rt.h").read_text()
    include = smpi_include_directory()
    flags = [*RUNTIME_CFLAGS, "-DPERFCAST_SMPI", f"-I{include}"]
    objects = []
    sources = [CORE_SOURCE, MPI_SOURCE]
    sources += [TRACE_SOURCE] if trace else []
    sources += [THRESHOLD_SOURCE] if threshold else []
    for source_name in sources:
        source = RUNTIME_DIR / source_name
        key = [clang.version, *flags, header, source.read_text()]

        def build(target: Path, source: Path = source) -> None:
            _compile([clang.cc, *flags, "-c", str(source), "-o", str(target)])

        objects.append(cached_object(key, f"smpi-{source.with_suffix('.o').name}", build))
    objects.append(xray_for_shared_object())
    return objects
