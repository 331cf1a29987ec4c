"""``perfcast build``: prefix a compile command to get a measured program.

    perfcast build [--filter FILE] [--counters] -- mpicxx -O2 app.cpp -o app
    make CC="perfcast build -- mpicc"

The command runs with clang-16 underneath (``OMPI_CC``/``OMPI_CXX`` and ``MPICH_CC``/
``MPICH_CXX`` for MPI wrappers; ``gcc``/``cc``/``clang`` are replaced outright). Compile
steps (``-c``) get the instrumentation flags; link steps also get the runtime's objects, so
multi-file projects work through their own Makefiles. The runtime (``runtime/``) and the
output format are described in ``README.md`` beside this module.

Why clang XRay. Both clang mechanisms that keep hooks out of inlined getters work here;
they were measured on ``examples/getters`` (LULESH-shaped C++) and ``examples/stencil``,
``-O2``, one rank, CPU time per iteration as a ratio to the uninstrumented clang build
(``benchmarks/instrumentation_overhead.py``; the current table is
``benchmarks/results/instrumentation_overhead.txt``). On the getters: empty
after-inlining hooks about 1.06x, XRay with every function measured about 3.2x, XRay
filtered to the kernels about 1.0x, basic-block counters about 3.3x; the opt-in CPU clock
(``PERFCAST_CPU_TIME=1``, a system call per event) makes full measurement about 19x but
costs nothing measurable when filtered to the kernels.

* ``-finstrument-functions-after-inlining`` calls ``__cyg_profile_func_enter/exit`` from
  every function that survives inlining, so a filter can only act inside the hook: the
  calls stay, and the row above is the floor of that approach before any measuring.
* XRay (``-fxray-instrument -fxray-instruction-threshold=1``) gives every function a sled
  that is a short jump while unpatched; the runtime patches only the filtered functions at
  start-up, so unmeasured functions cost nothing beyond the sled, and the filter can be
  changed at run time (``PERFCAST_FILTER``) without rebuilding. It needs
  ``-fno-optimize-sibling-calls`` (else tail calls appear under the wrong parent); that is
  part of every XRay ratio above.
* XRay orders the events right for the basic-block counters: its entry sled runs before the
  function's first block, whereas the ``-finstrument-functions`` hook is called inside the
  entry block, whose SanitizerCoverage callback has then already counted for the caller.

Hence XRay. Full measurement costs about 3x on the getter code (one event pair per element
and kernel call); filtered to the kernels, it is within a few per cent of native.

The counters are requested with the compiler front end's own options
(``-Xclang -fsanitize-coverage-type=2 ...``, what ``-fsanitize-coverage=bb,no-prune,
trace-pc-guard,pc-table`` expands to) because the driver option, when it reaches a link,
pulls in a sanitizer runtime whose weak default callbacks would replace perfcast's and
whose copy of sanitizer_common collides with XRay's.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from perfcast.clang import CLANG_VERSION
from perfcast.errors import InputError, PerfcastError
from perfcast.measure import toolchain

XRAY_COMPILE_FLAGS = (
    "-fxray-instrument",
    "-fxray-instruction-threshold=1",  # every function, however small, gets a sled
    "-fno-optimize-sibling-calls",  # a tail call would otherwise be charged to the caller
)
COUNTER_COMPILE_FLAGS = tuple(
    flag
    for option in (
        "-fsanitize-coverage-type=2",  # bb
        "-fsanitize-coverage-no-prune",
        "-fsanitize-coverage-trace-pc-guard",
        "-fsanitize-coverage-pc-table",
    )
    for flag in ("-Xclang", option)
)
XRAY_LINK_FLAGS = ("-fxray-instrument", "-fxray-modes=none")
"""Link XRay's patching runtime without its logging modes: perfcast brings its own handler."""

