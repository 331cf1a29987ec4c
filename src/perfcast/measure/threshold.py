"""The threshold iteration rule (dPerf, paper section IV-A) for traced runs.

A traced run times every compute block between MPI calls. For a loop whose trip count ``n``
depends on input parameters, the time per iteration settles after a few iterations (caches
and prefetchers warm up), so the run can stop executing the body once it is stable within
epsilon after ``th`` iterations and credit ``t_th / th * (n - th)`` to the compute block: the
traced run gets cheaper, the trace stays the same. dPerf had to be told which loops those are;
perfcast's taint profile already knows which loops depend on which parameters
(:func:`plan_threshold` reads it), :mod:`perfcast.csource.loopsafety` decides per loop
whether skipping bodies is safe (its docstring states every rule; a refusal is a typed
:class:`~perfcast.csource.verdicts.Refusal`), and this module rewrites the source
(:func:`rewrite`); the runtime (``runtime/perfcast_threshold.c``,
:func:`threshold_object`) writes per-loop statistics beside the trace, which
:func:`perfcast.simulate.trace.read_threshold_stats` reads with the rest of the trace.

**At run time** (``runtime/perfcast_threshold.c``) ``PERFCAST_THRESHOLD=0`` runs every body,
so the same binary gives the full traced run to compare with; ``PERFCAST_THRESHOLD_EPSILON``
(0.05), ``PERFCAST_THRESHOLD_MIN`` (8 iterations) and ``PERFCAST_THRESHOLD_MIN_SECONDS``
(0.01 s of sampled time) set when an entry counts as stable. Each rank writes
``threshold-<rank>.tsv`` beside its trace.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from perfcast.csource.loopsafety import LoopSafety, Span
from perfcast.csource.program import Program
from perfcast.csource.sourcefile import SourceFile
from perfcast.csource.verdicts import Reason, Refusal
from perfcast.errors import InputError, PerfcastError
from perfcast.measure import toolchain
from perfcast.taint.profile_model import Loop, TaintProfile
from perfcast.taint.toolchain import mpi_compile_flags

RUNTIME_SOURCE = toolchain.RUNTIME_DIR / "perfcast_threshold.c"
SITES = "__perfcast_threshold_sites"

PRELUDE = """\
#ifdef __cplusplus
extern "C" {
#endif
struct perfcast_threshold_site { const char *file; unsigned line; unsigned slot; };
void perfcast_threshold_enter(struct perfcast_threshold_site *);
int perfcast_threshold_iterate(struct perfcast_threshold_site *);
void perfcast_threshold_leave(struct perfcast_threshold_site *);
#ifdef __cplusplus
}
#endif
"""
"""Declarations the rewritten file needs; the layout matches perfcast_threshold.c."""


@dataclass(frozen=True)
class ThresholdLoop:
    """One parameter-dependent loop of the profile and the rule's verdict on it."""

    file: Path
    line: int
    kind: str
    params: tuple[str, ...]
    verdict: Refusal | Span
    """Why the rule may not take the loop, or where its rewrite inserts the rule's calls."""

    @property
    def applied(self) -> bool:
        return isinstance(self.verdict, Span)

    @property
    def refusal(self) -> Refusal | None:
        return None if isinstance(self.verdict, Span) else self.verdict

    def describe(self) -> str:
        params = ", ".join(self.params)
        if isinstance(self.verdict, Refusal):
            verdict = f"not applied: {self.verdict.describe()}"
        elif self.verdict.overridden is not None:
            verdict = (
                "threshold rule applied, on your word (--threshold-trust): otherwise not, "
                f"as {self.verdict.overridden.describe()}"
            )
        else:
            verdict = "threshold rule applied"
        return f"{self.file}:{self.line}: {self.kind} loop over {params}: {verdict}"


@dataclass(frozen=True)
class ThresholdPlan:
    """The loops the rule rewrites, and every refused one with its reason."""

    loops: tuple[ThresholdLoop, ...]
    digests: Mapping[Path, str] = field(default_factory=dict)
    """SHA-256 of each planned file: :func:`rewrite` refuses a file changed since."""

    def applied_in(self, source: Path) -> list[ThresholdLoop]:
        path = source.resolve()
        return [loop for loop in self.loops if loop.applied and loop.file == path]


