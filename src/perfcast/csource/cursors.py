"""Questions about libclang cursors that every part of the loop analysis asks alike.

The call graph (:mod:`~perfcast.csource.program`), the effects of calls
(:mod:`~perfcast.csource.effects`), what expressions read and write
(:mod:`~perfcast.csource.accesses`) and the search for the uses of values
(:mod:`~perfcast.csource.search`) all identify declarations, find a call's callee and tell
the program's functions from the system's. Answered once here, they agree: a declaration
keyed two ways would never meet itself across translation units.
"""

from __future__ import annotations

from pathlib import Path

from clang.cindex import Cursor, CursorKind

from perfcast.csource.syntax import strip
from perfcast.csource.verdicts import Reason, Refusal

CK = CursorKind

MPI_PREFIXES = ("MPI_", "PMPI_")
"""Names of MPI routines (the profiling interface's too)."""

ReadKey = tuple[str, int]
"""What an expression may read: a variable (:func:`key`), a call's result
(:func:`call_key`) or a kind of memory (:func:`perfcast.csource.memory.memory_key`)."""


def key(cursor: Cursor) -> ReadKey:
    """A declaration's identity across cursors: its file and offset."""
    location = cursor.location
    return (location.file.name if location.file else "", cursor.extent.start.offset)


def call_key(callee: Cursor) -> ReadKey:
    """The key under which a call's result is read: the same for every call of one
    function, in every translation unit (USRs are global)."""
    return ("call " + callee.get_usr(), -1)


def children(cursor: Cursor) -> list[Cursor]:
    return list(cursor.get_children())


def callee(call: Cursor) -> Cursor | None:
    """The function a call calls, its definition where the translation unit has one."""
    called = call.referenced
    if called is None:
        return None
    return called.get_definition() or called


def callee_reference(call: Cursor) -> Cursor | None:
    """The expression naming a call's callee (``f`` in ``f(x)``, ``o.m`` in ``o.m(x)``);
    None where it is computed (a function pointer)."""
    parts = children(call)
    if not parts:
        return None
    # the callee first; an overloaded operator's name may follow its left operand
    for child in parts:
        node = strip(child)
        if (
            node.kind in (CK.DECL_REF_EXPR, CK.MEMBER_REF_EXPR)
            and node.referenced == call.referenced
        ):
            return node
    return None


def in_system_header(cursor: Cursor) -> bool:
    return bool(cursor.location.is_in_system_header)


def program_callees(code: Cursor) -> set[str]:
    """The functions of the program (not of system headers) that ``code`` calls (USRs)."""
    found: set[str] = set()
    for node in code.walk_preorder():
        called = callee(node) if node.kind == CK.CALL_EXPR else None
        if called is not None and called.location.file and not in_system_header(called):
            found.add(called.get_usr())
    return found


def is_virtual(function: Cursor) -> bool:
    return function.kind == CK.CXX_METHOD and bool(function.is_virtual_method())


def refusal_at(
    reason: Reason, cursor: Cursor, *, subject: str = "", target: str = "", note: str = ""
) -> Refusal:
    """A refusal decided at ``cursor``'s place."""
    file = cursor.location.file
    path = Path(file.name).resolve() if file is not None else Path("?")
    return Refusal(reason, path, cursor.location.line, subject, target, note)