SOURCE_SUFFIXES = frozenset({".c", ".cc", ".cp", ".cpp", ".cxx", ".c++", ".C", ".i", ".ii"})
LINK_INPUT_SUFFIXES = frozenset({".o", ".a", ".so", ".lo"})
OPTIONS_WITH_VALUE = frozenset(
    {
        "-o", "-I", "-L", "-D", "-U", "-x", "-l", "-u", "-T", "-z", "-e", "-MF", "-MT", "-MQ",
        "-include", "-imacros", "-isystem", "-idirafter", "-iquote", "-isysroot", "-iprefix",
        "-Xlinker", "-Xclang", "-Xpreprocessor", "-Xassembler", "-target", "--param", "-arch",
    }
)  # fmt: skip
"""Options whose value is the next argument, so that argument is not an input file."""

_COMPILER = re.compile(
    r"^(mpicc|mpicxx|mpic\+\+|mpiCC|clang\+\+|clang|gcc|g\+\+|cc|c\+\+)(-[\d.]+)?$"
)
_LANGUAGE = {
    "mpicc": "c", "clang": "c", "gcc": "c", "cc": "c",
    "mpicxx": "c++", "mpic++": "c++", "mpiCC": "c++", "clang++": "c++", "g++": "c++", "c++": "c++",
}  # fmt: skip
WRAPPABLE = "mpicc, mpicxx, mpic++, mpiCC, clang, clang++, gcc, g++, cc, c++"


class Step(Enum):
    """What one compiler invocation does, which decides what perfcast adds to it."""

    PASS_THROUGH = "pass-through"  # preprocess, --version, --showme: nothing to add
    COMPILE = "compile"  # -c / -S: instrumentation flags
    LINK = "link"  # (compile and) link an executable: flags plus the runtime


@dataclass(frozen=True)
class BuildOptions:
    counters: bool = False
    """Count executed basic blocks per call path (SanitizerCoverage)."""
    filter_file: Path | None = None
    """Measure only the functions listed (one per line); main is always measured."""


@dataclass(frozen=True)
class Invocation:
    """A user's compile command as perfcast understands it."""

    argv: tuple[str, ...]
    language: str
    mpi: bool
    step: Step
    sources: tuple[str, ...] = ()


@dataclass(frozen=True)
class WrappedCommand:
    """The command perfcast runs instead, with the environment it adds."""

    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)

    def __str__(self) -> str:
        prefix = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(self.env.items()))
        return (prefix + " " if prefix else "") + shlex.join(self.argv)


def parse_command(command: Sequence[str]) -> Invocation:
    """Classify a compile command; PerfcastError for one perfcast cannot instrument."""
    if not command:
        raise PerfcastError(
            "no compile command given: write it after '--', e.g. "
            "perfcast build -- mpicc -O2 app.c -o app"
        )
    compiler = Path(command[0]).name
    match = _COMPILER.match(compiler)
    if match is None:
        raise PerfcastError(
            f"cannot wrap {command[0]!r}: perfcast build instruments C and C++ compiles with "
            f"clang-{CLANG_VERSION} and knows these compiler commands: {WRAPPABLE}. "
            "Put one of them after '--' (for make: make CC=\"perfcast build -- mpicc\")"
        )
    name = match.group(1)
    args = list(command[1:])
    flags, inputs = _split_inputs(args)
    sources = tuple(i for i in inputs if Path(i).suffix in SOURCE_SUFFIXES)
    links_mpi = any(flag in ("-lmpi", "-lmpi_cxx") for flag in flags)
    if "-E" in flags or "-M" in flags or "-MM" in flags:
        step = Step.PASS_THROUGH
    elif "-c" in flags or "-S" in flags:
        step = Step.COMPILE if sources else Step.PASS_THROUGH
    elif inputs or any(flag.startswith("-l") for flag in flags):
        step = Step.LINK
    else:
        step = Step.PASS_THROUGH
    if step is Step.LINK and "-shared" in flags:
        raise PerfcastError(
            f"cannot instrument the shared-library link {shlex.join(command)!r}: clang-"
            f"{CLANG_VERSION}'s XRay instruments executables only. Build the "
            "library's objects with perfcast build and link them into the executable "
            "(or as a static library)"
        )
    return Invocation(
        argv=tuple(command),
        language=_LANGUAGE[name],
        mpi=name.startswith("mpi") or links_mpi,
        step=step,
        sources=sources,
    )


