"""``perfcast build``: prefix a compile command to get a measured program.

    perfcast build [--filter FILE [--keep-inlined]] [--counters] [--trace] -- mpicxx app.cpp -o app
    make CC="perfcast build -- mpicc"
    perfcast build --smpi -- smpicc app.c -o app   # for smpirun (SimGrid SMPI)

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

SimGrid SMPI (``--smpi``, ``docs/smpi-backend.md``). smpicc links the program as a shared
object, and clang-16 links no XRay runtime into one (its runtime starts from
``.preinit_array``, which a shared object cannot have). perfcast links a copy of that
runtime without the section and starts it from its own constructor; times are read on each
rank's simulated clock. Measured: XRay with everything measured 0.72 s against 0.05 s
uninstrumented for 8 M events at ``smpirun -np 4``, filtered 0.06 s; about 20 ns per event
pair more than in a real run. ``--trace`` (and ``--threshold``) link their runtime compiled
the same way: a virtual run's trace, its blocks timed as SMPI charges bursts (measured
against SMPI's own ``-trace-ti`` in the doc, section 5).

Inlined functions. A function inlined at every call site has no XRay sled, so a filter
entry naming it measures nothing (LULESH at ``-O2``: 27 of the 39 functions of its taint
filter). The filtered link says so once; ``--keep-inlined`` keeps exactly the filter's
functions out of line (:func:`keep_functions_flags`). Measured on LULESH ``-s 20 -i 150``,
one rank, CPU time, best of 7 (``perfcast/measure/README.md``): native 0.98 s, kept 0.97 s
with all 39 functions measured, whereas ``-fno-inline`` or ``-fno-inline-functions`` on
the whole program cost 2.9x-3.0x because every getter becomes a call.
``#pragma clang attribute`` can only mark every function of a file, ``-finline-hint-functions``
still inlines ``static inline`` kernels, and clang-16 has no per-function inlining option.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from perfcast.clang_toolchain import CLANG_VERSION
from perfcast.errors import InputError, PerfcastError
from perfcast.inputs import read_text
from perfcast.measure import elf_symbols, toolchain
from perfcast.measure.store import BuildRecord
from perfcast.modeling.provenance import Compilers

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
    r"^(smpicc|smpicxx|mpicc|mpicxx|mpic\+\+|mpiCC|clang\+\+|clang|gcc|g\+\+|cc|c\+\+)(-[\d.]+)?$"
)
_LANGUAGE = {
    "mpicc": "c", "clang": "c", "gcc": "c", "cc": "c",
    "smpicc": "c", "smpicxx": "c++",
    "mpicxx": "c++", "mpic++": "c++", "mpiCC": "c++", "clang++": "c++", "g++": "c++", "c++": "c++",
}  # fmt: skip
WRAPPABLE = (
    "mpicc, mpicxx, mpic++, mpiCC, clang, clang++, gcc, g++, cc, c++ (with --smpi: smpicc, smpicxx)"
)


class Step(Enum):
    """What one compiler invocation does, which decides what perfcast adds to it."""

    PASS_THROUGH = "pass-through"  # preprocess, --version, --showme: nothing to add
    COMPILE = "compile"  # -c / -S: instrumentation flags
    LINK = "link"  # (compile and) link an executable: flags plus the runtime


MAX_TRUSTED = 10_000
"""The most loops ``--threshold-trust`` may name: more than any program's parameter-dependent
loops, few enough that a runaway script's list is refused before any file is parsed."""


