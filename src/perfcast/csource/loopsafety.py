"""Whether skipping a loop's bodies could change an MPI program's trace.

The threshold iteration rule (:mod:`perfcast.measure.threshold`) runs a loop's body only
until its time per iteration is stable and credits the rest; this module decides, from the
source alone, where that is safe, and returns a typed :class:`~perfcast.csource.verdicts.Refusal`
where it is not.

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
    profile's files (:class:`Program`; every file is parsed, also those the current
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
  anywhere in the profile's files (:meth:`FileAnalysis._memory_refusal`) in a condition
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
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from clang import cindex
from clang.cindex import Cursor, CursorKind, TypeKind

from perfcast.clang import find_clang
from perfcast.csource.languages import HEADER_SUFFIXES, language_of
from perfcast.csource.memory import (
    ALLOCATION_CALLS,
    ANY_KIND,
    CAST_KINDS,
    fresh_or_null,
    memory_key,
    memory_kind,
    pointed_to,
    pointee_kind,
    record_kinds,
)
from perfcast.csource.syntax import (
    ASSIGN_OPS,
    CONTAINER_KINDS,
    FRAME_KINDS,
    FUNCTION_KINDS,
    LOOP_KINDS,
    SourceText,
    Token,
    strip,
)
from perfcast.csource.verdicts import (
    MAX_FOLLOW_DEPTH,
    Hop,
    Reason,
    Refusal,
    Step,
)
from perfcast.errors import InputError

CK = CursorKind

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
CONDITION_PARENTS = {CK.IF_STMT, CK.WHILE_STMT, CK.DO_STMT, CK.FOR_STMT, CK.SWITCH_STMT}
BREAKABLE = {CK.FOR_STMT, CK.WHILE_STMT, CK.DO_STMT, CK.CXX_FOR_RANGE_STMT, CK.SWITCH_STMT}
LEAVING = {
    CK.RETURN_STMT: "return",
    CK.GOTO_STMT: "goto",
    CK.INDIRECT_GOTO_STMT: "goto",
    CK.LABEL_STMT: "a label",
    CK.CXX_THROW_EXPR: "throw",
}


@dataclass(frozen=True)
class Span:
    """Where the rewrite of a loop the rule may take inserts its calls (byte offsets)."""

    start: int
    """The loop's first byte: the rule's entry opens a block here."""
    body_start: int
    body_end: int
    """Just past the body's statement: each iteration's test wraps the body."""
    end: int
    """Just past the loop's statement, its ``;`` included: the block closes here."""


def _spread_effects(
    direct: dict[str, Refusal], calls: dict[str, set[str]], names: dict[str, str]
) -> dict[str, Refusal]:
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
                    effects[usr] = effects[callee].after(Hop(Step.CALL_IN_CALLEE, names[callee]))
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


def _at(
    reason: Reason, cursor: Cursor, *, subject: str = "", target: str = "", note: str = ""
) -> Refusal:
    """A refusal decided at ``cursor``'s place."""
    file = cursor.location.file
    path = Path(file.name).resolve() if file is not None else Path("?")
    return Refusal(reason, path, cursor.location.line, subject, target, note)


def _escape(variable: Cursor) -> Reason | None:
    """Whether a value written to ``variable`` outlives the function (whose later readers
    are not followed): :attr:`Reason.WRITES_REFERENCE` or :attr:`Reason.WRITES_GLOBAL`;
    None for a plain local variable or a by-value parameter."""
    if variable.type.kind in (TypeKind.LVALUEREFERENCE, TypeKind.RVALUEREFERENCE):
        return Reason.WRITES_REFERENCE
    if variable.kind == CK.VAR_DECL and (
        variable.semantic_parent is None
        or variable.semantic_parent.kind not in FRAME_KINDS
        or variable.storage_class == cindex.StorageClass.STATIC
    ):
        return Reason.WRITES_GLOBAL
    return None


STORED = {
    Reason.WRITES_GLOBAL: Reason.STORED_GLOBALLY,
    Reason.WRITES_REFERENCE: Reason.STORED_BY_REFERENCE,
}
"""A value computed from the body stored where :func:`_escape` says it outlives the call."""


