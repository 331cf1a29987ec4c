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
    profile's files (:class:`~perfcast.csource.program.Program`; every file is parsed,
    also those the current compile step does not build, since ``make`` compiles one file
    per step) taints the call's value there. The rule is refused when the callers cannot
    all be found: the function is referred to other than by a direct call (its address
    taken, a function pointer), is a virtual method, has no call in the profile's files
    (``main``, a callback), or a profile file does not parse;
  - received beside it by an MPI call (``MPI_Allreduce(&local, &total, ...)``: every
    ``&y`` argument of a call that also has a tainted ``&x``), the received variable is
    followed too: a convergence test on a reduced residual decides control flow.

  Used only as MPI buffer contents (``&x``), printed, or stored through a pointer (a global
  or static variable is refused, above), the value is harmless. The search stops at
  :data:`~perfcast.csource.verdicts.MAX_FOLLOW_DEPTH` calls (refused beyond); a function
  reached twice is judged once. A value computed from a call taints the result whatever
  the callee does with its arguments (``x = g(s)`` taints ``x``);
* it writes memory through a pointer (``*p``, ``a[i]``, ``s->f``, a member of an element,
  a library call's non-const pointer argument such as ``memcpy``'s destination), itself or
  in the program's functions it calls (transitively), and memory of that *kind* is read
  anywhere in the profile's files (:meth:`LoopSafety._memory_refusal`) in a condition
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
* it is written inside a macro, carries a ``#pragma`` (an OpenMP one only where the file is
  compiled with ``-fopenmp``: without it the compiler ignores the pragma), sits in a
  ``constexpr`` function, or is nested in a loop the rule already covers (outermost eligible
  loops only).

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

import re
from dataclasses import dataclass, replace

from clang.cindex import Cursor, CursorKind

from perfcast.csource.cursors import ReadKey, children, refusal_at
from perfcast.csource.effects import Effects
from perfcast.csource.memory import memory_key
from perfcast.csource.memorywrites import MemoryWrites
from perfcast.csource.program import Program
from perfcast.csource.search import Search, escape
from perfcast.csource.sourcefile import SourceFile
from perfcast.csource.syntax import LOOP_KINDS, Token
from perfcast.csource.verdicts import Hop, Reason, Refusal, Step

CK = CursorKind


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
    overridden: Refusal | None = None
    """Where the user vouched for the loop (``perfcast build --threshold-trust``): why the
    rule would otherwise have refused it, a use of the body's results it did not follow."""


