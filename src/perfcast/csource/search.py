"""Where values that depend on a loop's skipped bodies are used, across functions and files.

A value the body computes (a variable it writes, memory of a kind it writes) is harmless
until it decides control flow, an MPI call's sizes or peers, or an allocation's size. The
search grows the set of such values by assignment and by MPI reductions within a function,
and follows them across calls: into the callers of a function that returns one, into the
parameter of a function one is passed to. Where the callers or the callee cannot all be
seen, it refuses rather than guesses.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from clang import cindex
from clang.cindex import Cursor, CursorKind, TypeKind

from perfcast.csource.cursors import (
    MPI_PREFIXES,
    ReadKey,
    call_key,
    callee,
    children,
    in_system_header,
    is_virtual,
    key,
    refusal_at,
)
from perfcast.csource.memory import ALLOCATION_CALLS, memory_key, pointed_to, pointee_kind
from perfcast.csource.program import Program
from perfcast.csource.sourcefile import SourceFile
from perfcast.csource.syntax import FRAME_KINDS
from perfcast.csource.verdicts import MAX_FOLLOW_DEPTH, Hop, Reason, Refusal, Step

CK = CursorKind

CONDITION_PARENTS = {CK.IF_STMT, CK.WHILE_STMT, CK.DO_STMT, CK.FOR_STMT, CK.SWITCH_STMT}

Tainted = dict[ReadKey, str]
"""What depends on the skipped bodies (variable, call or memory key), each with how: the
subject of the refusal where it is used (``m, computed from s,``)."""


def escape(variable: Cursor) -> Reason | None:
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
"""A value computed from the body stored where :func:`escape` says it outlives the call."""


class Search:
    """One loop's search through functions: what has been followed already (a recursion or
    a function reached twice is judged once) and how many calls deep it is."""

    def __init__(
        self, program: Program, visited: set[tuple[str, ...]] | None = None, depth: int = 0
    ):
        self.program = program
        self.visited = set() if visited is None else visited
        self.depth = depth

    def deeper(self) -> Search:
        return Search(self.program, self.visited, self.depth + 1)

    def judge(
        self, file: SourceFile, tainted: Tainted, body: Cursor | None, function: Cursor
    ) -> Refusal | None:
        """Why the values in ``tainted`` may change the trace, read in ``function`` (of
        ``file``) outside ``body`` (all of it when None) and followed into callers and
        callees; None where they cannot."""
        grown, escaped = _propagate(file, dict(tainted), body, function)
        return escaped or self._use_refusal(file, grown, body, function)

    def _use_refusal(
        self, file: SourceFile, tainted: Tainted, body: Cursor | None, function: Cursor
    ) -> Refusal | None:
        """The first use outside the loop that skipping bodies could change: a value
        returned is followed into the function's callers, one passed to a function of the
        program into that function."""
        if not tainted:
            return None

        def hit(expression: Cursor) -> str | None:
            for read in file.accesses.reads(expression):
                if read in tainted:
                    return tainted[read]
            return None

        def decides(node: Cursor, subject: str | None, what: str) -> Refusal | None:
            if subject is None:
                return None
            return refusal_at(Reason.DECIDES_BRANCH, node, subject=subject, target=what)

        for node in _outside(body, function):
            parts = children(node)
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
                if file.source.spelling_at(parts[0].extent.end.offset) in ("&&", "||"):
                    subject = hit(parts[0]) or hit(parts[1])
                    refusal = decides(node, subject, "the && or ||")
            elif node.kind == CK.RETURN_STMT and parts:
                subject = hit(parts[0])
                if subject:
                    refusal = self._into_callers(function, subject, node)
            elif node.kind == CK.CALL_EXPR:
                refusal = self._call_use(file, node, hit, tainted)
            if refusal is not None:
                return refusal
        return None

    def _call_use(
        self,
        file: SourceFile,
        call: Cursor,
        hit: Callable[[Cursor], str | None],
        tainted: Tainted,
    ) -> Refusal | None:
        called = callee(call)
        if called is None:
            return None
        name = called.spelling
        if name.startswith(MPI_PREFIXES):
            for argument in children(call)[1:]:
                variable = hit(argument)
                if variable:
                    return refusal_at(Reason.MPI_ARGUMENT, call, subject=variable, target=name)
            return _size_array_use(file, call, called, tainted)
        if name in ALLOCATION_CALLS:
            for argument in call.get_arguments():
                variable = hit(argument)
                if variable:
                    return refusal_at(Reason.ALLOCATION_SIZE, call, subject=variable, target=name)
        if in_system_header(called):
            return None
        for index, argument in enumerate(call.get_arguments()):
            variable = hit(argument)
            if variable:
                refusal = self._into_callee(file, call, called, index, variable)
                if refusal is not None:
                    return refusal
        return None

    def _into_callers(self, function: Cursor, what: str, at: Cursor) -> Refusal | None:
        """Why ``function`` returning ``what`` (the return statement ``at``) may change the
        trace, judged in every caller; None where no caller can be changed by it."""
        name = function.spelling

        def refuse(reason: Reason, target: str = "", note: str = "") -> Refusal:
            return refusal_at(reason, at, subject=what, target=target, note=note)

        if is_virtual(function):
            return refuse(Reason.RETURNED_BY_VIRTUAL)
        if self.depth >= MAX_FOLLOW_DEPTH:
            return refuse(Reason.CALLERS_TOO_DEEP)
        usr = function.get_usr()
        if ("return", usr) in self.visited:
            return None
        self.visited.add(("return", usr))
        _, failures = self.program.all_files()
        if failures:
            return refuse(Reason.CALLERS_NOT_PARSED, name, failures[0])
        calls, references = self.program.index.calls, self.program.index.references
        if usr in references:
            return refuse(Reason.REFERRED_TO, name, references[usr])
        sites = calls.get(usr, [])
        if not sites:
            return refuse(Reason.NO_CALLER, name)
        seed = {call_key(function): f"{name}'s result"}
        for site in sites:
            place = self.program.place(site.call)
            if site.function is None:
                return refuse(Reason.RETURNED_OUTSIDE_FUNCTION, note=place)
            visit = ("caller", usr, site.function.get_usr())
            if visit in self.visited:
                continue
            self.visited.add(visit)
            refusal = self.deeper().judge(site.file, seed, None, site.function)
            if refusal is not None:
                caller = site.function.spelling
                return refusal.after(Hop(Step.RETURN, caller, at.location.line, what, place))
        return None

    def _into_callee(
        self, file: SourceFile, call: Cursor, called: Cursor, index: int, what: str
    ) -> Refusal | None:
        """Why passing ``what`` as argument ``index`` of ``called`` (in ``call``) may
        change the trace, judged in the callee's definition (in ``file`` or another profile
        file)."""
        name = called.spelling

        def refuse(reason: Reason, note: str = "") -> Refusal:
            return refusal_at(reason, call, subject=what, target=name, note=note)

        if called.is_definition():
            definition = (file, called)
        else:
            found = self.program.index.definitions.get(called.get_usr())
            if found is None:
                return refuse(Reason.PASSED_TO_UNSEEN, self.program.missing())
            definition = found
        if is_virtual(called):
            return refuse(Reason.PASSED_TO_VIRTUAL)
        where, function = definition
        parameters = [c for c in children(function) if c.kind == CK.PARM_DECL]
        if index >= len(parameters):
            return refuse(Reason.VARIADIC_ARGUMENT)
        if self.depth >= MAX_FOLLOW_DEPTH:
            return refuse(Reason.CALLEES_TOO_DEEP)
        visit = ("argument", called.get_usr(), str(index))
        if visit in self.visited:
            return None
        self.visited.add(visit)
        parameter = parameters[index]
        seed = {key(parameter): f"{parameter.spelling}, the parameter of {name} it is passed to,"}
        refusal = self.deeper().judge(where, seed, None, function)
        if refusal is not None:
            place = self.program.place(function)
            return refusal.after(Hop(Step.ARGUMENT, name, call.location.line, what, place))
        return None


def _outside(body: Cursor | None, function: Cursor) -> Iterator[Cursor]:
    """Nodes of the function outside the loop's body (the loop's header included)."""

    def walk(node: Cursor) -> Iterator[Cursor]:
        if body is not None and node == body:
            return
        yield node
        for child in node.get_children():
            yield from walk(child)

    yield from walk(function)


def _propagate(
    file: SourceFile, tainted: Tainted, body: Cursor | None, function: Cursor
) -> tuple[Tainted, Refusal | None]:
    """``tainted`` grown by the variables assigned or initialised from it outside the body,
    and by the variables whose address an MPI call receives into beside a tainted one's
    (``MPI_Allreduce(&local, &total, ...)``: the reduced value depends on the skipped
    bodies too), until nothing changes; and the refusal where it reaches a variable that
    outlives the function."""
    accesses = file.accesses
    flows: list[tuple[Cursor, list[ReadKey]]] = []
    for node in _outside(body, function):
        assignment = accesses.assignment(node)
        if assignment is not None:
            variable = accesses.root(assignment[0])
            if variable is not None:
                flows.append((variable, accesses.reads(assignment[1])))
        elif node.kind == CK.VAR_DECL:
            values = [c for c in children(node) if c.kind != CK.TYPE_REF]
            if values:
                flows.append((node, accesses.reads(values[-1])))
        elif node.kind == CK.CALL_EXPR and node.spelling.startswith(MPI_PREFIXES):
            addressed = [v for a in node.get_arguments() if (v := accesses.addressed(a))]
            for variable in addressed:
                others = [key(other) for other in addressed if other != variable]
                flows.append((variable, others))
    changed = True
    while changed:
        changed = False
        for variable, reads in flows:
            written = key(variable)
            sources = [tainted[k] for k in reads if k in tainted]
            if written not in tainted and sources:
                origin = sources[0].split(",")[0]
                tainted[written] = f"{variable.spelling}, computed from {origin},"
                escapes = escape(variable)
                if escapes is not None:
                    return tainted, refusal_at(STORED[escapes], variable, subject=tainted[written])
                changed = True
    return tainted, None


def _size_array_use(
    file: SourceFile, call: Cursor, called: Cursor, tainted: Tainted
) -> Refusal | None:
    """Whether an MPI call reads tainted memory as an array of counts, displacements or
    the like: an argument for a pointer-to-const parameter that is not a buffer (``const
    int sendcounts[]`` of ``MPI_Alltoallv``; buffers are ``const void *``)."""
    if called.type.kind != TypeKind.FUNCTIONPROTO:
        return None
    for parameter, argument in zip(
        called.type.argument_types(), call.get_arguments(), strict=False
    ):
        pointed = pointed_to(parameter)
        if pointed is None or not pointed[1]:
            continue
        if pointed[0].get_canonical().kind == TypeKind.VOID:
            continue
        variable = file.accesses.addressed(argument)
        kind = pointee_kind(argument)
        for read in (key(variable) if variable else None, kind and memory_key(kind)):
            if read in tainted:
                return refusal_at(
                    Reason.MPI_COUNT_ARRAY, call, subject=tainted[read], target=called.spelling
                )
    return None