def profile_root(profile: TaintProfile, sources: Iterable[Path]) -> Path:
    """The directory the profile's file names are relative to, found from a compiled source.

    ``perfcast taint`` names files relative to the project directory, the deepest one that
    holds all sources (``IS/is.c`` in NAS's tree), while ``make`` compiles each file in its
    own directory (``IS/``): resolved against the compile's working directory no name
    matched, and the rule planned nothing and said nothing on NAS IS and miniFE
    (``benchmarks/results/apps_matrix.txt``). A compiled source whose path ends in a
    profile's name gives the directory above that name; the longest such name wins (it is
    the least likely to end another path by chance). Without one, the current directory."""
    names = sorted(
        {Path(f.file) for f in profile.functions.values() if f.file is not None},
        key=lambda name: -len(name.parts),
    )
    resolved = [Path(source).resolve() for source in sources]
    for name in names:
        if name.is_absolute():
            continue
        for source in resolved:
            if (
                len(source.parts) > len(name.parts)
                and source.parts[-len(name.parts) :] == name.parts
            ):
                return Path(*source.parts[: -len(name.parts)])
    return Path.cwd()


def plan_threshold(
    profile: TaintProfile,
    sources: Sequence[Path],
    *,
    root: Path | None = None,
    parse_flags: Sequence[str] = (),
    trusted: Collection[LoopPlace] = (),
) -> ThresholdPlan:
    """Which loops of ``sources`` the rule may rewrite, each refusal with its reason.

    ``root`` is the directory the profile's file names are relative to (the project
    directory of ``perfcast taint``; default: found from ``sources``, :func:`profile_root`);
    ``parse_flags`` are the compile command's include, define and language flags, which
    libclang needs to read the files as the compiler does. Loops of files not among
    ``sources`` are listed as not applied. ``trusted`` loops are those the user vouches for
    (:meth:`~perfcast.csource.loopsafety.LoopSafety.check`).
    """
    wanted = {Path(source).resolve() for source in sources}
    base = (root or profile_root(profile, wanted)).resolve()
    by_file: dict[Path, list[Loop]] = {}
    for function in profile.functions.values():
        if function.file is not None:
            by_file.setdefault((base / function.file).resolve(), []).extend(function.loops)
    program = Program(base, by_file, [*parse_flags, *mpi_compile_flags()])
    safety = LoopSafety(program)
    verdicts: dict[tuple[Path, int], ThresholdLoop] = {}
    digests: dict[Path, str] = {}
    for path, loops in sorted(by_file.items()):
        if path not in wanted:
            found = [
                ThresholdLoop(
                    path, lp.line, lp.kind, lp.params, Refusal(Reason.NOT_BUILT, path, lp.line)
                )
                for loop in loops
                for lp in _parameter_loops(loop)
            ]
        else:
            file = program.file(path)
            digests[path] = hashlib.sha256(file.source.data).hexdigest()
            vouched = {place.line for place in trusted if place.names(path)}
            found = [verdict for loop in loops for verdict in _decide(safety, file, loop, vouched)]
        # a loop listed twice (by two functions, e.g. template instances) is rewritten once
        for verdict in found:
            verdicts.setdefault((verdict.file, verdict.line), verdict)
    return ThresholdPlan(tuple(verdicts.values()), digests)


def _decide(
    safety: LoopSafety, file: SourceFile, loop: Loop, trusted: Collection[int]
) -> Iterator[ThresholdLoop]:
    """The verdicts for ``loop`` and its nested parameter loops: a loop the rule covers
    hides the loops inside it; a refused one hands the question to its inner loops.
    ``trusted``: the lines of this file's loops the user vouches for."""
    path = file.path
    if not loop.params:
        for inner in loop.loops:
            yield from _decide(safety, file, inner, trusted)
        return
    verdict = safety.check(file, loop.line, loop.kind, trusted=loop.line in trusted)
    yield ThresholdLoop(path, loop.line, loop.kind, loop.params, verdict)
    for inner in loop.loops:
        if isinstance(verdict, Refusal):
            yield from _decide(safety, file, inner, trusted)
            continue
        covered_by = Refusal(Reason.COVERED, path, loop.line)
        for covered in _parameter_loops(inner):
            yield ThresholdLoop(path, covered.line, covered.kind, covered.params, covered_by)


MAX_LINE_DIGITS = 9
"""A ``--threshold-trust`` line has at most 9 digits: no source file has a billion lines, and
the bound is checked before Python converts the digits (it refuses over 4,300 with a
ValueError)."""