class LoopSafety:
    """The rule's verdict on each loop of one program: the loop as written, then what its
    body does (:class:`~perfcast.csource.effects.Effects`), then where the values and the
    memory it writes are used (:class:`~perfcast.csource.search.Search`)."""

    def __init__(self, program: Program):
        self.program = program
        self.effects = Effects(program)
        self.memory = MemoryWrites(program)

    def check(
        self, file: SourceFile, line: int, kind: str, *, trusted: bool = False
    ) -> Refusal | Span:
        """The rule's verdict on the ``kind`` loop (``for``, ``while``, ``do``,
        ``range-for``) at ``line`` of ``file``: why it may not be shortened, or where the
        rewrite inserts its calls.

        A ``trusted`` loop is one the user vouches for: that the body's results steer no
        later control flow, MPI size or allocation (dPerf asked the user which loops the
        rule takes). Its data flow is not held against it; what the body does itself is:
        MPI calls, I/O, exits and calls the analysis cannot see would change the trace
        whatever the results are, and the loop as written must be one the rewrite can take."""
        where = Refusal(Reason.NO_LOOP, file.path, line, subject=kind)
        found = [
            (node, function)
            for node, function in file.loops.get(line, [])
            if LOOP_KINDS[node.kind] == kind
        ]
        if not found and file.openmp and _pragma_before(file, line) == "omp":
            # libclang shows no children of an OpenMP directive: the loop is under it
            return replace(where, reason=Reason.PRAGMA)
        if len(found) != 1:
            return where if not found else replace(where, reason=Reason.SEVERAL_LOOPS)
        cursor, function = found[0]
        keyword = "for" if kind == "range-for" else kind
        if file.source.spelling_at(cursor.extent.start.offset) != keyword:
            return refusal_at(Reason.MACRO, cursor)
        if _has_pragma(file, cursor):
            return refusal_at(Reason.PRAGMA, cursor)
        if any(t.spelling == "constexpr" for t in _function_head(file, function)):
            return refusal_at(Reason.CONSTEXPR, function)
        parts = children(cursor)
        body = parts[0] if kind == "do" else parts[-1]
        # a range-for's loop variable is initialised per element by implicit calls
        # (operator*, operator++); only its range expression is the header proper
        header = [
            c for c in parts if c != body and not (kind == "range-for" and c.kind == CK.VAR_DECL)
        ]
        written = file.accesses.written_variables(body, cursor)
        refusal = self.effects.body_refusal(file, body) or self._header_refusal(
            file, cursor, body, header, written
        )
        if refusal is not None:
            return refusal
        flow = self._flow_refusal(file, body, function, written)
        if flow is not None and not trusted:
            return flow
        return Span(
            cursor.extent.start.offset,
            body.extent.start.offset,
            file.source.statement_end(body),
            file.source.statement_end(cursor),
            overridden=flow,
        )

    def _header_refusal(
        self,
        file: SourceFile,
        loop: Cursor,
        body: Cursor,
        header: list[Cursor],
        written: dict[ReadKey, Cursor],
    ) -> Refusal | None:
        """Whether the loop's own header reads what the body writes (``written``: the
        variables it writes) or calls a function: the trip count would then depend on the
        bodies the rule skips."""
        accesses = file.accesses
        memory_types = self.memory.of(file, body).keys()
        header_reads = {read for part in header for read in accesses.reads(part)}
        for read in header_reads & written.keys():
            return refusal_at(Reason.HEADER_READS, loop, subject=written[read].spelling)
        for part in header:
            for node in part.walk_preorder():
                if node.kind == CK.CALL_EXPR and node.referenced is not None:
                    return refusal_at(Reason.HEADER_CALLS, node, subject=node.spelling)
                if accesses.memory_type(node) in memory_types:
                    return refusal_at(Reason.HEADER_READS_MEMORY, node)
        return None

    def _flow_refusal(
        self, file: SourceFile, body: Cursor, function: Cursor, written: dict[ReadKey, Cursor]
    ) -> Refusal | None:
        """Whether what the body writes (``written``: the variables declared outside the
        loop) reaches control flow, MPI sizes or the result outside the loop (its own
        header is :meth:`_header_refusal`'s)."""
        for variable in written.values():
            escapes = escape(variable)
            if escapes is not None:
                return refusal_at(escapes, variable, subject=variable.spelling)
        described = {read: f"{v.spelling}, written in its body," for read, v in written.items()}
        scalars = Search(self.program).judge(file, described, body, function)
        return scalars or self._memory_refusal(file, body)

    def _memory_refusal(self, file: SourceFile, body: Cursor) -> Refusal | None:
        """Why the memory the body writes (itself, through the program's functions it
        calls, or filled from it by stores, copies and MPI calls) may change the trace:
        read anywhere in the program's files in a condition, an MPI size or count array,
        or an allocation's size, directly or through the values computed from it
        (:meth:`~perfcast.csource.search.Search.judge`, each function as a whole); None
        where it cannot."""
        written = self.memory.reached(file, body)
        if isinstance(written, Refusal):
            return written
        if not written:
            return None
        seed = {memory_key(kind): f"{where}," for kind, where in written.items()}
        search = Search(self.program)
        for reader, function in self.memory.facts.functions:
            refusal = search.judge(reader, seed, None, function)
            if refusal is not None:
                place = self.program.place(function)
                return refusal.after(Hop(Step.MEMORY_READ, function.spelling, place=place))
        return None


def _has_pragma(file: SourceFile, cursor: Cursor) -> bool:
    """A ``#pragma`` the compiler obeys stands right before the loop. An OpenMP one in a
    file compiled without OpenMP does not count: the compiler ignores it, so the loop runs
    as written and the rewrite (which puts the loop in a block) changes nothing it means.
    Under OpenMP a worksharing loop must stay a canonical ``for`` after its pragma."""
    pragma = _pragma_before(file, cursor.extent.start.line)
    return pragma is not None and (pragma != "omp" or file.openmp)


def _pragma_before(file: SourceFile, line: int) -> str | None:
    """The first word after ``#pragma`` on the last non-blank line before ``line`` (``omp``,
    ``GCC``, ``""``), or None where that line is no pragma."""
    previous = next((text for text in reversed(file.lines[: line - 1]) if text.strip()), "")
    pragma = re.match(r"\s*#\s*pragma\s*(\w*)", previous)
    return None if pragma is None else pragma.group(1)


def _function_head(file: SourceFile, function: Cursor) -> list[Token]:
    body = [c for c in children(function) if c.kind == CK.COMPOUND_STMT]
    end = body[-1].extent.start.offset if body else function.extent.end.offset
    return file.source.tokens_in(function.extent.start.offset, end)