@dataclass
class _Memory:
    """What :meth:`Program.memory` collects over all profile files for the memory rule."""

    functions: list[tuple[FileAnalysis, Cursor]] = field(default_factory=list)
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


def _call_key(callee: Cursor) -> tuple[str, int]:
    """The key under which :meth:`FileAnalysis._reads` reports a call's result: the same
    for every call of one function, in every translation unit (USRs are global)."""
    return ("call " + callee.get_usr(), -1)


def _is_virtual(function: Cursor) -> bool:
    return function.kind == CK.CXX_METHOD and bool(function.is_virtual_method())


@dataclass
class _Trail:
    """One loop's search through callers and callees: what has been followed already (a
    recursion or a function reached twice is judged once) and how deep it is."""

    program: Program
    visited: set[tuple[str, ...]] = field(default_factory=set)
    depth: int = 0

    def deeper(self) -> _Trail:
        return _Trail(self.program, self.visited, self.depth + 1)


@dataclass(frozen=True)
class _CallSite:
    analysis: FileAnalysis
    call: Cursor
    function: Cursor | None
    """The function definition the call is in; None for a call outside any function."""


@dataclass
class _Index:
    """What :meth:`Program._walk` collects over all profile files."""

    calls: dict[str, list[_CallSite]] = field(default_factory=dict)
    references: dict[str, str] = field(default_factory=dict)
    """Per function: one place it is referred to other than as a call's callee."""
    definitions: dict[str, tuple[FileAnalysis, Cursor]] = field(default_factory=dict)
    callees: set[tuple[str, int]] = field(default_factory=set)
    """The callee expressions of the calls seen, which are not such references."""
    seen: set[tuple[str, int]] = field(default_factory=set)