@dataclass(frozen=True)
class BuildOptions:
    counters: bool = False
    """Count executed basic blocks per call path (SanitizerCoverage)."""
    filter_file: Path | None = None
    """Measure only the functions listed (one per line); main is always measured."""
    keep_inlined: bool = False
    """Compile the filter's functions as functions (noinline), so none is inlined away."""
    trace: bool = False
    """Also link the trace writer: a run writes SimGrid time-independent traces (README.md)."""
    threshold_profile: Path | None = None
    """A taint profile whose parameter-dependent loops run under the threshold iteration
    rule (:mod:`perfcast.measure.threshold`); only with ``trace``."""
    threshold_trusted: tuple[str, ...] = ()
    """Loops (``FILE:LINE``) the user vouches for: the rule takes them although their
    results reach later control flow (:class:`perfcast.measure.threshold.LoopPlace`)."""
    smpi: bool = False
    """Build for SimGrid SMPI (``smpicc``/``smpicxx``): a shared object ``smpirun`` loads,
    timed on the simulated clock (docs/smpi-backend.md)."""
    user_compiler: bool = False
    """Keep the compiler the command runs (gcc behind ``mpicc``) instead of clang-16; only
    with ``trace``. Why: a replay needs only each rank's MPI calls and the compute between
    them, which the PMPI layer times in any binary, so the trace can be of the program the
    user runs (issue 25: a gcc build ran 1.61 s where the clang build ran 1.02 s). What is
    lost is XRay's function entries: blocks are named by the MPI calls around them."""


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
    program: Path | None = None
    """The program a link writes: checked afterwards for the filter's functions, named in
    the build record (:func:`note_compiler`)."""
    filter_names: tuple[str, ...] = ()
    user_compiler: toolchain.Compiler | None = None
    """A link's: the compiler the user's command runs without perfcast (:func:`note_compiler`)."""
    measured_compiler: str = ""
    """A link's: the ``--version`` line of the compiler that built the program perfcast
    measures (clang-16, or the user's own with :attr:`BuildOptions.user_compiler`)."""

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
        mpi=name.startswith(("mpi", "smpi")) or links_mpi,
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


_NAME_PUNCTUATION = frozenset(" _:.$@<>()[]{},*&~'#-+=!%^|/?")
"""Characters besides letters and digits that a C symbol, a mangled C++ symbol (with suffixes
such as ``.cold`` or ``.llvm.123``) or a demangled C++ name (``ns::f<int>(int const*) const``,
``operator()``, ``{lambda(int)#1}``) can contain. Backslashes, semicolons, quotes and control
characters are none of these, and they are what text posing as a name needs to act as code."""


def function_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be a function of a compiled program, or None if it can be."""
    if not name.strip():
        return "the name is empty"
    # the one demangled name with quotes: a user-defined literal operator
    for character in name.replace('operator""', "operator"):
        if not (character.isalnum() or character in _NAME_PUNCTUATION):
            return f"{character!r} occurs in no C or C++ function name"
    return None


def _check_name(name: str, path: Path, line: int | None) -> None:
    """InputError naming ``path`` and ``line`` if ``name`` cannot be a function's name."""
    problem = function_name_problem(name)
    if problem is not None:
        raise InputError(
            f"function name {name!r} is not a C or C++ function: {problem}. A filter lists "
            "symbols (solve, _Z5solvev) or demangled names (ns::solve(int), ns::solve), one "
            "per line",
            path=path,
            line=line,
        )


def _line_in_json(name: str, text: str) -> int | None:
    """The line of a taint profile's JSON ``text`` that holds the string ``name``."""
    for spelling in (json.dumps(name), json.dumps(name, ensure_ascii=False)):
        found = text.find(spelling)
        if found >= 0:
            return text.count("\n", 0, found) + 1
    return None


def read_filter(path: Path) -> list[str]:
    """Function names from a filter file: one per line, ``#`` comments and blanks ignored.

    A name may be the mangled symbol, the demangled signature (``Domain::x(int)``) or the
    demangled name without its parameter list (``Domain::x``). A taint profile (JSON, from
    ``perfcast taint``) stands for its instrumentation filter: the functions whose cost can
    depend on a parameter (:mod:`perfcast.taint.filter`). Every name is checked to be one a
    function can have (:func:`function_name_problem`): they come from a file, and a
    malformed one is reported with its line rather than measured as nothing.
    """
    text = read_text(path, "filter file", "save the function names, one a line, as UTF-8 text")
    if text.lstrip().startswith("{"):
        # Imported here: only a link step with a profile pays for loading the taint stage.
        from perfcast.taint.filter import instrumented_functions
        from perfcast.taint.profile_model import read_profile

        try:
            names = instrumented_functions(read_profile(path))
        except InputError as exc:
            raise InputError(exc.reason, path=path, line=exc.line) from None
        for name in names:
            _check_name(name, path, _line_in_json(name, text))
        return names
    names = []
    for number, raw in enumerate(text.splitlines(), start=1):
        name = raw.strip()
        if not name or name.startswith("#"):
            continue
        _check_name(name, path, number)
        names.append(name)
    return names


