"""What a piece of code reads and writes: variables, call results and kinds of memory.

Every rule of the loop analysis asks these of expressions: which variables a body writes
(assigned, incremented, address taken, bound to a non-const reference, a non-const method
called on them), which kinds of memory it stores to through pointers, and what a condition
or an argument reads. libclang does not say which operator a unary or binary expression
is, so the answers read the file's tokens too.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from clang import cindex
from clang.cindex import Cursor, CursorKind, TypeKind

from perfcast.csource.cursors import (
    MPI_PREFIXES,
    ReadKey,
    call_key,
    callee,
    children,
    in_system_header,
    key,
)
from perfcast.csource.memory import (
    memory_key,
    memory_kind,
    pointed_to,
    pointee_kind,
    record_kinds,
)
from perfcast.csource.syntax import ASSIGN_OPS, SourceText, strip

CK = CursorKind


def library_pointers(call: Cursor) -> Iterator[tuple[bool, str, Cursor]]:
    """(whether the callee may write through it, the memory kind, the argument) for each
    pointer argument of a call to a library function (one a system header declares; MPI
    is judged by its own rules)."""
    called = callee(call)
    if (
        called is None
        or called.location.file is None
        or not in_system_header(called)
        or called.spelling.startswith(MPI_PREFIXES)
        or called.type.kind != TypeKind.FUNCTIONPROTO
    ):
        return
    for parameter, argument in zip(
        called.type.argument_types(), call.get_arguments(), strict=False
    ):
        pointed = pointed_to(parameter)
        kind = pointee_kind(argument) if pointed is not None else None
        if pointed is not None and kind is not None:
            yield not pointed[1], kind, argument


class Accesses:
    """Reads and writes in the code of one file, told apart with its tokens."""

    def __init__(self, source: SourceText):
        self.source = source

    def _first_token(self, node: Cursor) -> str:
        tokens = self.source.tokens_in(node.extent.start.offset, node.extent.end.offset)
        return tokens[0].spelling if tokens else ""

    def memory_type(self, node: Cursor) -> str | None:
        """The type of an access through memory (``*p``, ``a[i]``, ``s->f``), else None."""
        if node.kind == CK.ARRAY_SUBSCRIPT_EXPR:
            return memory_kind(node.type)
        if node.kind == CK.UNARY_OPERATOR and self._first_token(node) == "*":
            return memory_kind(node.type)
        if node.kind == CK.MEMBER_REF_EXPR:
            inner = children(node)
            if not inner or strip(inner[0]).type.get_canonical().kind == TypeKind.POINTER:
                return memory_kind(node.type)
        return None

    def root(self, lvalue: Cursor) -> Cursor | None:
        """The variable an lvalue writes (``x``, ``s.f`` -> ``s``); None for memory."""
        node = strip(lvalue)
        while node.kind == CK.MEMBER_REF_EXPR and self.memory_type(node) is None:
            node = strip(children(node)[0])
        variable = node.referenced if node.kind == CK.DECL_REF_EXPR else None
        if variable is not None and variable.kind in (CK.VAR_DECL, CK.PARM_DECL):
            return variable
        return None

    def assignment(self, node: Cursor) -> tuple[Cursor, Cursor] | None:
        """(lhs, rhs) of an assignment expression, else None."""
        if node.kind not in (CK.BINARY_OPERATOR, CK.COMPOUND_ASSIGNMENT_OPERATOR):
            return None
        parts = children(node)
        if len(parts) != 2:
            return None
        if self.source.spelling_at(parts[0].extent.end.offset) in ASSIGN_OPS:
            return parts[0], parts[1]
        return None

    def addressed(self, expression: Cursor) -> Cursor | None:
        """The variable of an ``&x`` argument, else None."""
        node = strip(expression)
        if node.kind != CK.UNARY_OPERATOR:
            return None
        operand = children(node)
        if self._first_token(node) != "&" or not operand:
            return None
        return self.root(operand[0])

    def write_targets(self, code: Cursor) -> list[Cursor]:
        """The lvalues ``code`` assigns, increments, takes the address of or binds to a
        non-const reference."""
        targets: list[Cursor] = []
        for node in code.walk_preorder():
            assignment = self.assignment(node)
            if assignment is not None:
                targets.append(assignment[0])
            elif node.kind == CK.UNARY_OPERATOR:
                tokens = self.source.tokens_in(node.extent.start.offset, node.extent.end.offset)
                operand = children(node)
                spellings = {tokens[0].spelling, tokens[-1].spelling} if tokens else set()
                if operand and spellings & {"++", "--", "&"}:
                    targets.append(operand[0])
            elif node.kind == CK.CALL_EXPR:
                targets.extend(_call_writes(node))
        return targets

    def written_variables(self, body: Cursor, loop: Cursor) -> dict[ReadKey, Cursor]:
        """Variables declared outside the loop that the body writes (memory written
        through pointers is :meth:`memory_target`'s)."""
        written: dict[ReadKey, Cursor] = {}
        start, end = loop.extent.start.offset, loop.extent.end.offset
        for target in self.write_targets(body):
            variable = self.root(target)
            if variable is None:
                continue
            inside = (
                variable.location.file is not None
                and Path(variable.location.file.name).resolve() == self.source.path
                and start <= variable.extent.start.offset < end
            )
            if not inside or variable.storage_class == cindex.StorageClass.STATIC:
                written[key(variable)] = variable
        return written

    def memory_target(self, target: Cursor) -> set[str]:
        """The kinds of memory an lvalue stores to; empty for a variable (the scalar rules
        judge it). ``p[i].count`` stores to ``int`` and to the struct in memory, ``s->f``
        to ``f``'s type and ``*s``'s, ``*s = v`` to the struct and its members."""
        if self.root(target) is not None:
            return set()
        node = strip(target)
        kinds = record_kinds(node.type)
        while self.memory_type(node) is None and node.kind == CK.MEMBER_REF_EXPR:
            kinds.add(memory_kind(node.type))
            node = strip(children(node)[0])
        kind = self.memory_type(node)
        if kind is None:
            return set()
        kinds.add(kind)
        if node.kind == CK.MEMBER_REF_EXPR and children(node):
            base = pointee_kind(strip(children(node)[0]))
            if base is not None:
                kinds.add(base)
        return kinds

    def reads(self, expression: Cursor) -> list[ReadKey]:
        """Variables read by value in ``expression``: not under ``&`` or ``sizeof``, not
        array names; the results of the functions it calls (:func:`call_key`); and the
        memory it reads (:func:`memory_key`): through pointers, subscripts and members of
        pointed-to structs, and what library calls read through their pointer arguments."""
        found: list[ReadKey] = []

        def walk(node: Cursor) -> None:
            if node.kind == CK.CXX_UNARY_EXPR:  # sizeof, alignof: nothing is read
                return
            if node.kind == CK.UNARY_OPERATOR and self._first_token(node) == "&":
                return
            kind = self.memory_type(node)
            if kind is not None:
                found.append(memory_key(kind))
            if node.kind == CK.CALL_EXPR and node.referenced is not None:
                found.append(call_key(node.referenced))
                found.extend(memory_key(kind) for _, kind, _ in library_pointers(node))
            if node.kind == CK.DECL_REF_EXPR and node.referenced is not None:
                variable = node.referenced
                if variable.kind in (
                    CK.VAR_DECL,
                    CK.PARM_DECL,
                ) and variable.type.get_canonical().kind not in (
                    TypeKind.CONSTANTARRAY,
                    TypeKind.INCOMPLETEARRAY,
                ):
                    found.append(key(variable))
            for child in node.get_children():
                walk(child)

        walk(expression)
        return found


def _call_writes(call: Cursor) -> list[Cursor]:
    """Objects a call may modify: a non-const method's receiver, arguments bound to
    non-const references."""
    found: list[Cursor] = []
    parts = children(call)
    called = call.referenced
    if parts and parts[0].kind == CK.MEMBER_REF_EXPR and called is not None:
        receiver = children(parts[0])
        if (
            receiver
            and called.kind == CK.CXX_METHOD
            and not called.is_const_method()
            and not called.is_static_method()
        ):
            found.append(receiver[0])
    if called is not None and called.type.kind == TypeKind.FUNCTIONPROTO:
        parameters = list(called.type.argument_types())
        arguments = [c for c in parts if c.kind != CK.MEMBER_REF_EXPR]
        arguments = arguments[-len(parameters) :] if parameters else []
        for parameter, argument in zip(parameters, arguments, strict=False):
            if (
                parameter.kind in (TypeKind.LVALUEREFERENCE, TypeKind.RVALUEREFERENCE)
                and not parameter.get_pointee().is_const_qualified()
            ):
                found.append(argument)
    return found
