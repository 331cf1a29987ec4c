"""The threshold iteration rule (dPerf, paper section IV-A) for traced runs.

A traced run times every compute block between MPI calls. For a loop whose trip count ``n``
depends on input parameters, the time per iteration settles after a few iterations (caches
and prefetchers warm up), so the run can stop executing the body once it is stable within
epsilon after ``th`` iterations and credit ``t_th / th * (n - th)`` to the compute block: the
traced run gets cheaper, the trace stays the same. dPerf had to be told which loops those are;
perfcast's taint profile already knows which loops depend on which parameters
(:func:`plan_threshold` reads it), and this module decides per loop whether skipping bodies is
safe and rewrites the source (:func:`rewrite`); the runtime (``runtime/perfcast_threshold.c``,
:func:`threshold_object`) writes per-loop statistics beside the trace, which
:func:`perfcast.simulate.trace.read_threshold_stats` reads with the rest of the trace.

**When the rule is safe.** Skipping a body must not change the trace: neither the sequence of
MPI calls nor their sizes, peers and roots, nor the control flow that leads to them. A loop is
refused, with the reason, when

* its body calls MPI, or calls a function of the program that does (transitively, across
  the profile's files); calls through a function pointer and calls to functions that no
  file of the profile defines are refused too, because what they do is not visible;
* its body can leave the loop or the program early (``break`` of this loop, ``return``,
  ``goto``, a label, ``throw``, ``exit``/``abort``/``longjmp``), or does I/O (stdio, POSIX
  read/write, ``operator<<``): output would be missing;
* a variable declared outside the loop and written in its body (assigned, incremented, its
  address taken, passed by non-const reference, a non-const method called on it) is read,
  directly or through variables assigned from it, anywhere else in the function in a
  condition (``if``, loop, ``switch``, ``?:``, ``&&``/``||``), as a value argument of an
  MPI call (or, by address, as its count array), or as an allocation's size; or is a
  global or static variable; or such a value *crosses a call* and is
  refused there by the same rules:

  - passed as a value argument to a function of the program (in this file or in another
    file of the profile), it is followed into that function's parameter;
  - returned, it is followed into every caller: every call of the function in the
    profile's files (:class:`_Program`; every file is parsed, also those the current
    compile step does not build, since ``make`` compiles one file per step) taints the
    call's value there. The rule is refused when the callers cannot all be found: the
    function is referred to other than by a direct call (its address taken, a function
    pointer), is a virtual method, has no call in the profile's files (``main``, a
    callback), or a profile file does not parse;
  - received beside it by an MPI call (``MPI_Allreduce(&local, &total, ...)``: every
    ``&y`` argument of a call that also has a tainted ``&x``), the received variable is
    followed too: a convergence test on a reduced residual decides control flow.

  Used only as MPI buffer contents (``&x``), printed, or stored through a pointer (a global
  or static variable is refused, above), the value is harmless. The search stops at
  :data:`MAX_FOLLOW_DEPTH` calls (refused beyond); a function reached twice is judged once.
  A value computed from a call taints the result whatever the callee does with its
  arguments (``x = g(s)`` taints ``x``);
* it writes memory through a pointer (``*p``, ``a[i]``, ``s->f``, a member of an element,
  a library call's non-const pointer argument such as ``memcpy``'s destination), itself or
  in the program's functions it calls (transitively), and memory of that *kind* is read
  anywhere in the profile's files (:meth:`_FileAnalysis._memory_reason`) in a condition
  (``if``, a loop's condition or bound, ``switch``, ``?:``, ``&&``/``||``), as an MPI
  call's size, peer, tag or root, as an MPI count or displacement array (``const int
  sendcounts[]`` of ``MPI_Alltoallv``: a pointer-to-const parameter that is not a buffer),
  or as a ``malloc``/``calloc``/``realloc`` size; directly, or through the values computed
  from the read, followed like the scalars above (every function judged whole, returns
  into callers, arguments into callees). Kinds are compared as C's aliasing rules allow
  objects to overlap: canonical types without qualifiers, an array's element, signed and
  unsigned variants as one kind (``uint32_t`` and ``int``), a member's write also a write
  of its struct and a struct's of its members. Written kinds spread before the search:
  an MPI call's buffers receive from each other (a reduction of ``long`` fills ``long``
  memory: received memory has the buffer's type, so when both sides have one element type
  the rule covers it unchanged, and a buffer of another type, ``MPI_BYTE`` into ``unsigned
  char``, is filled too), a store ``b[i] = a[j]`` fills ``b``'s kind from ``a``'s, a
  library call fills its non-const pointers' kinds from its const ones (``memcpy``).
  Character memory is any object's bytes: where the program turns a pointer to another
  type (or a ``void *`` other than fresh memory or null) into a character pointer, a
  character read counts as reading every kind and a character write as writing every
  kind; a write through ``void *`` (``memset`` of a ``void *`` variable) writes every kind;
* the loop's own header reads such a variable, or memory of a kind the body writes through
  a pointer (the body would decide the trip count), or calls a function;
* it is written inside a macro, carries a ``#pragma``, sits in a ``constexpr`` function, or is
  nested in a loop the rule already covers (outermost eligible loops only).

**Limits.** Memory is told apart by type only, not by object: a loop writing ``double``
memory is refused when *any* ``double`` memory of the program decides a branch, also an
unrelated array's (conservative), and a loop is judged safe only because no memory of its
kinds is read that way. That is sound for programs that do not launder types: memory
written as one type and read as another other than through character pointers, ``memcpy``
or MPI buffers (a ``union``, a pointer cast between two non-character types, an MPI
datatype that differs from the buffer's type on the two sides, ``qsort``'s callback
reading what it sorts) is not followed; nor is a value carried from one kind of memory
into another through a scalar (``int c = a[i]; b[i] = c;``), nor memory that library
functions read inside a call other than through its pointer arguments, nor nested structs
more than five levels deep. The *contents* of MPI buffers may still differ under the rule
(a result array is not computed) where no condition, size or count reads their kind.
Reads "afterwards" are taken to be anywhere in the function outside the loop, which also
covers a read before the loop inside an enclosing loop. Skipped iterations still evaluate the loop
header, and that time is also part of the mean the skipped iterations are credited at.
A function called in a skipped body is judged by its MPI calls, I/O, exits and the memory
it writes: a global variable it writes is not followed. C++ is handled conservatively: a
non-const method called on an object counts as writing it, so loops over members of a
reference parameter are mostly refused.

**At run time** (``runtime/perfcast_threshold.c``) ``PERFCAST_THRESHOLD=0`` runs every body,
so the same binary gives the full traced run to compare with; ``PERFCAST_THRESHOLD_EPSILON``
(0.05), ``PERFCAST_THRESHOLD_MIN`` (8 iterations) and ``PERFCAST_THRESHOLD_MIN_SECONDS``
(0.01 s of sampled time) set when an entry counts as stable. Each rank writes
``threshold-<rank>.tsv`` beside its trace.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import subprocess
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from clang import cindex
from clang.cindex import Cursor, CursorKind, TypeKind

from perfcast.clang_toolchain import find_clang
from perfcast.errors import InputError, PerfcastError
from perfcast.measure import toolchain
from perfcast.taint.profile_model import Loop, TaintProfile
from perfcast.taint.rewriter import LOOP_KINDS, SourceText, strip
from perfcast.taint.toolchain import mpi_compile_flags

CK = CursorKind

RUNTIME_SOURCE = toolchain.RUNTIME_DIR / "perfcast_threshold.c"
SITES = "__perfcast_threshold_sites"
CXX_SUFFIXES = {".cc", ".cpp", ".cxx", ".c++", ".C", ".hpp", ".hh", ".hxx"}
HEADER_SUFFIXES = {".h", ".hh", ".hpp", ".hxx", ".H", ".inl", ".inc"}
"""Files :class:`_Program` does not parse on their own: what they define is seen in every
file that includes them, with that file's language and flags."""