def wrap(command: Sequence[str], options: BuildOptions = BuildOptions()) -> WrappedCommand:
    """The instrumented form of ``command`` (building the runtime if this is a link)."""
    invocation = parse_command(command)
    if options.user_compiler:
        return _with_trace_runtime(invocation, options)
    clang = toolchain.find_xray_clang()
    argv = list(invocation.argv)
    env: dict[str, str] = {}
    smpi_after: list[str] = []
    if _is_smpi_wrapper(invocation) != options.smpi:
        raise PerfcastError(_smpi_mismatch(invocation, options))
    if options.smpi:
        before, smpi_after = toolchain.smpi_arguments(
            invocation.argv[0], compile_only=invocation.step is not Step.LINK
        )
        argv = [clang.for_language(invocation.language), *before, *argv[1:]]
    elif Path(invocation.argv[0]).name.startswith("mpi"):
        _require_on_path(invocation.argv[0])
        env = toolchain.mpi_environment(invocation.language, clang)
    else:
        argv[0] = clang.for_language(invocation.language)
    if invocation.step is Step.PASS_THROUGH:
        return WrappedCommand(argv + smpi_after, env)
    keeps = options.keep_inlined and bool(invocation.sources)
    names = None
    if options.filter_file is not None and (keeps or invocation.step is Step.LINK):
        names = read_filter(options.filter_file)
    if options.threshold_profile is not None and not options.trace:
        raise PerfcastError(
            "--threshold shortens loops of a traced run and credits their time to the trace: "
            "give --trace too"
        )
    if options.threshold_trusted and options.threshold_profile is None:
        raise PerfcastError(
            "--threshold-trust names loops for the threshold rule: give --threshold PROFILE too"
        )
    if invocation.sources and options.threshold_profile is not None:
        argv = _under_threshold_rule(
            argv, invocation.sources, options.threshold_profile, options.threshold_trusted
        )
    if invocation.sources:
        if keeps and names is not None:
            argv += keep_functions_flags(argv, env, invocation.sources, names)
        argv += XRAY_COMPILE_FLAGS
        if options.counters:
            argv += COUNTER_COMPILE_FLAGS
    if invocation.step is not Step.LINK:
        return WrappedCommand(argv + smpi_after, env)
    if options.trace:
        _require_mpi_link(invocation)
    if options.smpi:
        # -shared: clang links no XRay runtime; the runtime's objects include one that can
        # be linked into a shared object (toolchain.xray_for_shared_object), which is C++
        objects = toolchain.smpi_runtime_objects(
            trace=options.trace, threshold=options.threshold_profile is not None
        )
        after = ["-lstdc++", *smpi_after]
    else:
        argv += XRAY_LINK_FLAGS
        objects = toolchain.runtime_objects(mpi=invocation.mpi, trace=options.trace)
        if options.threshold_profile is not None:
            from perfcast.measure.threshold import threshold_object

            objects.append(threshold_object())
        after = []
    if names is not None:
        objects.append(toolchain.filter_object(names))
    user = toolchain.user_compiler(invocation.argv[0], invocation.language)
    if options.trace:
        objects.append(toolchain.compilers_object(clang.version, user.version))
    argv += [str(path) for path in objects] + after
    return WrappedCommand(
        argv,
        env,
        program=output_of(invocation.argv),
        filter_names=tuple(names or ()),
        user_compiler=user,
        measured_compiler=clang.version,
    )


_CLANG_ONLY = (
    ("filter_file", "--filter", "measures functions through clang's XRay"),
    ("keep_inlined", "--keep-inlined", "marks functions for clang's XRay"),
    ("counters", "--counters", "counts basic blocks with clang's SanitizerCoverage"),
    ("threshold_profile", "--threshold", "rewrites loops for the clang build"),
    ("smpi", "--smpi", "builds with smpicc and clang"),
)