class Program:
    """Every file of the program (those of the taint profile), each parsed at most once and
    only when a value or a call crosses into it: a ``make`` compiles one file per step, and
    the loop of that file may return its result to a function of another.

    ``base`` is the directory file names are shown relative to; ``parse_flags`` every flag
    libclang needs to read the files as the compiler does (includes and defines of the
    compile command, the MPI wrapper's include flags).
    """

    def __init__(self, base: Path, files: Iterable[Path], parse_flags: Sequence[str]):
        self.base = base
        self.files = sorted({path for path in files if path.suffix not in HEADER_SUFFIXES})
        self.parse_flags = tuple(parse_flags)
        self._parsed: dict[Path, FileAnalysis | str] = {}

    def analysis(self, path: Path) -> FileAnalysis:
        """The file parsed; an InputError naming it where libclang cannot parse it."""
        parsed = self._parsed.get(path)
        if isinstance(parsed, FileAnalysis):
            return parsed
        analysis = FileAnalysis(path, self.parse_flags, self)
        self._parsed[path] = analysis
        return analysis

    def _all(self) -> tuple[list[FileAnalysis], list[str]]:
        """Every profile file parsed, and why each that cannot be is missing."""
        analyses, failures = [], []
        for path in self.files:
            if path not in self._parsed:
                try:
                    self._parsed[path] = FileAnalysis(path, self.parse_flags, self)
                except InputError as exc:
                    self._parsed[path] = f"{self.name(path)} cannot be parsed ({exc})"
            parsed = self._parsed[path]
            if isinstance(parsed, FileAnalysis):
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
        self, analysis: FileAnalysis, node: Cursor, function: Cursor | None, index: _Index
    ) -> None:
        if node.kind in FUNCTION_KINDS and node.is_definition():
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
            and node.referenced.kind in FUNCTION_KINDS
            and _key(node) not in index.callees
        ):
            index.references.setdefault(node.referenced.get_usr(), self.place(node))
        for child in node.get_children():
            self._walk(analysis, child, function, index)

    def follow_return(
        self, function: Cursor, what: str, at: Cursor, trail: _Trail
    ) -> Refusal | None:
        """Why ``function`` returning ``what`` (the return statement ``at``) may change the
        trace, judged in every caller; None where no caller can be changed by it."""
        name = function.spelling

        def refuse(reason: Reason, target: str = "", note: str = "") -> Refusal:
            return _at(reason, at, subject=what, target=target, note=note)

        if _is_virtual(function):
            return refuse(Reason.RETURNED_BY_VIRTUAL)
        if trail.depth >= MAX_FOLLOW_DEPTH:
            return refuse(Reason.CALLERS_TOO_DEEP)
        usr = function.get_usr()
        if ("return", usr) in trail.visited:
            return None
        trail.visited.add(("return", usr))
        _, failures = self._all()
        if failures:
            return refuse(Reason.CALLERS_NOT_PARSED, name, failures[0])
        calls, references = self._index.calls, self._index.references
        if usr in references:
            return refuse(Reason.REFERRED_TO, name, references[usr])
        sites = calls.get(usr, [])
        if not sites:
            return refuse(Reason.NO_CALLER, name)
        seed = {_call_key(function): f"{name}'s result"}
        for site in sites:
            place = self.place(site.call)
            if site.function is None:
                return refuse(Reason.RETURNED_OUTSIDE_FUNCTION, note=place)
            key = ("caller", usr, site.function.get_usr())
            if key in trail.visited:
                continue
            trail.visited.add(key)
            refusal = site.analysis.judge(seed, None, site.function, trail.deeper())
            if refusal is not None:
                caller = site.function.spelling
                return refusal.after(Hop(Step.RETURN, caller, at.location.line, what, place))
        return None

    def follow_argument(
        self,
        analysis: FileAnalysis,
        call: Cursor,
        callee: Cursor,
        index: int,
        what: str,
        trail: _Trail,
    ) -> Refusal | None:
        """Why passing ``what`` as argument ``index`` of ``callee`` (in ``call``) may change
        the trace, judged in the callee's definition (in ``analysis`` or another profile
        file)."""
        name = callee.spelling

        def refuse(reason: Reason, note: str = "") -> Refusal:
            return _at(reason, call, subject=what, target=name, note=note)

        if callee.is_definition():
            definition = (analysis, callee)
        else:
            _, failures = self._all()
            found = self._index.definitions.get(callee.get_usr())
            if found is None:
                return refuse(Reason.PASSED_TO_UNSEEN, _missing(failures))
            definition = found
        if _is_virtual(callee):
            return refuse(Reason.PASSED_TO_VIRTUAL)
        where, function = definition
        parameters = [c for c in _children(function) if c.kind == CK.PARM_DECL]
        if index >= len(parameters):
            return refuse(Reason.VARIADIC_ARGUMENT)
        if trail.depth >= MAX_FOLLOW_DEPTH:
            return refuse(Reason.CALLEES_TOO_DEEP)
        key = ("argument", callee.get_usr(), str(index))
        if key in trail.visited:
            return None
        trail.visited.add(key)
        parameter = parameters[index]
        seed = {_key(parameter): f"{parameter.spelling}, the parameter of {name} it is passed to,"}
        refusal = where.judge(seed, None, function, trail.deeper())
        if refusal is not None:
            place = self.place(function)
            return refusal.after(Hop(Step.ARGUMENT, name, call.location.line, what, place))
        return None

    @functools.cached_property
    def _effects(self) -> tuple[dict[str, Refusal], frozenset[str]]:
        """Per function (USR) of any profile file: why calling it would change the trace,
        by a fixed point over the calls of all the files, a call of a function that no
        profile file defines counting as such a reason, since what it does is not visible;
        and the functions the files define."""
        analyses, failures = self._all()
        direct: dict[str, Refusal] = {}
        calls: dict[str, set[str]] = {}
        names: dict[str, str] = {}
        first_call: dict[tuple[str, str], Cursor] = {}
        for analysis in analyses:
            for function in analysis.definitions():
                usr = function.get_usr()
                if usr in calls:
                    continue  # an inline function of a header, seen in an earlier file
                calls[usr] = set()
                for node in function.walk_preorder():
                    if node.kind != CK.CALL_EXPR:
                        continue
                    effect = analysis.local_effect(node)
                    if effect is not None and usr not in direct:
                        direct[usr] = replace(effect, in_file=self.name(effect.file))
                    callee = _callee(node)
                    if (
                        callee is not None
                        and callee.location.file is not None
                        and not _in_system_header(callee)
                    ):
                        calls[usr].add(callee.get_usr())
                        names.setdefault(callee.get_usr(), callee.spelling)
                        first_call.setdefault((usr, callee.get_usr()), node)
        for usr, callees in calls.items():
            for callee in sorted(callees - calls.keys()):
                call = first_call[(usr, callee)]
                unseen = _at(
                    Reason.UNSEEN_CALLEE, call, subject=names[callee], note=_missing(failures)
                )
                direct.setdefault(usr, replace(unseen, in_file=self.name(unseen.file)))
        return _spread_effects(direct, calls, names), frozenset(calls)

    def effect_elsewhere(self, call: Cursor, callee: Cursor) -> Refusal | None:
        """What calling ``callee``, defined in another file, does that the rule cannot
        skip; None where the file defining it shows nothing such."""
        usr = callee.get_usr()
        _, failures = self._all()
        effects, defined = self._effects
        if usr not in defined:
            return _at(Reason.UNSEEN_CALLEE, call, subject=callee.spelling, note=_missing(failures))
        effect = effects.get(usr)
        return (
            None
            if effect is None
            else effect.after(Hop(Step.CALL, callee.spelling, call.location.line))
        )

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


