"""Which kinds of memory a loop's body writes, and which further kinds that fills.

A body writes memory through pointers itself and in the program's functions it calls;
stores, library copies and MPI calls then carry what it wrote into memory of other kinds
(:mod:`~perfcast.csource.memory` names the kinds). Every kind so reached, with where it
was written or filled, is what the loop analysis then seeks the readers of, in every
function of the program.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass, field

from clang.cindex import Cursor, CursorKind, TypeKind

from perfcast.csource.accesses import library_pointers
from perfcast.csource.cursors import MPI_PREFIXES, callee, children, program_callees, refusal_at
from perfcast.csource.memory import (
    ANY_KIND,
    CAST_KINDS,
    fresh_or_null,
    memory_kind,
    pointed_to,
    pointee_kind,
)
from perfcast.csource.program import Program
from perfcast.csource.sourcefile import SourceFile
from perfcast.csource.syntax import strip
from perfcast.csource.verdicts import Reason, Refusal

CK = CursorKind


@dataclass
class MemoryFacts:
    """What the memory rule needs from every file of the profile."""

    functions: list[tuple[SourceFile, Cursor]] = field(default_factory=list)
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


class MemoryWrites:
    """The memory written by the loops of one program, told apart by kind."""

    def __init__(self, program: Program):
        self.program = program

    def of(self, file: SourceFile, code: Cursor) -> dict[str, str]:
        """The kinds of memory ``code`` writes through pointers, subscripts and members of
        pointed-to structs (a member's write also writes its struct, a struct's its
        members), and through the non-const pointer arguments of library calls
        (``memcpy``'s destination), each with where."""
        found: dict[str, str] = {}
        for target in file.accesses.write_targets(code):
            where = self._describe(strip(target))
            for kind in sorted(file.accesses.memory_target(target)):
                found.setdefault(kind, where)
        for node in code.walk_preorder():
            if node.kind == CK.CALL_EXPR:
                for writable, kind, argument in library_pointers(node):
                    if writable:
                        described = f"{kind} memory (written by {node.spelling} at "
                        found.setdefault(kind, described + f"{self.program.place(argument)})")
        return found

    def _describe(self, node: Cursor) -> str:
        """``uint32_t memory (written at samplesort.c:22)``: no comma, so that the
        propagation's ``computed from`` names it whole."""
        spelling = node.type.spelling.replace(",", ";")
        return f"{spelling} memory (written at {self.program.place(node)})"

    def reached(self, file: SourceFile, body: Cursor) -> dict[str, str] | Refusal:
        """Every kind of memory the body's writes reach, each with where it was written
        or filled: written by the body or the program's functions it calls
        (transitively), filled from those by stores, copies and MPI calls, and every kind
        where the body writes ``void`` memory or character memory that may be any type.
        A refusal where a profile file does not parse (its readers could be missed)."""
        facts = self.facts
        written = self.of(file, body)
        pending, seen = sorted(program_callees(body)), set()
        while pending:
            usr = pending.pop()
            if usr not in seen:
                seen.add(usr)
                for kind, where in facts.writes.get(usr, {}).items():
                    written.setdefault(kind, where)
                pending.extend(sorted(facts.calls.get(usr, set())))
        if not written:
            return written
        _, failures = self.program.all_files()
        if failures:
            where = written[sorted(written)[0]]
            return refusal_at(Reason.READERS_NOT_PARSED, body, subject=where, note=failures[0])
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
        return written

    @functools.cached_property
    def facts(self) -> MemoryFacts:
        """Per function of every profile file the memory it writes and the functions it
        calls, the flows between kinds of memory, every kind accessed, and whether
        pointers are laundered into character pointers."""
        files, _ = self.program.all_files()
        facts = MemoryFacts()
        for file in files:
            for function in file.definitions():
                usr = function.get_usr()
                if usr in facts.writes:
                    continue  # an inline function of a header, seen in an earlier file
                facts.functions.append((file, function))
                facts.writes[usr] = self.of(file, function)
                facts.calls[usr] = program_callees(function)
                self._collect(file, function, facts)
        return facts

    def _collect(self, file: SourceFile, function: Cursor, facts: MemoryFacts) -> None:
        """Add ``function``'s flows between kinds of memory to ``facts`` (a store of one
        kind read from another, a library call copying from its const pointers to the
        others, an MPI call's buffers, which send and receive: every kind among them may
        fill every other), the kinds it accesses, and where it first converts a pointer
        to another type into a character pointer."""
        accesses = file.accesses
        for node in function.walk_preorder():
            place = functools.partial(self.program.place, node)
            kind = accesses.memory_type(node)
            if kind is not None:
                facts.kinds.add(kind)
            assignment = accesses.assignment(node)
            if assignment is not None:
                targets = frozenset(accesses.memory_target(assignment[0]))
                reads = accesses.reads(assignment[1]) if targets else []
                sources = {name.removeprefix("memory ") for name, tag in reads if tag == -2}
                if sources:
                    facts.flows.append((frozenset(sources), targets, place()))
            elif node.kind == CK.CALL_EXPR:
                library = list(library_pointers(node))
                facts.kinds.update(kind for _, kind, _ in library)
                read = frozenset(kind for writable, kind, _ in library if not writable)
                written = frozenset(kind for writable, kind, _ in library if writable)
                if read and written:
                    facts.flows.append((read, written, place()))
                buffers = frozenset(_mpi_buffers(node))
                if buffers:
                    facts.kinds.update(buffers)
                    facts.flows.append((buffers, buffers, place()))
            if not facts.laundering and _launders(node):
                facts.laundering = place()


def _mpi_buffers(call: Cursor) -> Iterator[str]:
    """The memory kinds of an MPI call's buffer arguments (``void *`` parameters)."""
    called = callee(call)
    if (
        called is None
        or not called.spelling.startswith(MPI_PREFIXES)
        or called.type.kind != TypeKind.FUNCTIONPROTO
    ):
        return
    for parameter, argument in zip(
        called.type.argument_types(), call.get_arguments(), strict=False
    ):
        pointed = pointed_to(parameter)
        if pointed is not None and pointed[0].get_canonical().kind == TypeKind.VOID:
            kind = pointee_kind(argument)
            if kind is not None:
                yield kind


def _launders(node: Cursor) -> bool:
    """Whether ``node`` converts a pointer to another type (or a ``void *`` that is not
    fresh memory) into a character pointer, through which any type can be read."""
    if node.kind not in CAST_KINDS:
        return False
    result = node.type.get_canonical()
    operand = children(node)
    if result.kind != TypeKind.POINTER or not operand:
        return False
    if memory_kind(result.get_pointee()) not in ANY_KIND - {"void"}:
        return False
    source = pointee_kind(operand[-1])
    if source is None or source in ANY_KIND - {"void"}:
        return False
    return not (source == "void" and fresh_or_null(operand[-1]))