def _with_trace_runtime(invocation: Invocation, options: BuildOptions) -> WrappedCommand:
    """The user's command as it is, its link step given the trace runtime's objects: the
    traced program is the binary the user's compiler makes (:attr:`BuildOptions.user_compiler`).

    The objects are C compiled once by clang-16 against the same MPI; they need no clang
    runtime, so any compiler's link takes them. Without XRay's sleds the runtime sees no
    function entries and times the compute between MPI calls only, which is all a replay
    reads.
    """
    if not options.trace:
        raise PerfcastError(
            "--user-compiler builds the traced program with your own compiler: give --trace "
            "(function call paths need clang-16's XRay, which the other modes use)"
        )
    for attribute, flag, why in _CLANG_ONLY:
        if getattr(options, attribute):
            raise PerfcastError(
                f"{flag} cannot go with --user-compiler: it {why}, and --user-compiler keeps "
                "your compiler. Trace with --trace --user-compiler, measure in a second build"
            )
    argv = list(invocation.argv)
    if Path(argv[0]).name.startswith("mpi"):
        _require_on_path(argv[0])
    if invocation.step is not Step.LINK:
        return WrappedCommand(argv)
    _require_mpi_link(invocation)
    user = toolchain.user_compiler(invocation.argv[0], invocation.language)
    objects = toolchain.runtime_objects(mpi=True, trace=True)
    objects.append(toolchain.compilers_object(user.version, user.version))
    return WrappedCommand(
        argv + [str(path) for path in objects],
        program=output_of(invocation.argv),
        user_compiler=user,
        measured_compiler=user.version,
    )


def _require_on_path(wrapper: str) -> None:
    """PerfcastError where the MPI wrapper the command names is not installed."""
    if shutil.which(wrapper) is None:
        raise PerfcastError(f"{wrapper} was not found on PATH: {toolchain.MPI_HINT}")


def _require_mpi_link(invocation: Invocation) -> None:
    """PerfcastError where a traced link does not link MPI: there is nothing to trace."""
    if not invocation.mpi:
        raise PerfcastError(
            f"--trace records MPI calls, but {shlex.join(invocation.argv)!r} does not link "
            "MPI: link with an MPI wrapper (mpicc, mpicxx) or add -lmpi"
        )


def _is_smpi_wrapper(invocation: Invocation) -> bool:
    return Path(invocation.argv[0]).name in toolchain.SMPI_COMPILERS.values()


def _smpi_mismatch(invocation: Invocation, options: BuildOptions) -> str:
    if options.smpi:
        return (
            f"--smpi builds with SimGrid's compiler wrappers, not {invocation.argv[0]!r}: "
            'write perfcast build --smpi -- smpicc ... (make CC="perfcast build --smpi -- '
            'smpicc", or smpicxx for C++)'
        )
    return (
        f"{invocation.argv[0]} builds a program for SimGrid SMPI: give --smpi "
        f"(perfcast build --smpi -- {shlex.join(invocation.argv)})"
    )


PARSE_FLAG_PREFIXES = ("-I", "-D", "-U", "-std=", "-include", "-isystem", "-iquote", "-fopenmp")
"""Compile flags that change how a file reads (libclang needs them to see what the compiler
sees: ``-fopenmp`` makes ``#pragma omp`` count); ``-include``/``-isystem``/``-iquote`` may take
their value as the next argument."""


def _parse_flags(argv: Sequence[str]) -> list[str]:
    flags: list[str] = []
    for index, arg in enumerate(argv):
        if arg.startswith(PARSE_FLAG_PREFIXES):
            flags.append(arg)
            if arg in OPTIONS_WITH_VALUE and index + 1 < len(argv):
                flags.append(argv[index + 1])
    return flags


def _under_threshold_rule(
    argv: list[str], sources: Sequence[str], profile_path: Path, trusted: Sequence[str] = ()
) -> list[str]:
    """``argv`` compiling, in place of each source with loops under the threshold rule, its
    rewritten text (:func:`threshold.rewrite`); prints the rule's verdict on every
    parameter-dependent loop of these sources, so the user sees which loops were shortened
    and why the others were not.

    A rewritten file is kept in the cache under a digest of its text and the source's own
    name (so ``-c`` names the object as before); ``-iquote`` the source's directory lets its
    ``#include "..."`` find the user's headers.
    """
    # libclang loads only for a build that asks for the rule: every other compile of a
    # ``make`` stays as quick to start as before
    from perfcast.measure import threshold
    from perfcast.taint.profile_model import read_profile

    places = [threshold.LoopPlace.parse(text) for text in trusted]
    profile = read_profile(profile_path)
    plan = threshold.plan_threshold(
        profile, [Path(s) for s in sources], parse_flags=_parse_flags(argv), trusted=places
    )
    built = {Path(source).resolve() for source in sources}
    for loop in plan.loops:
        if loop.file in built:
            print(f"perfcast build: threshold: {loop.describe()}", file=sys.stderr)
    for place in places:
        files = [path for path in built if place.names(path)]
        if files and not any(loop.line == place.line and loop.file in files for loop in plan.loops):
            print(
                f"perfcast build: threshold: --threshold-trust {place}: no parameter-dependent "
                f"loop of {profile_path} starts at that line of {files[0]}: nothing to trust",
                file=sys.stderr,
            )
    replaced = list(argv)
    for source in sources:
        if not plan.applied_in(Path(source)):
            continue
        text = threshold.rewrite(Path(source), plan)
        data = text.encode(errors="surrogateescape")
        digest = hashlib.sha256(data).hexdigest()[:20]
        target = toolchain.cache_directory() / "threshold" / digest / Path(source).name
        if not target.is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            temporary = target.with_name(f".{target.name}.{os.getpid()}")
            temporary.write_bytes(data)
            os.replace(temporary, target)
        replaced = [str(target) if arg == source else arg for arg in replaced]
        replaced += ["-iquote", str(Path(source).resolve().parent)]
    return replaced