MPI_PREFIXES = ("MPI_", "PMPI_")
EXIT_CALLS = {
    "exit",
    "_exit",
    "_Exit",
    "quick_exit",
    "abort",
    "longjmp",
    "_longjmp",
    "siglongjmp",
    "setjmp",
    "sigsetjmp",
    "pthread_exit",
    "raise",
    "kill",
    "terminate",
}
IO_CALLS = {
    "printf",
    "fprintf",
    "vprintf",
    "vfprintf",
    "dprintf",
    "puts",
    "fputs",
    "putchar",
    "fputc",
    "putc",
    "fwrite",
    "fread",
    "fgets",
    "fgetc",
    "getc",
    "getchar",
    "gets",
    "scanf",
    "fscanf",
    "fopen",
    "fclose",
    "fflush",
    "fseek",
    "perror",
    "write",
    "read",
    "pwrite",
    "pread",
    "open",
    "close",
    "send",
    "recv",
    "system",
    "popen",
    "operator<<",
    "operator>>",
}
DEFINITION_KINDS = {
    CK.FUNCTION_DECL,
    CK.CXX_METHOD,
    CK.CONSTRUCTOR,
    CK.DESTRUCTOR,
    CK.FUNCTION_TEMPLATE,
}
CALLABLE_KINDS = DEFINITION_KINDS | {CK.CONVERSION_FUNCTION}
SCOPE_KINDS = {
    CK.NAMESPACE,
    CK.CLASS_DECL,
    CK.STRUCT_DECL,
    CK.CLASS_TEMPLATE,
    CK.LINKAGE_SPEC,
    CK.UNEXPOSED_DECL,
}
CONDITION_PARENTS = {CK.IF_STMT, CK.WHILE_STMT, CK.DO_STMT, CK.FOR_STMT, CK.SWITCH_STMT}
ASSIGNMENTS = {"=", "+=", "-=", "*=", "/=", "%=", "<<=", ">>=", "&=", "|=", "^="}
BREAKABLE = {CK.FOR_STMT, CK.WHILE_STMT, CK.DO_STMT, CK.CXX_FOR_RANGE_STMT, CK.SWITCH_STMT}
LEAVING = {
    CK.RETURN_STMT: "return",
    CK.GOTO_STMT: "goto",
    CK.INDIRECT_GOTO_STMT: "goto",
    CK.LABEL_STMT: "a label",
    CK.CXX_THROW_EXPR: "throw",
}

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
    applied: bool
    reason: str
    """Why the rule is not applied; empty where it is."""
    insertions: tuple[int, int, int, int] = (0, 0, 0, 0)
    """Byte offsets of the loop's start, its body's start and end, and the loop's end."""

    def describe(self) -> str:
        params = ", ".join(self.params)
        verdict = "threshold rule applied" if self.applied else f"not applied: {self.reason}"
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