def _split_inputs(args: Sequence[str]) -> tuple[list[str], list[str]]:
    """(flags, input files) of a compiler argument list."""
    flags: list[str] = []
    inputs: list[str] = []
    expect_value = False
    for arg in args:
        if expect_value:
            expect_value = False
        elif arg in OPTIONS_WITH_VALUE:
            expect_value = True
        elif arg.startswith("-"):
            flags.append(arg)
        elif Path(arg).suffix in SOURCE_SUFFIXES | LINK_INPUT_SUFFIXES or ".so." in arg:
            inputs.append(arg)
    return flags, inputs


def read_filter(path: Path) -> list[str]:
    """Function names from a filter file: one per line, ``#`` comments and blanks ignored.

    A name may be the mangled symbol, the demangled signature (``Domain::x(int)``) or the
    demangled name without its parameter list (``Domain::x``). A taint profile (JSON, from
    ``perfcast taint``) stands for its instrumentation filter: the functions whose cost can
    depend on a parameter (:mod:`perfcast.taint.filter`).
    """
    try:
        text = path.read_text()
    except OSError as exc:
        raise InputError(f"cannot read the filter file: {exc.strerror}", path=path) from None
    if text.lstrip().startswith("{"):
        # Imported here: only a link step with a profile pays for loading the taint stage.
        from perfcast.taint.filter import instrumented_functions
        from perfcast.taint.profile import read_profile

        return instrumented_functions(read_profile(path))
    names = []
    for number, raw in enumerate(text.splitlines(), start=1):
        name = raw.strip()
        if not name or name.startswith("#"):
            continue
        if any(ord(c) < 32 for c in name):
            raise InputError("a function name contains a control character", path=path, line=number)
        names.append(name)
    return names


def wrap(command: Sequence[str], options: BuildOptions = BuildOptions()) -> WrappedCommand:
    """The instrumented form of ``command`` (building the runtime if this is a link)."""
    invocation = parse_command(command)
    clang = toolchain.find_clang()
    argv = list(invocation.argv)
    env: dict[str, str] = {}
    if Path(invocation.argv[0]).name.startswith("mpi"):
        if shutil.which(invocation.argv[0]) is None:
            raise PerfcastError(f"{invocation.argv[0]} was not found on PATH: {toolchain.MPI_HINT}")
        env = toolchain.mpi_environment(invocation.language, clang)
    else:
        argv[0] = clang.for_language(invocation.language)
    if invocation.step is Step.PASS_THROUGH:
        return WrappedCommand(argv, env)
    if invocation.sources:
        argv += XRAY_COMPILE_FLAGS
        if options.counters:
            argv += COUNTER_COMPILE_FLAGS
    if invocation.step is Step.LINK:
        argv += XRAY_LINK_FLAGS
        argv += [str(path) for path in toolchain.runtime_objects(mpi=invocation.mpi)]
        if options.filter_file is not None:
            argv.append(str(toolchain.filter_object(read_filter(options.filter_file))))
    return WrappedCommand(argv, env)


def run(
    command: Sequence[str], options: BuildOptions = BuildOptions(), *, verbose: bool = False
) -> int:
    """Run the instrumented command; its exit status (the compiler reports its own errors)."""
    wrapped = wrap(command, options)
    if verbose:
        print(f"perfcast build: {wrapped}", file=sys.stderr)
    try:
        done = subprocess.run(wrapped.argv, env={**os.environ, **wrapped.env})
    except OSError as exc:
        raise PerfcastError(f"cannot run {wrapped.argv[0]}: {exc.strerror}") from None
    return done.returncode