def output_of(command: Sequence[str]) -> Path:
    """The file a link command writes: its ``-o`` value, else ``a.out``."""
    output = "a.out"
    for index, arg in enumerate(command):
        if arg == "-o" and index + 1 < len(command):
            output = command[index + 1]
        elif arg.startswith("-o") and len(arg) > 2:
            output = arg[2:]
    return Path(output)


_DROPPED_FOR_PROBE = frozenset({"-c", "-S", "-E", "-M", "-MM", "-MD", "-MMD", "-MP", "-MG"})
_DROPPED_WITH_VALUE_FOR_PROBE = frozenset({"-o", "-MF", "-MT", "-MQ"})


def _probe_arguments(args: Sequence[str]) -> list[str]:
    """``args`` without input files, output file, mode and dependency-file options: the
    flags that decide what a translation unit defines (defines, includes, language)."""
    kept: list[str] = []
    pending: str | None = None  # the option whose value comes next
    for arg in args:
        if pending is not None:
            if pending not in _DROPPED_WITH_VALUE_FOR_PROBE:
                kept += [pending, arg]
            pending = None
        elif arg in OPTIONS_WITH_VALUE or arg in _DROPPED_WITH_VALUE_FOR_PROBE:
            pending = arg
        elif arg in _DROPPED_FOR_PROBE or arg[:3] in _DROPPED_WITH_VALUE_FOR_PROBE:
            continue  # -MFdeps.d
        elif arg.startswith("-o"):
            continue  # -oapp
        elif arg.startswith("-"):
            kept.append(arg)
    return kept


def keep_functions_flags(
    argv: Sequence[str], env: dict[str, str], sources: Sequence[str], names: Sequence[str]
) -> list[str]:
    """Flags that keep every function of ``names`` defined in ``sources`` a function.

    LLVM's ForceFunctionAttrs pass (``-mllvm -force-attribute=SYMBOL:noinline``, run before
    the inliner at every optimisation level) marks single functions noinline by their
    symbol, without a source change; everything else is optimised as before, so getters
    the filter leaves out are still inlined (``-fno-inline`` would call them all). The
    symbols are found by compiling each source once more at ``-O0``, where nothing is
    inlined, and matching the object's function symbols against the filter as the runtime
    does (symbol, demangled, demangled without parameters).
    """
    base = [argv[0], *_probe_arguments(argv[1:])]
    symbols: set[str] = set()
    with tempfile.TemporaryDirectory(prefix="perfcast-keep-") as scratch:
        for index, source in enumerate(sources):
            probe = Path(scratch) / f"probe-{index}.o"
            # -fno-lto: an LTO object is bitcode, not the ELF file whose symbols are read
            command = [*base, "-O0", "-fno-lto", "-w", "-c", source, "-o", str(probe)]
            done = subprocess.run(
                command, env={**os.environ, **env}, capture_output=True, text=True
            )
            if done.returncode != 0:
                # the real compile that follows reports the error in the user's terms
                continue
            symbols.update(elf_symbols.symbols_named(probe, names))
    return [
        f for symbol in sorted(symbols) for f in ("-mllvm", f"-force-attribute={symbol}:noinline")
    ]


def absent_functions(program: Path, names: Sequence[str]) -> list[str] | None:
    """The entries of ``names`` that name no function the runtime can measure in
    ``program`` (main is always measured); None if the program has no XRay map."""
    measurable = elf_symbols.measurable_symbols(program)
    if measurable is None:
        return None
    _, unused = elf_symbols.select(measurable, names)
    return [name for name in names if name in unused and name != "main"]