def plan_threshold(
    profile: TaintProfile,
    sources: Sequence[Path],
    *,
    root: Path | None = None,
    parse_flags: Sequence[str] = (),
) -> ThresholdPlan:
    """Which loops of ``sources`` the rule may rewrite, each refusal with its reason.

    ``root`` is the directory the profile's file names are relative to (where ``perfcast
    taint`` ran; default the current directory); ``parse_flags`` are the compile command's
    include, define and language flags, which libclang needs to read the files as the
    compiler does. Loops of files not among ``sources`` are listed as not applied.
    """
    base = (root or Path.cwd()).resolve()
    wanted = {Path(source).resolve() for source in sources}
    by_file: dict[Path, list[Loop]] = {}
    for function in profile.functions.values():
        if function.file is not None:
            by_file.setdefault((base / function.file).resolve(), []).extend(function.loops)
    program = _Program(base, by_file, parse_flags)
    verdicts: dict[tuple[Path, int], ThresholdLoop] = {}
    digests: dict[Path, str] = {}
    for path, loops in sorted(by_file.items()):
        if path not in wanted:
            found = [
                ThresholdLoop(path, lp.line, lp.kind, lp.params, False, "file not built here")
                for loop in loops
                for lp in _parameter_loops(loop)
            ]
        else:
            analysis = program.analysis(path)
            digests[path] = hashlib.sha256(analysis.source.data).hexdigest()
            found = [verdict for loop in loops for verdict in analysis.decide(loop)]
        # a loop listed twice (by two functions, e.g. template instances) is rewritten once
        for verdict in found:
            verdicts.setdefault((verdict.file, verdict.line), verdict)
    return ThresholdPlan(tuple(verdicts.values()), digests)


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
        start, body_start, body_end, end = loop.insertions
        # (offset, order, text): at one offset closers (order 0) precede openers (order 1)
        insertions += [
            (start, 1, f"{{ perfcast_threshold_enter({site}); "),
            (body_start, 1, f"if (perfcast_threshold_iterate({site})) {{ "),
            (body_end, 0, " }"),
            (end, 0, f" perfcast_threshold_leave({site}); }}"),
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


# ---- analysis ---------------------------------------------------------------------------


def _spread_effects(
    direct: Mapping[str, str], calls: Mapping[str, set[str]], names: Mapping[str, str]
) -> dict[str, str]:
    """Each function's effect (MPI, I/O, ...) with those it has only through its callees:
    ``calls G, which calls MPI_X``, to a fixed point, so a chain of any length is found and
    the reason names it (callees in sorted order, so the reason is the same every build)."""
    effects = dict(direct)
    changed = True
    while changed:
        changed = False
        for usr, callees in calls.items():
            if usr in effects:
                continue
            for callee in sorted(callees):
                if callee in effects:
                    effects[usr] = f"calls {names[callee]}, which {effects[callee]}"
                    changed = True
                    break
    return effects


def _key(cursor: Cursor) -> tuple[str, int]:
    """A declaration's identity across cursors: its file and offset."""
    location = cursor.location
    return (location.file.name if location.file else "", cursor.extent.start.offset)


def _callee(call: Cursor) -> Cursor | None:
    callee = call.referenced
    if callee is None:
        return None
    return callee.get_definition() or callee


def _in_system_header(cursor: Cursor) -> bool:
    return bool(cursor.location.is_in_system_header)


def _children(cursor: Cursor) -> list[Cursor]:
    return list(cursor.get_children())


def _escape(variable: Cursor) -> str:
    """Why a value stored in ``variable`` outlives the function (whose later readers are
    not followed); empty for a plain local variable or a by-value parameter."""
    if variable.type.kind in (TypeKind.LVALUEREFERENCE, TypeKind.RVALUEREFERENCE):
        return "a reference to a variable of the caller"
    if variable.kind == CK.VAR_DECL and (
        variable.semantic_parent is None
        or variable.semantic_parent.kind not in _FUNCTION_KINDS
        or variable.storage_class == cindex.StorageClass.STATIC
    ):
        return "a global or static variable"
    return ""


ALLOCATION_CALLS = {"malloc", "calloc", "realloc", "reallocarray", "aligned_alloc"}
"""Library calls whose size arguments decide how much memory a later send may read."""
ANY_KIND = {"char", "void", "std::byte"}
"""Memory kinds that may be any object's bytes (C's character types, ``void *``)."""
_ARRAY_KINDS = {
    TypeKind.CONSTANTARRAY,
    TypeKind.INCOMPLETEARRAY,
    TypeKind.VARIABLEARRAY,
    TypeKind.DEPENDENTSIZEDARRAY,
}
_CAST_KINDS = {
    CK.UNEXPOSED_EXPR,
    CK.CSTYLE_CAST_EXPR,
    CK.CXX_STATIC_CAST_EXPR,
    CK.CXX_REINTERPRET_CAST_EXPR,
    CK.CXX_FUNCTIONAL_CAST_EXPR,
}


def _memory_kind(kind: cindex.Type) -> str:
    """The type memory is accessed as, compared the way C's aliasing rules compare it:
    canonical, an array's element, without qualifiers, signed and unsigned variants as one
    (``uint32_t`` and ``int`` memory may be the same object)."""
    canonical = kind.get_canonical()
    while canonical.kind in _ARRAY_KINDS:
        canonical = canonical.element_type.get_canonical()
    words = canonical.spelling.replace("*", " * ").split()
    dropped = {"const", "volatile", "restrict", "__restrict", "signed", "unsigned"}
    kept = [word for word in words if word not in dropped]
    return " ".join(kept) if kept and kept[0] != "*" else " ".join(["int", *kept])


def _pointee_kind(expression: Cursor) -> str | None:
    """The memory kind an argument points to (a pointer's pointee, an array's element),
    looking through implicit conversions (``memcpy(keys, ...)`` points to ``uint32_t``)."""
    kind = strip(expression).type.get_canonical()
    if kind.kind == TypeKind.POINTER:
        return _memory_kind(kind.get_pointee())
    if kind.kind in _ARRAY_KINDS:
        return _memory_kind(kind)
    return None


def _pointed_to(parameter: cindex.Type) -> tuple[cindex.Type, bool] | None:
    """What a pointer parameter points to, and whether it is const; a parameter declared
    as an array (``const int counts[]``, where libclang puts the ``const`` on the array)
    points to its element. None for other parameters."""
    canonical = parameter.get_canonical()
    if canonical.kind == TypeKind.POINTER:
        pointee = canonical.get_pointee()
        return pointee, pointee.is_const_qualified()
    if canonical.kind in _ARRAY_KINDS:
        element = canonical.element_type
        return element, element.is_const_qualified() or canonical.is_const_qualified()
    return None


def _memory_key(kind: str) -> tuple[str, int]:
    """The key under which :meth:`_FileAnalysis._reads` reports a read of memory."""
    return ("memory " + kind, -2)


def _record_kinds(kind: cindex.Type, depth: int = 0) -> set[str]:
    """The kinds of a struct's members, recursively: writing a whole struct writes each."""
    found: set[str] = set()
    canonical = kind.get_canonical()
    while canonical.kind in _ARRAY_KINDS:
        canonical = canonical.element_type.get_canonical()
    if canonical.kind != TypeKind.RECORD or depth > 4:
        return found
    for member in canonical.get_fields():
        found.add(_memory_kind(member.type))
        found |= _record_kinds(member.type, depth + 1)
    return found


def _fresh_or_null(expression: Cursor) -> bool:
    """Whether a ``void *`` is a null pointer or an allocation's result: converting it to
    a character pointer launders no other type."""
    node = strip(expression)
    while node.kind in _CAST_KINDS and _children(node):
        node = strip(_children(node)[-1])
    if node.kind in (CK.INTEGER_LITERAL, CK.CXX_NULL_PTR_LITERAL_EXPR, CK.GNU_NULL_EXPR):
        return True
    return node.kind == CK.CALL_EXPR and node.spelling in ALLOCATION_CALLS


@dataclass
class _Memory:
    """What :meth:`_Program.memory` collects over all profile files for the memory rule."""

    functions: list[tuple[_FileAnalysis, Cursor]] = field(default_factory=list)
    writes: dict[str, dict[str, str]] = field(default_factory=dict)
    """Per function (USR): the kinds of memory it writes itself, each with where."""
    calls: dict[str, set[str]] = field(default_factory=dict)
    """Per function (USR): the functions of the program it calls."""
    flows: list[tuple[frozenset[str], frozenset[str], str]] = field(default_factory=list)
    """(from kinds, to kinds, where): a store, a library copy, an MPI call's buffers."""
    kinds: set[str] = field(default_factory=set)
    """Every kind of memory the program reads or writes."""
    laundering: str = ""
    """Where the program first turns a pointer to another type into a character pointer;
    empty where it never does, and then character reads only read character memory."""


MAX_FOLLOW_DEPTH = 8
"""How many calls deep a value is followed from a loop into callers and callees; a chain
longer than this is refused rather than searched further."""


def _call_key(callee: Cursor) -> tuple[str, int]:
    """The key under which :meth:`_FileAnalysis._reads` reports a call's result: the same
    for every call of one function, in every translation unit (USRs are global)."""
    return ("call " + callee.get_usr(), -1)


def _is_virtual(function: Cursor) -> bool:
    return function.kind == CK.CXX_METHOD and bool(function.is_virtual_method())


@dataclass
class _Trail:
    """One loop's search through callers and callees: what has been followed already (a
    recursion or a function reached twice is judged once) and how deep it is."""

    program: _Program
    visited: set[tuple[str, ...]] = field(default_factory=set)
    depth: int = 0

    def deeper(self) -> _Trail:
        return _Trail(self.program, self.visited, self.depth + 1)


@dataclass(frozen=True)
class _CallSite:
    analysis: _FileAnalysis
    call: Cursor
    function: Cursor | None
    """The function definition the call is in; None for a call outside any function."""


@dataclass
class _Index:
    """What :meth:`_Program._walk` collects over all profile files."""

    calls: dict[str, list[_CallSite]] = field(default_factory=dict)
    references: dict[str, str] = field(default_factory=dict)
    """Per function: one place it is referred to other than as a call's callee."""
    definitions: dict[str, tuple[_FileAnalysis, Cursor]] = field(default_factory=dict)
    callees: set[tuple[str, int]] = field(default_factory=set)
    """The callee expressions of the calls seen, which are not such references."""
    seen: set[tuple[str, int]] = field(default_factory=set)


class _Program:
    """Every file of the taint profile, each parsed at most once per plan and only when a
    value or a call crosses into it: a ``make`` compiles one file per step, and the loop of
    that file may return its result to a function of another."""

    def __init__(self, base: Path, files: Iterable[Path], parse_flags: Sequence[str]):
        self.base = base
        self.files = sorted({path for path in files if path.suffix not in HEADER_SUFFIXES})
        self.parse_flags = tuple(parse_flags)
        self._parsed: dict[Path, _FileAnalysis | str] = {}

    def analysis(self, path: Path) -> _FileAnalysis:
        """The file parsed; an InputError naming it where libclang cannot parse it."""
        parsed = self._parsed.get(path)
        if isinstance(parsed, _FileAnalysis):
            return parsed
        analysis = _FileAnalysis(path, self.parse_flags, self)
        self._parsed[path] = analysis
        return analysis

    def _all(self) -> tuple[list[_FileAnalysis], list[str]]:
        """Every profile file parsed, and why each that cannot be is missing."""
        analyses, failures = [], []
        for path in self.files:
            if path not in self._parsed:
                try:
                    self._parsed[path] = _FileAnalysis(path, self.parse_flags, self)
                except InputError as exc:
                    self._parsed[path] = f"{self.name(path)} cannot be parsed ({exc})"
            parsed = self._parsed[path]
            if isinstance(parsed, _FileAnalysis):
                analyses.append(parsed)
            else:
                failures.append(parsed)
        return analyses, failures

    def name(self, path: Path) -> str:
        """``path`` as the user's build names it: relative to the profile's directory."""
        try:
            return str(path.relative_to(self.base))
        except ValueError:
            return str(path)

    def place(self, cursor: Cursor) -> str:
        """``file:line`` of a cursor, the file named as :meth:`name` does (a header's, where
        the cursor is in one)."""
        file = cursor.location.file
        where = self.name(Path(file.name).resolve()) if file is not None else "?"
        return f"{where}:{cursor.location.line}"

    @functools.cached_property
    def _index(self) -> _Index:
        """Per function (USR): its calls, where it is referred to other than by a direct
        call (its address taken, a function pointer set), and its definition."""
        index = _Index()
        analyses, _ = self._all()
        for analysis in analyses:
            for top in analysis.tu.cursor.get_children():
                if top.location.file is not None and not _in_system_header(top):
                    self._walk(analysis, top, None, index)
        return index

    def _walk(
        self, analysis: _FileAnalysis, node: Cursor, function: Cursor | None, index: _Index
    ) -> None:
        if node.kind in DEFINITION_KINDS and node.is_definition():
            function = node
            index.definitions.setdefault(node.get_usr(), (analysis, node))
        if node.kind == CK.CALL_EXPR and node.referenced is not None:
            reference = _callee_reference(node)
            if reference is not None:
                index.callees.add(_key(reference))
                if _key(node) not in index.seen:  # a header's inline function, parsed twice
                    index.seen.add(_key(node))
                    site = _CallSite(analysis, node, function)
                    index.calls.setdefault(node.referenced.get_usr(), []).append(site)
        elif (
            node.kind in (CK.DECL_REF_EXPR, CK.MEMBER_REF_EXPR)
            and node.referenced is not None
            and node.referenced.kind in CALLABLE_KINDS
            and _key(node) not in index.callees
        ):
            index.references.setdefault(node.referenced.get_usr(), self.place(node))
        for child in node.get_children():
            self._walk(analysis, child, function, index)

    def follow_return(self, function: Cursor, what: str, line: int, trail: _Trail) -> str:
        """Why ``function`` returning ``what`` may change the trace, judged in every
        caller; empty where no caller can be changed by it."""
        name = function.spelling
        returned = f"{what} is returned (line {line})"
        if _is_virtual(function):
            return f"{returned} by a virtual method, whose calls through a base are not found"
        if trail.depth >= MAX_FOLLOW_DEPTH:
            return f"{returned}, and callers are followed no deeper than {MAX_FOLLOW_DEPTH} calls"
        usr = function.get_usr()
        if ("return", usr) in trail.visited:
            return ""
        trail.visited.add(("return", usr))
        _, failures = self._all()
        if failures:
            return f"{returned}, and the callers of {name} cannot all be found: {failures[0]}"
        calls, references = self._index.calls, self._index.references
        if usr in references:
            return (
                f"{returned}, and {name} is referred to other than by a call "
                f"({references[usr]}), so its callers cannot all be found"
            )
        sites = calls.get(usr, [])
        if not sites:
            return f"{returned}, and no call of {name} is found in the profile's files"
        seed = {_call_key(function): f"{name}'s result"}
        for site in sites:
            place = self.place(site.call)
            if site.function is None:
                return f"{returned} to {place}, outside any function"
            key = ("caller", usr, site.function.get_usr())
            if key in trail.visited:
                continue
            trail.visited.add(key)
            reason = site.analysis.judge(seed, None, site.function, trail.deeper())
            if reason:
                return f"{returned} to {site.function.spelling} ({place}), where {reason}"
        return ""

    def follow_argument(
        self,
        analysis: _FileAnalysis,
        callee: Cursor,
        index: int,
        what: str,
        line: int,
        trail: _Trail,
    ) -> str:
        """Why passing ``what`` as argument ``index`` of ``callee`` may change the trace,
        judged in the callee's definition (in ``analysis`` or another profile file)."""
        name = callee.spelling
        passed = f"{what} is passed to {name} (line {line})"
        if callee.is_definition():
            definition = (analysis, callee)
        else:
            _, failures = self._all()
            found = self._index.definitions.get(callee.get_usr())
            if found is None:
                missing = f" ({failures[0]})" if failures else ""
                return f"{passed}, which is defined in no file of the profile{missing}"
            definition = found
        if _is_virtual(callee):
            return f"{passed}, a virtual method whose overriders are not followed"
        where, function = definition
        parameters = [c for c in _children(function) if c.kind == CK.PARM_DECL]
        if index >= len(parameters):
            return f"{passed} as a variadic argument, whose use is not followed"
        if trail.depth >= MAX_FOLLOW_DEPTH:
            return f"{passed}, and callees are followed no deeper than {MAX_FOLLOW_DEPTH} calls"
        key = ("argument", callee.get_usr(), str(index))
        if key in trail.visited:
            return ""
        trail.visited.add(key)
        parameter = parameters[index]
        seed = {_key(parameter): f"{parameter.spelling}, the parameter of {name} it is passed to,"}
        reason = where.judge(seed, None, function, trail.deeper())
        if reason:
            return f"{passed} ({self.place(function)}), where {reason}"
        return ""

    @functools.cached_property
    def _effects(self) -> tuple[dict[str, str], frozenset[str]]:
        """Per function (USR) of any profile file: why calling it would change the trace,
        by a fixed point over the calls of all the files, a call of a function that no
        profile file defines counting as such a reason, since what it does is not visible;
        and the functions the files define."""
        analyses, failures = self._all()
        direct: dict[str, str] = {}
        calls: dict[str, set[str]] = {}
        names: dict[str, str] = {}
        for analysis in analyses:
            for function in analysis.definitions():
                usr = function.get_usr()
                if usr in calls:
                    continue  # an inline function of a header, seen in an earlier file
                calls[usr] = set()
                where = self.name(analysis.path)
                for node in function.walk_preorder():
                    if node.kind != CK.CALL_EXPR:
                        continue
                    effect = analysis.local_effect(node)
                    if effect is not None:
                        direct.setdefault(usr, f"{effect[:-1]} of {where})")
                    callee = _callee(node)
                    if (
                        callee is not None
                        and callee.location.file is not None
                        and not _in_system_header(callee)
                    ):
                        calls[usr].add(callee.get_usr())
                        names.setdefault(callee.get_usr(), callee.spelling)
        missing = f" ({failures[0]})" if failures else ""
        for usr, callees in calls.items():
            for callee in sorted(callees - calls.keys()):
                direct.setdefault(
                    usr, f"calls {names[callee]}, defined in no file of the profile{missing}"
                )
        return _spread_effects(direct, calls, names), frozenset(calls)

    def effect_elsewhere(self, callee: Cursor, line: int) -> str | None:
        """What calling ``callee``, defined in another file, does that the rule cannot
        skip; None where the file defining it shows nothing such."""
        name = callee.spelling
        usr = callee.get_usr()
        _, failures = self._all()
        effects, defined = self._effects
        if usr not in defined:
            missing = f" ({failures[0]})" if failures else ""
            return f"calls {name} (line {line}), defined in no file of the profile{missing}"
        effect = effects.get(usr)
        return None if effect is None else f"calls {name} (line {line}), which {effect}"

    @functools.cached_property
    def memory(self) -> _Memory:
        """What the memory rule needs from every file of the profile: per function the
        memory it writes and the functions it calls, the flows between kinds of memory,
        every kind accessed, and whether pointers are laundered into character pointers."""
        analyses, _ = self._all()
        facts = _Memory()
        for analysis in analyses:
            for function in analysis.definitions():
                usr = function.get_usr()
                if usr in facts.writes:
                    continue  # an inline function of a header, seen in an earlier file
                facts.functions.append((analysis, function))
                facts.writes[usr] = analysis.memory_writes(function)
                facts.calls[usr] = analysis.program_callees(function)
                analysis.collect_memory(function, facts)
        return facts


def _callee_reference(call: Cursor) -> Cursor | None:
    """The expression naming a call's callee (``f`` in ``f(x)``, ``o.m`` in ``o.m(x)``);
    None where it is computed (a function pointer)."""
    children = _children(call)
    if not children:
        return None
    # the callee first; an overloaded operator's name may follow its left operand
    for child in children:
        node = strip(child)
        if (
            node.kind in (CK.DECL_REF_EXPR, CK.MEMBER_REF_EXPR)
            and node.referenced == call.referenced
        ):
            return node
    return None


class _FileAnalysis:
    """One source file parsed once; the safety verdict for each of its profile loops."""

    def __init__(self, path: Path, parse_flags: Sequence[str], program: _Program):
        self.path = path
        self.program = program
        language = "c++" if path.suffix in CXX_SUFFIXES else "c"
        builtin = find_clang().resource_dir / "include"
        args = ["-x", language, *parse_flags, *mpi_compile_flags(), "-isystem", str(builtin)]
        try:
            self.tu = cindex.Index.create().parse(str(path), args=args)
        except cindex.TranslationUnitLoadError as exc:
            raise InputError(f"libclang cannot read the file: {exc}", path=path) from None
        for diagnostic in self.tu.diagnostics:
            if diagnostic.severity >= cindex.Diagnostic.Error:
                location = diagnostic.location
                raise InputError(
                    f"libclang cannot parse it: {diagnostic.spelling}; fix the code or pass "
                    "the include/define flags of the compile command",
                    path=Path(location.file.name) if location.file else path,
                    line=location.line or None,
                )

    # computed on first use: a file parsed only to find callers or callees of another needs
    # its tokens for few functions and its loops not at all
    @functools.cached_property
    def source(self) -> SourceText:
        return SourceText(self.path, self.tu)

    @functools.cached_property
    def loops(self) -> dict[int, list[tuple[Cursor, Cursor]]]:
        """The loops of the file's own functions by line, each with its function."""
        loops: dict[int, list[tuple[Cursor, Cursor]]] = {}
        for function in self.definitions():
            if Path(function.location.file.name).resolve() != self.path:
                continue
            for node in function.walk_preorder():
                if node.kind in LOOP_KINDS and node.location.file is not None:
                    loops.setdefault(node.location.line, []).append((node, function))
        return loops

    def definitions(self) -> Iterator[Cursor]:
        """Function definitions of the translation unit outside system headers."""

        def walk(node: Cursor) -> Iterator[Cursor]:
            for child in node.get_children():
                if child.location.file is None or _in_system_header(child):
                    continue
                if child.kind in DEFINITION_KINDS and child.is_definition():
                    yield child
                elif child.kind in SCOPE_KINDS:
                    yield from walk(child)

        yield from walk(self.tu.cursor)

    @functools.cached_property
    def effects(self) -> dict[str, str]:
        """Per function (USR): why calling it would change the trace or the output, found
        by a fixed point over the calls within the translation unit (a call to a function of
        another file is judged by :meth:`_Program.effect_elsewhere`). Computed on first use:
        a file parsed only to find callers never needs it."""
        direct: dict[str, str] = {}
        calls: dict[str, set[str]] = {}
        names: dict[str, str] = {}
        for function in self.definitions():
            usr = function.get_usr()
            names[usr] = function.spelling
            calls[usr] = set()
            for node in function.walk_preorder():
                if node.kind != CK.CALL_EXPR:
                    continue
                effect = self._call_effect(node)
                if effect is not None:
                    direct.setdefault(usr, effect)
                callee = _callee(node)
                if callee is not None and callee.is_definition():
                    calls[usr].add(callee.get_usr())
        return _spread_effects(direct, calls, names)

    def _call_effect(self, call: Cursor) -> str | None:
        """What a call does that the rule cannot skip, judged by the callee's name and, for
        a function of another file, by that file; None for a harmless call."""
        effect = self.local_effect(call)
        if effect is not None:
            return effect
        callee = _callee(call)
        if callee is not None and not callee.is_definition() and not _in_system_header(callee):
            return self.program.effect_elsewhere(callee, call.location.line)
        return None

    def local_effect(self, call: Cursor) -> str | None:
        """What a call does that the rule cannot skip, judged by the callee's name alone;
        None for a harmless call and for a function defined in another file."""
        callee = _callee(call)
        line = call.location.line
        if callee is None or callee.kind not in CALLABLE_KINDS:
            if callee is None and not _children(call):
                return None  # an implicit constructor or conversion
            return f"calls through a function pointer (line {line})"
        name = callee.spelling
        if callee.location.file is None:
            return None  # a compiler builtin (__builtin_expect, implicit declarations)
        if name.startswith(MPI_PREFIXES):
            return f"calls {name} (line {line})"
        if name in EXIT_CALLS:
            return f"can leave the program: {name} (line {line})"
        if name in IO_CALLS:
            return f"does I/O: {name} (line {line})"
        return None

    def _effect_of(self, call: Cursor) -> str | None:
        effect = self._call_effect(call)
        if effect is not None:
            return effect
        callee = _callee(call)
        if callee is not None and callee.get_usr() in self.effects:
            return (
                f"calls {callee.spelling} (line {call.location.line}), which "
                + (self.effects[callee.get_usr()])
            )
        return None

    # ---- per loop -----------------------------------------------------------------------
    def decide(self, loop: Loop) -> Iterator[ThresholdLoop]:
        """The verdicts for ``loop`` and its nested parameter loops: a loop the rule covers
        hides the loops inside it; a refused one hands the question to its inner loops."""
        if not loop.params:
            for inner in loop.loops:
                yield from self.decide(inner)
            return
        reason, insertions = self._check(loop)
        yield ThresholdLoop(
            self.path, loop.line, loop.kind, loop.params, not reason, reason, insertions
        )
        for inner in loop.loops:
            if reason:
                yield from self.decide(inner)
            else:
                for covered in _parameter_loops(inner):
                    yield ThresholdLoop(
                        self.path,
                        covered.line,
                        covered.kind,
                        covered.params,
                        False,
                        f"inside the loop at line {loop.line}, which the rule covers",
                    )

    def _check(self, loop: Loop) -> tuple[str, tuple[int, int, int, int]]:
        none = (0, 0, 0, 0)
        found = [
            (node, function)
            for node, function in self.loops.get(loop.line, [])
            if LOOP_KINDS[node.kind] == loop.kind
        ]
        if len(found) != 1:
            what = "no" if not found else "several"
            return f"{what} {loop.kind} loop at this line in the parsed source", none
        cursor, function = found[0]
        keyword = "for" if loop.kind == "range-for" else loop.kind
        tokens = self.source.tokens
        first = self.source.first_at(cursor.extent.start.offset)
        if first >= len(tokens) or tokens[first].spelling != keyword:
            return "written inside a macro", none
        if self._has_pragma(cursor):
            return "a #pragma applies to it", none
        if any(t.spelling == "constexpr" for t in self._function_head(function)):
            return "in a constexpr function", none
        children = _children(cursor)
        body = children[0] if loop.kind == "do" else children[-1]
        # a range-for's loop variable is initialised per element by implicit calls
        # (operator*, operator++); only its range expression is the header proper
        header = [
            c
            for c in children
            if c != body and not (loop.kind == "range-for" and c.kind == CK.VAR_DECL)
        ]
        reason = self._body_reason(body) or self._flow_reason(cursor, body, header, function)
        if reason:
            return reason, none
        return "", (
            cursor.extent.start.offset,
            body.extent.start.offset,
            self._statement_end(body),
            self._statement_end(cursor),
        )

    def _has_pragma(self, cursor: Cursor) -> bool:
        lines = self.source.data[: cursor.extent.start.offset].decode(errors="replace")
        previous = [text.strip() for text in lines.splitlines()[:-1] if text.strip()]
        return bool(previous) and re.match(r"#\s*pragma\b", previous[-1]) is not None

    def _function_head(self, function: Cursor) -> list:
        body = [c for c in _children(function) if c.kind == CK.COMPOUND_STMT]
        end = body[-1].extent.start.offset if body else function.extent.end.offset
        return self.source.tokens_in(function.extent.start.offset, end)

    def _statement_end(self, cursor: Cursor) -> int:
        """Offset just past a statement, its terminating ``;`` included."""
        children = _children(cursor)
        if cursor.kind in LOOP_KINDS and cursor.kind != CK.DO_STMT and children:
            return max(cursor.extent.end.offset, self._statement_end(children[-1]))
        end = cursor.extent.end.offset
        if cursor.kind == CK.COMPOUND_STMT:
            return end
        for index in (self.source.first_at(end - 1), self.source.first_at(end)):
            if index < len(self.source.tokens) and self.source.tokens[index].spelling == ";":
                return self.source.tokens[index].end
        return end

    def _body_reason(self, body: Cursor) -> str:
        """MPI, I/O, early exits and unknown calls in the body."""

        def walk(node: Cursor, breakable: int) -> str:
            kind = node.kind
            if kind == CK.BREAK_STMT and breakable == 0:
                return f"its body can break out of it (line {node.location.line})"
            if kind in LEAVING:
                return f"its body can leave it: {LEAVING[kind]} (line {node.location.line})"
            if kind == CK.CALL_EXPR:
                effect = self._effect_of(node)
                if effect:
                    return f"its body {effect}"
            inner = breakable + (kind in BREAKABLE)
            for child in node.get_children():
                reason = walk(child, inner)
                if reason:
                    return reason
            return ""

        return walk(body, 0)

    def _flow_reason(
        self, loop: Cursor, body: Cursor, header: list[Cursor], function: Cursor
    ) -> str:
        """Whether what the body writes reaches control flow, MPI sizes or the result."""
        written = self._writes(body, loop)
        memory_types = self.memory_writes(body).keys()
        for variable in written.values():
            escape = _escape(variable)
            if escape:
                return f"its body writes {variable.spelling}, {escape}"
        header_reads = {key for part in header for key in self._reads(part)}
        for key in header_reads & written.keys():
            return f"its body writes {written[key].spelling}, which the loop's header reads"
        for part in header:
            for node in part.walk_preorder():
                if node.kind == CK.CALL_EXPR and node.referenced is not None:
                    name = node.spelling
                    return f"its header calls {name}, which the skipped bodies could change"
                if self._memory_type(node) in memory_types:
                    return (
                        "its header reads memory of a type its body writes through a pointer "
                        f"(line {node.location.line})"
                    )
        described = {key: f"{v.spelling}, written in its body," for key, v in written.items()}
        scalars = self.judge(described, body, function, _Trail(self.program))
        return scalars or self._memory_reason(body)

    def judge(
        self,
        tainted: dict[tuple[str, int], str],
        body: Cursor | None,
        function: Cursor,
        trail: _Trail,
    ) -> str:
        """Why the values in ``tainted`` (variable or call key -> how it depends on skipped
        bodies) may change the trace, read in ``function`` outside ``body`` (all of it
        when None) and followed into callers and callees; empty where they cannot."""
        tainted, escaped = self._propagate(dict(tainted), body, function)
        return escaped or self._use_reason(tainted, body, function, trail)

    def _memory_type(self, node: Cursor) -> str | None:
        """The type of an access through memory (``*p``, ``a[i]``, ``s->f``), else None."""
        if node.kind == CK.ARRAY_SUBSCRIPT_EXPR:
            return _memory_kind(node.type)
        if node.kind == CK.UNARY_OPERATOR:
            tokens = self.source.tokens_in(node.extent.start.offset, node.extent.end.offset)
            if tokens and tokens[0].spelling == "*":
                return _memory_kind(node.type)
        if node.kind == CK.MEMBER_REF_EXPR:
            inner = _children(node)
            if not inner or strip(inner[0]).type.get_canonical().kind == TypeKind.POINTER:
                return _memory_kind(node.type)
        return None

    def _root(self, lvalue: Cursor) -> Cursor | None:
        """The variable an lvalue writes (``x``, ``s.f`` -> ``s``); None for memory."""
        node = strip(lvalue)
        while node.kind == CK.MEMBER_REF_EXPR and self._memory_type(node) is None:
            inner = _children(node)
            node = strip(inner[0])
        variable = node.referenced if node.kind == CK.DECL_REF_EXPR else None
        if variable is not None and variable.kind in (CK.VAR_DECL, CK.PARM_DECL):
            return variable
        return None

    def _assignment(self, node: Cursor) -> tuple[Cursor, Cursor] | None:
        """(lhs, rhs) of an assignment expression, else None."""
        if node.kind not in (CK.BINARY_OPERATOR, CK.COMPOUND_ASSIGNMENT_OPERATOR):
            return None
        parts = _children(node)
        if len(parts) != 2:
            return None
        index = self.source.first_at(parts[0].extent.end.offset)
        if index < len(self.source.tokens) and self.source.tokens[index].spelling in ASSIGNMENTS:
            return parts[0], parts[1]
        return None

    def _write_targets(self, code: Cursor) -> list[Cursor]:
        """The lvalues ``code`` assigns, increments, takes the address of or binds to a
        non-const reference."""
        targets: list[Cursor] = []
        for node in code.walk_preorder():
            assignment = self._assignment(node)
            if assignment is not None:
                targets.append(assignment[0])
            elif node.kind == CK.UNARY_OPERATOR:
                tokens = self.source.tokens_in(node.extent.start.offset, node.extent.end.offset)
                operand = _children(node)
                spellings = {tokens[0].spelling, tokens[-1].spelling} if tokens else set()
                if operand and spellings & {"++", "--", "&"}:
                    targets.append(operand[0])
            elif node.kind == CK.CALL_EXPR:
                targets.extend(self._call_writes(node))
        return targets

    def _writes(self, body: Cursor, loop: Cursor) -> dict[tuple[str, int], Cursor]:
        """Variables declared outside the loop that the body writes (memory written
        through pointers is :meth:`memory_writes`'s)."""
        written: dict[tuple[str, int], Cursor] = {}
        start, end = loop.extent.start.offset, loop.extent.end.offset
        for target in self._write_targets(body):
            variable = self._root(target)
            if variable is None:
                continue
            inside = (
                variable.location.file is not None
                and Path(variable.location.file.name).resolve() == self.path
                and start <= variable.extent.start.offset < end
            )
            if not inside or variable.storage_class == cindex.StorageClass.STATIC:
                written[_key(variable)] = variable
        return written

    def _describe_memory(self, node: Cursor) -> str:
        """``uint32_t memory (written at samplesort.c:22)``: no comma, so that the
        propagation's ``computed from`` names it whole."""
        spelling = node.type.spelling.replace(",", ";")
        return f"{spelling} memory (written at {self.program.place(node)})"

    def memory_writes(self, code: Cursor) -> dict[str, str]:
        """The kinds of memory ``code`` writes through pointers, subscripts and members of
        pointed-to structs (a member's write also writes its struct, a struct's its
        members), and through the non-const pointer arguments of library calls
        (``memcpy``'s destination), each with where."""
        found: dict[str, str] = {}
        for target in self._write_targets(code):
            where = self._describe_memory(strip(target))
            for kind in sorted(self._memory_target(target)):
                found.setdefault(kind, where)
        for node in code.walk_preorder():
            if node.kind == CK.CALL_EXPR:
                for writable, kind, argument in self._library_pointers(node):
                    if writable:
                        described = f"{kind} memory (written by {node.spelling} at "
                        found.setdefault(kind, described + f"{self.program.place(argument)})")
        return found

    def _memory_target(self, target: Cursor) -> set[str]:
        """The kinds of memory an lvalue stores to; empty for a variable (the scalar rules
        judge it). ``p[i].count`` stores to ``int`` and to the struct in memory, ``s->f``
        to ``f``'s type and ``*s``'s, ``*s = v`` to the struct and its members."""
        if self._root(target) is not None:
            return set()
        node = strip(target)
        kinds = _record_kinds(node.type)
        while self._memory_type(node) is None and node.kind == CK.MEMBER_REF_EXPR:
            kinds.add(_memory_kind(node.type))
            node = strip(_children(node)[0])
        kind = self._memory_type(node)
        if kind is None:
            return set()
        kinds.add(kind)
        if node.kind == CK.MEMBER_REF_EXPR and _children(node):
            base = _pointee_kind(strip(_children(node)[0]))
            if base is not None:
                kinds.add(base)
        return kinds

    def _library_pointers(self, call: Cursor) -> Iterator[tuple[bool, str, Cursor]]:
        """(whether the callee may write through it, the memory kind, the argument) for
        each pointer argument of a call to a library function (one a system header
        declares; MPI is judged by its own rules)."""
        callee = _callee(call)
        if (
            callee is None
            or callee.location.file is None
            or not _in_system_header(callee)
            or callee.spelling.startswith(MPI_PREFIXES)
            or callee.type.kind != TypeKind.FUNCTIONPROTO
        ):
            return
        for parameter, argument in zip(
            callee.type.argument_types(), call.get_arguments(), strict=False
        ):
            pointed = _pointed_to(parameter)
            kind = _pointee_kind(argument) if pointed is not None else None
            if pointed is not None and kind is not None:
                yield not pointed[1], kind, argument

    def program_callees(self, code: Cursor) -> set[str]:
        """The functions of the program (not of system headers) that ``code`` calls."""
        found: set[str] = set()
        for node in code.walk_preorder():
            callee = _callee(node) if node.kind == CK.CALL_EXPR else None
            if callee is not None and callee.location.file and not _in_system_header(callee):
                found.add(callee.get_usr())
        return found

    def collect_memory(self, function: Cursor, facts: _Memory) -> None:
        """Add ``function``'s flows between kinds of memory to ``facts`` (a store of one
        kind read from another, a library call copying from its const pointers to the
        others, an MPI call's buffers, which send and receive: every kind among them may
        fill every other), the kinds it accesses, and where it first converts a pointer
        to another type into a character pointer."""
        for node in function.walk_preorder():
            place = functools.partial(self.program.place, node)
            kind = self._memory_type(node)
            if kind is not None:
                facts.kinds.add(kind)
            assignment = self._assignment(node)
            if assignment is not None:
                targets = frozenset(self._memory_target(assignment[0]))
                reads = self._reads(assignment[1]) if targets else []
                sources = {name.removeprefix("memory ") for name, tag in reads if tag == -2}
                if sources:
                    facts.flows.append((frozenset(sources), targets, place()))
            elif node.kind == CK.CALL_EXPR:
                library = list(self._library_pointers(node))
                facts.kinds.update(kind for _, kind, _ in library)
                read = frozenset(kind for writable, kind, _ in library if not writable)
                written = frozenset(kind for writable, kind, _ in library if writable)
                if read and written:
                    facts.flows.append((read, written, place()))
                buffers = frozenset(self._mpi_buffers(node))
                if buffers:
                    facts.kinds.update(buffers)
                    facts.flows.append((buffers, buffers, place()))
            if not facts.laundering and self._launders(node):
                facts.laundering = place()

    def _mpi_buffers(self, call: Cursor) -> Iterator[str]:
        """The memory kinds of an MPI call's buffer arguments (``void *`` parameters)."""
        callee = _callee(call)
        if (
            callee is None
            or not callee.spelling.startswith(MPI_PREFIXES)
            or callee.type.kind != TypeKind.FUNCTIONPROTO
        ):
            return
        for parameter, argument in zip(
            callee.type.argument_types(), call.get_arguments(), strict=False
        ):
            pointed = _pointed_to(parameter)
            if pointed is not None and pointed[0].get_canonical().kind == TypeKind.VOID:
                kind = _pointee_kind(argument)
                if kind is not None:
                    yield kind

    def _launders(self, node: Cursor) -> bool:
        """Whether ``node`` converts a pointer to another type (or a ``void *`` that is not
        fresh memory) into a character pointer, through which any type can be read."""
        if node.kind not in _CAST_KINDS:
            return False
        result = node.type.get_canonical()
        operand = _children(node)
        if result.kind != TypeKind.POINTER or not operand:
            return False
        if _memory_kind(result.get_pointee()) not in ANY_KIND - {"void"}:
            return False
        source = _pointee_kind(operand[-1])
        if source is None or source in ANY_KIND - {"void"}:
            return False
        return not (source == "void" and _fresh_or_null(operand[-1]))

    def _memory_reason(self, body: Cursor) -> str:
        """Why the memory the body writes (itself, through the program's functions it
        calls, or filled from it by stores, copies and MPI calls) may change the trace:
        read anywhere in the program's files in a condition, an MPI size or count array,
        or an allocation's size, directly or through the values computed from it
        (:meth:`judge`, each function as a whole); empty where it cannot."""
        facts = self.program.memory
        written = self.memory_writes(body)
        pending, seen = sorted(self.program_callees(body)), set()
        while pending:
            usr = pending.pop()
            if usr not in seen:
                seen.add(usr)
                for kind, where in facts.writes.get(usr, {}).items():
                    written.setdefault(kind, where)
                pending.extend(sorted(facts.calls.get(usr, set())))
        if not written:
            return ""
        _, failures = self.program._all()
        if failures:
            where = written[sorted(written)[0]]
            return f"its body writes {where}, whose readers cannot all be found: {failures[0]}"
        changed = True
        while changed:
            changed = False
            for sources, targets, place in facts.flows:
                origins = [written[kind] for kind in sorted(sources) if kind in written]
                for kind in sorted(targets - written.keys()) if origins else ():
                    written[kind] = f"{kind} memory (filled at {place} from {origins[0]})"
                    changed = True
        first = written[sorted(written)[0]]
        anything = "void" in written or (facts.laundering and "char" in written)
        for kind in sorted(facts.kinds) if anything else ():
            written.setdefault(kind, f"{kind} memory (any type: {first})")
        if facts.laundering:
            converted = f"pointers are converted to char pointers at {facts.laundering}"
            written.setdefault("char", f"char memory (any type where {converted}: {first})")
        seed = {_memory_key(kind): f"{where}," for kind, where in written.items()}
        trail = _Trail(self.program)
        for analysis, function in facts.functions:
            reason = analysis.judge(seed, None, function, trail)
            if reason:
                place = self.program.place(function)
                return f"its body writes memory read in {function.spelling} ({place}): {reason}"
        return ""

    def _call_writes(self, call: Cursor) -> list[Cursor]:
        """Objects a call may modify: a non-const method's receiver, arguments bound to
        non-const references."""
        found: list[Cursor] = []
        children = _children(call)
        callee = call.referenced
        if children and children[0].kind == CK.MEMBER_REF_EXPR and callee is not None:
            receiver = _children(children[0])
            if (
                receiver
                and callee.kind == CK.CXX_METHOD
                and not callee.is_const_method()
                and not callee.is_static_method()
            ):
                found.append(receiver[0])
        if callee is not None and callee.type.kind == TypeKind.FUNCTIONPROTO:
            parameters = list(callee.type.argument_types())
            arguments = [c for c in children if c.kind != CK.MEMBER_REF_EXPR]
            arguments = arguments[-len(parameters) :] if parameters else []
            for parameter, argument in zip(parameters, arguments, strict=False):
                if (
                    parameter.kind in (TypeKind.LVALUEREFERENCE, TypeKind.RVALUEREFERENCE)
                    and not parameter.get_pointee().is_const_qualified()
                ):
                    found.append(argument)
        return found

    def _reads(self, expression: Cursor) -> list[tuple[str, int]]:
        """Variables read by value in ``expression``: not under ``&`` or ``sizeof``, not
        array names; the results of the functions it calls (:func:`_call_key`); and the
        memory it reads (:func:`_memory_key`): through pointers, subscripts and members of
        pointed-to structs, and what library calls read through their pointer arguments."""
        found: list[tuple[str, int]] = []

        def walk(node: Cursor) -> None:
            if node.kind == CK.CXX_UNARY_EXPR:  # sizeof, alignof: nothing is read
                return
            if node.kind == CK.UNARY_OPERATOR:
                tokens = self.source.tokens_in(node.extent.start.offset, node.extent.end.offset)
                if tokens and tokens[0].spelling == "&":
                    return
            kind = self._memory_type(node)
            if kind is not None:
                found.append(_memory_key(kind))
            if node.kind == CK.CALL_EXPR and node.referenced is not None:
                found.append(_call_key(node.referenced))
                found.extend(_memory_key(kind) for _, kind, _ in self._library_pointers(node))
            if node.kind == CK.DECL_REF_EXPR and node.referenced is not None:
                variable = node.referenced
                if variable.kind in (
                    CK.VAR_DECL,
                    CK.PARM_DECL,
                ) and variable.type.get_canonical().kind not in (
                    TypeKind.CONSTANTARRAY,
                    TypeKind.INCOMPLETEARRAY,
                ):
                    found.append(_key(variable))
            for child in node.get_children():
                walk(child)

        walk(expression)
        return found

    def _addressed(self, expression: Cursor) -> Cursor | None:
        """The variable of an ``&x`` argument, else None."""
        node = strip(expression)
        if node.kind != CK.UNARY_OPERATOR:
            return None
        tokens = self.source.tokens_in(node.extent.start.offset, node.extent.end.offset)
        operand = _children(node)
        if not tokens or tokens[0].spelling != "&" or not operand:
            return None
        return self._root(operand[0])

    def _outside(self, body: Cursor | None, function: Cursor) -> Iterator[Cursor]:
        """Nodes of the function outside the loop's body (the loop's header included)."""

        def walk(node: Cursor) -> Iterator[Cursor]:
            if body is not None and node == body:
                return
            yield node
            for child in node.get_children():
                yield from walk(child)

        yield from walk(function)

    def _propagate(
        self, tainted: dict[tuple[str, int], str], body: Cursor | None, function: Cursor
    ) -> tuple[dict[tuple[str, int], str], str]:
        """``tainted`` (variable -> how it depends on the body) grown by the variables
        assigned or initialised from it outside the body, and by the variables whose
        address an MPI call receives into beside a tainted one's (``MPI_Allreduce(&local,
        &total, ...)``: the reduced value depends on the skipped bodies too), until nothing
        changes; and the reason to refuse where it reaches a variable that outlives the
        function."""
        flows: list[tuple[Cursor, list[tuple[str, int]]]] = []
        for node in self._outside(body, function):
            assignment = self._assignment(node)
            if assignment is not None:
                variable = self._root(assignment[0])
                if variable is not None:
                    flows.append((variable, self._reads(assignment[1])))
            elif node.kind == CK.VAR_DECL:
                values = [c for c in _children(node) if c.kind != CK.TYPE_REF]
                if values:
                    flows.append((node, self._reads(values[-1])))
            elif node.kind == CK.CALL_EXPR and node.spelling.startswith(MPI_PREFIXES):
                addressed = [v for a in node.get_arguments() if (v := self._addressed(a))]
                for variable in addressed:
                    others = [_key(other) for other in addressed if other != variable]
                    flows.append((variable, others))
        changed = True
        while changed:
            changed = False
            for variable, reads in flows:
                key = _key(variable)
                sources = [tainted[k] for k in reads if k in tainted]
                if key not in tainted and sources:
                    origin = sources[0].split(",")[0]
                    tainted[key] = f"{variable.spelling}, computed from {origin},"
                    escape = _escape(variable)
                    if escape:
                        return tainted, f"{tainted[key]} is {escape}"
                    changed = True
        return tainted, ""

    def _use_reason(
        self,
        tainted: dict[tuple[str, int], str],
        body: Cursor | None,
        function: Cursor,
        trail: _Trail,
    ) -> str:
        """The first use outside the loop that skipping bodies could change: a value
        returned is followed into the function's callers, one passed to a function of the
        program into that function (:class:`_Program`)."""
        if not tainted:
            return ""

        def hit(expression: Cursor) -> str | None:
            for key in self._reads(expression):
                if key in tainted:
                    return tainted[key]
            return None

        for node in self._outside(body, function):
            line = node.location.line
            parts = _children(node)
            if node.kind in CONDITION_PARENTS and parts:
                conditions = parts[:-1] if node.kind != CK.DO_STMT else parts[1:]
                for condition in conditions:
                    if condition.kind.is_statement() and condition.kind != CK.DECL_STMT:
                        continue
                    name = hit(condition)
                    if name:
                        return f"{name} decides the branch at line {line}"
            elif node.kind == CK.CONDITIONAL_OPERATOR and parts:
                name = hit(parts[0])
                if name:
                    return f"{name} decides the ?: at line {line}"
            elif node.kind == CK.BINARY_OPERATOR and len(parts) == 2:
                index = self.source.first_at(parts[0].extent.end.offset)
                if index < len(self.source.tokens) and self.source.tokens[index].spelling in (
                    "&&",
                    "||",
                ):
                    name = hit(parts[0]) or hit(parts[1])
                    if name:
                        return f"{name} decides the && or || at line {line}"
            elif node.kind == CK.RETURN_STMT and parts:
                name = hit(parts[0])
                if name:
                    reason = self.program.follow_return(function, name, line, trail)
                    if reason:
                        return reason
            elif node.kind == CK.CALL_EXPR:
                reason = self._call_use(node, hit, tainted, trail)
                if reason:
                    return reason
        return ""

    def _call_use(
        self,
        call: Cursor,
        hit: Callable[[Cursor], str | None],
        tainted: dict[tuple[str, int], str],
        trail: _Trail,
    ) -> str:
        callee = _callee(call)
        if callee is None:
            return ""
        name = callee.spelling
        line = call.location.line
        if name.startswith(MPI_PREFIXES):
            for argument in _children(call)[1:]:
                variable = hit(argument)
                if variable:
                    return f"{variable} is an argument of {name} (line {line})"
            return self._size_array_use(call, callee, tainted)
        if name in ALLOCATION_CALLS:
            for argument in call.get_arguments():
                variable = hit(argument)
                if variable:
                    return f"{variable} decides the size {name} allocates (line {line})"
        if _in_system_header(callee):
            return ""
        for index, argument in enumerate(call.get_arguments()):
            variable = hit(argument)
            if variable:
                reason = self.program.follow_argument(self, callee, index, variable, line, trail)
                if reason:
                    return reason
        return ""

    def _size_array_use(
        self, call: Cursor, callee: Cursor, tainted: dict[tuple[str, int], str]
    ) -> str:
        """Whether an MPI call reads tainted memory as an array of counts, displacements
        or the like: an argument for a pointer-to-const parameter that is not a buffer
        (``const int sendcounts[]`` of ``MPI_Alltoallv``; buffers are ``const void *``)."""
        if callee.type.kind != TypeKind.FUNCTIONPROTO:
            return ""
        for parameter, argument in zip(
            callee.type.argument_types(), call.get_arguments(), strict=False
        ):
            pointed = _pointed_to(parameter)
            if pointed is None or not pointed[1]:
                continue
            if pointed[0].get_canonical().kind == TypeKind.VOID:
                continue
            variable = self._addressed(argument)
            kind = _pointee_kind(argument)
            for key in (_key(variable) if variable else None, kind and _memory_key(kind)):
                if key in tainted:
                    return (
                        f"{tainted[key]} is a count or displacement array of "
                        f"{callee.spelling} (line {call.location.line})"
                    )
        return ""


_FUNCTION_KINDS = {
    CK.FUNCTION_DECL,
    CK.CXX_METHOD,
    CK.CONSTRUCTOR,
    CK.DESTRUCTOR,
    CK.FUNCTION_TEMPLATE,
    CK.LAMBDA_EXPR,
}