def _missing(failures: list[str]) -> str:
    """Why a definition may have been missed: the first profile file that does not parse."""
    return f" ({failures[0]})" if failures else ""


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


class FileAnalysis:
    """One source file parsed once; the safety verdict for each of its profile loops."""

    def __init__(self, path: Path, parse_flags: Sequence[str], program: Program):
        self.path = path
        self.program = program
        builtin = find_clang().resource_dir / "include"
        args = ["-x", language_of(path), *parse_flags, "-isystem", str(builtin)]
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
                if child.kind in FUNCTION_KINDS and child.is_definition():
                    yield child
                elif child.kind in CONTAINER_KINDS:
                    yield from walk(child)

        yield from walk(self.tu.cursor)

    @functools.cached_property
    def effects(self) -> dict[str, Refusal]:
        """Per function (USR): why calling it would change the trace or the output, found
        by a fixed point over the calls within the translation unit (a call to a function of
        another file is judged by :meth:`Program.effect_elsewhere`). Computed on first use:
        a file parsed only to find callers never needs it."""
        direct: dict[str, Refusal] = {}
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

    def _call_effect(self, call: Cursor) -> Refusal | None:
        """What a call does that the rule cannot skip, judged by the callee's name and, for
        a function of another file, by that file; None for a harmless call."""
        effect = self.local_effect(call)
        if effect is not None:
            return effect
        callee = _callee(call)
        if callee is not None and not callee.is_definition() and not _in_system_header(callee):
            return self.program.effect_elsewhere(call, callee)
        return None

    def local_effect(self, call: Cursor) -> Refusal | None:
        """What a call does that the rule cannot skip, judged by the callee's name alone;
        None for a harmless call and for a function defined in another file."""
        callee = _callee(call)
        if callee is None or callee.kind not in FUNCTION_KINDS:
            if callee is None and not _children(call):
                return None  # an implicit constructor or conversion
            return _at(Reason.FUNCTION_POINTER, call)
        name = callee.spelling
        if callee.location.file is None:
            return None  # a compiler builtin (__builtin_expect, implicit declarations)
        if name.startswith(MPI_PREFIXES):
            return _at(Reason.MPI_CALL, call, subject=name)
        if name in EXIT_CALLS:
            return _at(Reason.LEAVES_PROGRAM, call, subject=name)
        if name in IO_CALLS:
            return _at(Reason.IO, call, subject=name)
        return None

    def _effect_of(self, call: Cursor) -> Refusal | None:
        effect = self._call_effect(call)
        if effect is not None:
            return effect
        callee = _callee(call)
        if callee is not None and callee.get_usr() in self.effects:
            hop = Hop(Step.CALL, callee.spelling, call.location.line)
            return self.effects[callee.get_usr()].after(hop)
        return None

    # ---- per loop -----------------------------------------------------------------------
    def check(self, line: int, kind: str) -> Refusal | Span:
        """The rule's verdict on the ``kind`` loop (``for``, ``while``, ``do``,
        ``range-for``) at ``line`` of this file: why it may not be shortened, or where the
        rewrite inserts its calls."""
        where = Refusal(Reason.NO_LOOP, self.path, line, subject=kind)
        found = [
            (node, function)
            for node, function in self.loops.get(line, [])
            if LOOP_KINDS[node.kind] == kind
        ]
        if len(found) != 1:
            return where if not found else replace(where, reason=Reason.SEVERAL_LOOPS)
        cursor, function = found[0]
        keyword = "for" if kind == "range-for" else kind
        if self.source.spelling_at(cursor.extent.start.offset) != keyword:
            return _at(Reason.MACRO, cursor)
        if self._has_pragma(cursor):
            return _at(Reason.PRAGMA, cursor)
        if any(t.spelling == "constexpr" for t in self._function_head(function)):
            return _at(Reason.CONSTEXPR, function)
        children = _children(cursor)
        body = children[0] if kind == "do" else children[-1]
        # a range-for's loop variable is initialised per element by implicit calls
        # (operator*, operator++); only its range expression is the header proper
        header = [
            c for c in children if c != body and not (kind == "range-for" and c.kind == CK.VAR_DECL)
        ]
        refusal = self._body_refusal(body) or self._flow_refusal(cursor, body, header, function)
        if refusal is not None:
            return refusal
        return Span(
            cursor.extent.start.offset,
            body.extent.start.offset,
            self.source.statement_end(body),
            self.source.statement_end(cursor),
        )

    def _has_pragma(self, cursor: Cursor) -> bool:
        lines = self.source.data[: cursor.extent.start.offset].decode(errors="replace")
        previous = [text.strip() for text in lines.splitlines()[:-1] if text.strip()]
        return bool(previous) and re.match(r"#\s*pragma\b", previous[-1]) is not None

    def _function_head(self, function: Cursor) -> list[Token]:
        body = [c for c in _children(function) if c.kind == CK.COMPOUND_STMT]
        end = body[-1].extent.start.offset if body else function.extent.end.offset
        return self.source.tokens_in(function.extent.start.offset, end)

    def _body_refusal(self, body: Cursor) -> Refusal | None:
        """MPI, I/O, early exits and unknown calls in the body."""

        def walk(node: Cursor, breakable: int) -> Refusal | None:
            kind = node.kind
            if kind == CK.BREAK_STMT and breakable == 0:
                return _at(Reason.BREAK, node)
            if kind in LEAVING:
                return _at(Reason.LEAVES_LOOP, node, subject=LEAVING[kind])
            if kind == CK.CALL_EXPR:
                effect = self._effect_of(node)
                if effect is not None:
                    return effect.after(Hop(Step.BODY))
            inner = breakable + (kind in BREAKABLE)
            for child in node.get_children():
                refusal = walk(child, inner)
                if refusal is not None:
                    return refusal
            return None

        return walk(body, 0)

    def _flow_refusal(
        self, loop: Cursor, body: Cursor, header: list[Cursor], function: Cursor
    ) -> Refusal | None:
        """Whether what the body writes reaches control flow, MPI sizes or the result."""
        written = self._writes(body, loop)
        memory_types = self.memory_writes(body).keys()
        for variable in written.values():
            escape = _escape(variable)
            if escape is not None:
                return _at(escape, variable, subject=variable.spelling)
        header_reads = {key for part in header for key in self._reads(part)}
        for key in header_reads & written.keys():
            return _at(Reason.HEADER_READS, loop, subject=written[key].spelling)
        for part in header:
            for node in part.walk_preorder():
                if node.kind == CK.CALL_EXPR and node.referenced is not None:
                    return _at(Reason.HEADER_CALLS, node, subject=node.spelling)
                if self._memory_type(node) in memory_types:
                    return _at(Reason.HEADER_READS_MEMORY, node)
        described = {key: f"{v.spelling}, written in its body," for key, v in written.items()}
        scalars = self.judge(described, body, function, _Trail(self.program))
        return scalars or self._memory_refusal(body)

    def judge(
        self,
        tainted: dict[tuple[str, int], str],
        body: Cursor | None,
        function: Cursor,
        trail: _Trail,
    ) -> Refusal | None:
        """Why the values in ``tainted`` (variable or call key -> how it depends on skipped
        bodies) may change the trace, read in ``function`` outside ``body`` (all of it
        when None) and followed into callers and callees; None where they cannot."""
        tainted, escaped = self._propagate(dict(tainted), body, function)
        return escaped or self._use_refusal(tainted, body, function, trail)

    def _memory_type(self, node: Cursor) -> str | None:
        """The type of an access through memory (``*p``, ``a[i]``, ``s->f``), else None."""
        if node.kind == CK.ARRAY_SUBSCRIPT_EXPR:
            return memory_kind(node.type)
        if node.kind == CK.UNARY_OPERATOR:
            tokens = self.source.tokens_in(node.extent.start.offset, node.extent.end.offset)
            if tokens and tokens[0].spelling == "*":
                return memory_kind(node.type)
        if node.kind == CK.MEMBER_REF_EXPR:
            inner = _children(node)
            if not inner or strip(inner[0]).type.get_canonical().kind == TypeKind.POINTER:
                return memory_kind(node.type)
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
        if self.source.spelling_at(parts[0].extent.end.offset) in ASSIGN_OPS:
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
        kinds = record_kinds(node.type)
        while self._memory_type(node) is None and node.kind == CK.MEMBER_REF_EXPR:
            kinds.add(memory_kind(node.type))
            node = strip(_children(node)[0])
        kind = self._memory_type(node)
        if kind is None:
            return set()
        kinds.add(kind)
        if node.kind == CK.MEMBER_REF_EXPR and _children(node):
            base = pointee_kind(strip(_children(node)[0]))
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
            pointed = pointed_to(parameter)
            kind = pointee_kind(argument) if pointed is not None else None
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
            pointed = pointed_to(parameter)
            if pointed is not None and pointed[0].get_canonical().kind == TypeKind.VOID:
                kind = pointee_kind(argument)
                if kind is not None:
                    yield kind

    def _launders(self, node: Cursor) -> bool:
        """Whether ``node`` converts a pointer to another type (or a ``void *`` that is not
        fresh memory) into a character pointer, through which any type can be read."""
        if node.kind not in CAST_KINDS:
            return False
        result = node.type.get_canonical()
        operand = _children(node)
        if result.kind != TypeKind.POINTER or not operand:
            return False
        if memory_kind(result.get_pointee()) not in ANY_KIND - {"void"}:
            return False
        source = pointee_kind(operand[-1])
        if source is None or source in ANY_KIND - {"void"}:
            return False
        return not (source == "void" and fresh_or_null(operand[-1]))

    def _memory_refusal(self, body: Cursor) -> Refusal | None:
        """Why the memory the body writes (itself, through the program's functions it
        calls, or filled from it by stores, copies and MPI calls) may change the trace:
        read anywhere in the program's files in a condition, an MPI size or count array,
        or an allocation's size, directly or through the values computed from it
        (:meth:`judge`, each function as a whole); None where it cannot."""
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
            return None
        _, failures = self.program._all()
        if failures:
            where = written[sorted(written)[0]]
            return _at(Reason.READERS_NOT_PARSED, body, subject=where, note=failures[0])
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
        seed = {memory_key(kind): f"{where}," for kind, where in written.items()}
        trail = _Trail(self.program)
        for analysis, function in facts.functions:
            refusal = analysis.judge(seed, None, function, trail)
            if refusal is not None:
                place = self.program.place(function)
                return refusal.after(Hop(Step.MEMORY_READ, function.spelling, place=place))
        return None

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
        memory it reads (:func:`memory_key`): through pointers, subscripts and members of
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
                found.append(memory_key(kind))
            if node.kind == CK.CALL_EXPR and node.referenced is not None:
                found.append(_call_key(node.referenced))
                found.extend(memory_key(kind) for _, kind, _ in self._library_pointers(node))
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
    ) -> tuple[dict[tuple[str, int], str], Refusal | None]:
        """``tainted`` (variable -> how it depends on the body) grown by the variables
        assigned or initialised from it outside the body, and by the variables whose
        address an MPI call receives into beside a tainted one's (``MPI_Allreduce(&local,
        &total, ...)``: the reduced value depends on the skipped bodies too), until nothing
        changes; and the refusal where it reaches a variable that outlives the
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
                    if escape is not None:
                        return tainted, _at(STORED[escape], variable, subject=tainted[key])
                    changed = True
        return tainted, None

    def _use_refusal(
        self,
        tainted: dict[tuple[str, int], str],
        body: Cursor | None,
        function: Cursor,
        trail: _Trail,
    ) -> Refusal | None:
        """The first use outside the loop that skipping bodies could change: a value
        returned is followed into the function's callers, one passed to a function of the
        program into that function (:class:`Program`)."""
        if not tainted:
            return None

        def hit(expression: Cursor) -> str | None:
            for key in self._reads(expression):
                if key in tainted:
                    return tainted[key]
            return None

        def decides(node: Cursor, subject: str | None, what: str) -> Refusal | None:
            if subject is None:
                return None
            return _at(Reason.DECIDES_BRANCH, node, subject=subject, target=what)

        for node in self._outside(body, function):
            parts = _children(node)
            refusal: Refusal | None = None
            if node.kind in CONDITION_PARENTS and parts:
                conditions = parts[:-1] if node.kind != CK.DO_STMT else parts[1:]
                for condition in conditions:
                    if condition.kind.is_statement() and condition.kind != CK.DECL_STMT:
                        continue
                    refusal = refusal or decides(node, hit(condition), "the branch")
            elif node.kind == CK.CONDITIONAL_OPERATOR and parts:
                refusal = decides(node, hit(parts[0]), "the ?:")
            elif node.kind == CK.BINARY_OPERATOR and len(parts) == 2:
                if self.source.spelling_at(parts[0].extent.end.offset) in ("&&", "||"):
                    subject = hit(parts[0]) or hit(parts[1])
                    refusal = decides(node, subject, "the && or ||")
            elif node.kind == CK.RETURN_STMT and parts:
                subject = hit(parts[0])
                if subject:
                    refusal = self.program.follow_return(function, subject, node, trail)
            elif node.kind == CK.CALL_EXPR:
                refusal = self._call_use(node, hit, tainted, trail)
            if refusal is not None:
                return refusal
        return None

    def _call_use(
        self,
        call: Cursor,
        hit: Callable[[Cursor], str | None],
        tainted: dict[tuple[str, int], str],
        trail: _Trail,
    ) -> Refusal | None:
        callee = _callee(call)
        if callee is None:
            return None
        name = callee.spelling
        if name.startswith(MPI_PREFIXES):
            for argument in _children(call)[1:]:
                variable = hit(argument)
                if variable:
                    return _at(Reason.MPI_ARGUMENT, call, subject=variable, target=name)
            return self._size_array_use(call, callee, tainted)
        if name in ALLOCATION_CALLS:
            for argument in call.get_arguments():
                variable = hit(argument)
                if variable:
                    return _at(Reason.ALLOCATION_SIZE, call, subject=variable, target=name)
        if _in_system_header(callee):
            return None
        for index, argument in enumerate(call.get_arguments()):
            variable = hit(argument)
            if variable:
                refusal = self.program.follow_argument(self, call, callee, index, variable, trail)
                if refusal is not None:
                    return refusal
        return None

    def _size_array_use(
        self, call: Cursor, callee: Cursor, tainted: dict[tuple[str, int], str]
    ) -> Refusal | None:
        """Whether an MPI call reads tainted memory as an array of counts, displacements
        or the like: an argument for a pointer-to-const parameter that is not a buffer
        (``const int sendcounts[]`` of ``MPI_Alltoallv``; buffers are ``const void *``)."""
        if callee.type.kind != TypeKind.FUNCTIONPROTO:
            return None
        for parameter, argument in zip(
            callee.type.argument_types(), call.get_arguments(), strict=False
        ):
            pointed = pointed_to(parameter)
            if pointed is None or not pointed[1]:
                continue
            if pointed[0].get_canonical().kind == TypeKind.VOID:
                continue
            variable = self._addressed(argument)
            kind = pointee_kind(argument)
            for key in (_key(variable) if variable else None, kind and memory_key(kind)):
                if key in tainted:
                    return _at(
                        Reason.MPI_COUNT_ARRAY, call, subject=tainted[key], target=callee.spelling
                    )
        return None