def _note_absent(wrapped: WrappedCommand, options: BuildOptions) -> None:
    """Say once, after a filtered link, which of the filter's functions the program lacks."""
    if not wrapped.filter_names or wrapped.program is None or not wrapped.program.is_file():
        return
    try:
        absent = absent_functions(wrapped.program, wrapped.filter_names)
    except InputError:  # not an ELF executable: nothing to check, the link itself succeeded
        return
    if not absent:
        return
    if options.keep_inlined:
        advice = (
            "They are not defined in its sources, are always_inline, or their objects were "
            "compiled without perfcast build --keep-inlined"
        )
    else:
        advice = (
            "They were inlined into their callers (or are not in the program), so their time "
            "counts in their callers; to measure them, compile with perfcast build --filter "
            f"{options.filter_file} --keep-inlined (in a campaign: [build] keep_inlined = true)"
        )
    print(
        f"perfcast build: note: {len(absent)} of the {len(wrapped.filter_names)} functions "
        f"of the filter {options.filter_file} are not in {wrapped.program}, so they cannot be "
        f"measured: {', '.join(absent)}. {advice}",
        file=sys.stderr,
    )


BUILD_RECORD_VARIABLE = "PERFCAST_BUILD_RECORD"
"""Where set, each successful link appends its :class:`~perfcast.measure.store.BuildRecord`
as a JSON line to the file it names: how ``perfcast measure`` learns, through any make,
which compilers built the program it runs."""


def compiler_note(record: BuildRecord) -> str | None:
    """What the user must hear when the measured program was built by another compiler than
    their own build's (None: their build runs clang too), with what to do about it.

    Why it matters: XRay and the counters need clang, so ``perfcast build`` builds with
    clang-16 whatever the wrapper runs; most HPC codes are built with gcc, whose code can be
    much faster or slower (issue 25: a heat solver ran 1.61 s built by gcc, 1.02 s by
    clang, and a prediction from the clang build was 39 % off the gcc one).
    """
    compilers = Compilers(record.measured, record.user)
    if not compilers.differ:
        return None
    return (
        f"{compilers.describe(record.program)}. To run what perfcast measures, build with "
        f"clang-{CLANG_VERSION} yourself (OMPI_CC=clang-{CLANG_VERSION} "
        f"OMPI_CXX=clang++-{CLANG_VERSION} for mpicc and mpicxx); a trace for perfcast "
        "simulate can time your own build: perfcast build --trace --user-compiler"
    )


def note_compiler(wrapped: WrappedCommand) -> None:
    """After a successful link: say which compiler built the program if it is not the
    user's (:func:`compiler_note`), and append the build record where
    :data:`BUILD_RECORD_VARIABLE` asks for it."""
    if wrapped.user_compiler is None or wrapped.program is None:
        return
    record = BuildRecord(
        str(wrapped.program), wrapped.measured_compiler, wrapped.user_compiler.version
    )
    note = compiler_note(record)
    if note is not None:
        print(f"perfcast build: note: {note}", file=sys.stderr)
    destination = os.environ.get(BUILD_RECORD_VARIABLE)
    if destination:
        try:
            with open(destination, "a", encoding="utf-8") as file:
                file.write(json.dumps(dataclasses.asdict(record)) + "\n")
        except OSError as exc:
            raise PerfcastError(
                f"cannot append the build record to {destination} "
                f"({BUILD_RECORD_VARIABLE}): {exc.strerror}"
            ) from None


def run(
    command: Sequence[str], options: BuildOptions = BuildOptions(), *, verbose: bool = False
) -> int:
    """Run the instrumented command; its exit status (the compiler reports its own errors).
    A filtered link that succeeds is followed by a note naming the filter's functions that
    the program lacks (inlined away), once, where the user builds."""
    wrapped = wrap(command, options)
    if verbose:
        print(f"perfcast build: {wrapped}", file=sys.stderr)
    try:
        done = subprocess.run(wrapped.argv, env={**os.environ, **wrapped.env})
    except OSError as exc:
        raise PerfcastError(f"cannot run {wrapped.argv[0]}: {exc.strerror}") from None
    if done.returncode == 0:
        _note_absent(wrapped, options)
        note_compiler(wrapped)
    return done.returncode