@dataclass(frozen=True)
class LoopPlace:
    """A loop the user names, ``FILE:LINE``: the file as a path or its trailing part
    (``lulesh.cc``, ``src/cg_solve.hpp``), the line of the loop's keyword."""

    file: str
    line: int

    @classmethod
    def parse(cls, text: str) -> LoopPlace:
        """``FILE:LINE``; an InputError naming what is wrong."""
        file, colon, line = text.rpartition(":")
        digits = re.fullmatch(f"[0-9]{{1,{MAX_LINE_DIGITS}}}", line)
        if not colon or not file or not file.isprintable() or not digits or int(line) < 1:
            raise InputError(
                f"--threshold-trust {text!r}: give a loop as FILE:LINE, the line of its "
                "keyword (lulesh.cc:1203), as perfcast build prints it"
            )
        return cls(file, int(line))

    def names(self, path: Path) -> bool:
        """Whether the file part names ``path`` (whole trailing path components)."""
        parts = Path(self.file).parts
        if Path(self.file).is_absolute():
            return Path(self.file).resolve() == path
        return len(path.parts) >= len(parts) and path.parts[-len(parts) :] == parts

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


def _parameter_loops(loop: Loop) -> Iterator[Loop]:
    for inner in loop.walk():
        if inner.params:
            yield inner


def rewrite(source_path: Path, plan: ThresholdPlan) -> str:
    """The text of ``source_path`` with the plan's loops under the rule.

    Only insertions are made and none contains a newline, and a ``#line 1`` directive
    follows the prelude, so the compiler's diagnostics and ``__LINE__``/``__FILE__`` name the
    user's file and lines. Compile the result with ``-iquote <the source's directory>`` where
    it is written elsewhere, so that its ``#include "..."`` still finds the user's headers.
    """
    path = source_path.resolve()
    name = str(source_path)
    if any(ord(c) < 32 or ord(c) == 127 for c in name):
        raise InputError(
            "the file name contains a control character, which the threshold statistics "
            "cannot carry; rename the file",
            path=repr(name),
        )
    data = path.read_bytes()
    digest = plan.digests.get(path)
    if digest is not None and hashlib.sha256(data).hexdigest() != digest:
        raise InputError(
            "the file changed after its threshold plan was made; plan it again", path=source_path
        )
    applied = plan.applied_in(path)
    if not applied:
        return data.decode(errors="surrogateescape")
    literal = _c_string(name)
    sites = ", ".join(f"{{{literal}, {loop.line}u, 0u}}" for loop in applied)
    header = (
        PRELUDE
        + f"static struct perfcast_threshold_site {SITES}[] = {{{sites}}};\n"
        + f"#line 1 {literal}\n"
    )
    insertions: list[tuple[int, int, str]] = []
    for index, loop in enumerate(applied):
        site = f"&{SITES}[{index}]"
        assert isinstance(loop.verdict, Span)  # applied_in lists applied loops only
        span = loop.verdict
        # (offset, order, text): at one offset closers (order 0) precede openers (order 1)
        insertions += [
            (span.start, 1, f"{{ perfcast_threshold_enter({site}); "),
            (span.body_start, 1, f"if (perfcast_threshold_iterate({site})) {{ "),
            (span.body_end, 0, " }"),
            (span.end, 0, f" perfcast_threshold_leave({site}); }}"),
        ]
    out, position = [], 0
    for offset, _, text in sorted(insertions, key=lambda item: (item[0], item[1])):
        out.append(data[position:offset])
        out.append(text.encode())
        position = offset
    out.append(data[position:])
    return header + b"".join(out).decode(errors="surrogateescape")


def _c_string(text: str) -> str:
    """``text`` as a C string literal that no file name can break out of: every byte other
    than letters, digits and ``/._-+`` is an octal escape."""
    safe = set(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+")
    body = "".join(chr(b) if b in safe else f"\\{b:03o}" for b in os.fsencode(text))
    return f'"{body}"'


def threshold_object() -> Path:
    """The compiled runtime (``perfcast_threshold.o``), cached like the other runtime objects.

    It needs no MPI header (the rank comes from the launcher's environment), so plain clang
    compiles it and it links into MPI and serial programs alike.
    """
    clang = toolchain.find_xray_clang()
    source = RUNTIME_SOURCE.read_text()

    def build(target: Path) -> None:
        cmd = [clang.cc, *toolchain.RUNTIME_CFLAGS, "-c", str(RUNTIME_SOURCE), "-o", str(target)]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            raise PerfcastError(
                f"building the perfcast threshold runtime failed ({' '.join(cmd)}):\n"
                f"{done.stderr.strip()}"
            )

    key = [clang.version, *toolchain.RUNTIME_CFLAGS, source]
    return toolchain.cached_object(key, "perfcast_threshold.o", build)
