"""The C/C++ vocabulary every libclang reader of perfcast uses, spelled once.

The taint rewriter (:mod:`perfcast.taint.rewriter`, :mod:`perfcast.taint.instrument`) and
the loop analysis (:mod:`perfcast.csource.loopsafety`) both walk libclang cursors and tokens
and both insert text after statements; a kind or operator listed in one and not the other
made them disagree on what a function, an assignment or a statement's end is.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from pathlib import Path

from clang import cindex
from clang.cindex import Cursor, CursorKind

CK = CursorKind

LOOP_KINDS = {
    CK.FOR_STMT: "for",
    CK.WHILE_STMT: "while",
    CK.DO_STMT: "do",
    CK.CXX_FOR_RANGE_STMT: "range-for",
}
"""Loop statements and the names the taint profile gives them."""
FUNCTION_KINDS = frozenset(
    {
        CK.FUNCTION_DECL,
        CK.CXX_METHOD,
        CK.CONSTRUCTOR,
        CK.DESTRUCTOR,
        CK.FUNCTION_TEMPLATE,
        CK.CONVERSION_FUNCTION,
    }
)
"""Declarations of functions: what a call may name and what has a body of its own."""
FRAME_KINDS = FUNCTION_KINDS | {CK.LAMBDA_EXPR}
"""Declarations whose variables live in a call's frame: a variable declared directly in
anything else (a namespace, a class, the file) outlives every call."""
CONTAINER_KINDS = frozenset(
    {
        CK.NAMESPACE,
        CK.LINKAGE_SPEC,
        CK.CLASS_DECL,
        CK.STRUCT_DECL,
        CK.UNION_DECL,
        CK.CLASS_TEMPLATE,
        CK.CLASS_TEMPLATE_PARTIAL_SPECIALIZATION,
        CK.UNEXPOSED_DECL,
    }
)
"""Declarations that may hold function definitions (``extern "C" {}`` is an
``UNEXPOSED_DECL`` to libclang 16)."""
ASSIGN_OPS = frozenset({"=", "+=", "-=", "*=", "/=", "%=", "<<=", ">>=", "&=", "|=", "^="})
STEP_OPS = frozenset({"++", "--"})
NESTING_STATEMENTS = frozenset(
    {
        CK.IF_STMT,
        CK.FOR_STMT,
        CK.WHILE_STMT,
        CK.CXX_FOR_RANGE_STMT,
        CK.LABEL_STMT,
        CK.CASE_STMT,
        CK.DEFAULT_STMT,
    }
)
"""Statements that end where their last sub-statement ends (a ``do`` ends at its own
``;``, after the condition)."""


@dataclass
class Token:
    start: int
    end: int
    spelling: str


class SourceText:
    """One file's bytes and tokens; offsets are byte offsets into the file."""

    def __init__(self, path: Path, tu: cindex.TranslationUnit):
        self.path = path
        self.data = path.read_bytes()
        handle = tu.get_file(str(path))
        extent = cindex.SourceRange.from_locations(
            cindex.SourceLocation.from_offset(tu, handle, 0),
            cindex.SourceLocation.from_offset(tu, handle, len(self.data)),
        )
        self.tokens = [
            Token(t.extent.start.offset, t.extent.end.offset, t.spelling)
            for t in tu.get_tokens(extent=extent)
        ]
        self._starts = [t.start for t in self.tokens]

    def text(self, start: int, end: int) -> str:
        return self.data[start:end].decode()

    def first_at(self, offset: int) -> int:
        """Index of the first token starting at or after ``offset``."""
        return bisect.bisect_left(self._starts, offset)

    def tokens_in(self, start: int, end: int) -> list[Token]:
        return self.tokens[self.first_at(start) : self.first_at(end)]

    def spelling_at(self, offset: int) -> str:
        """The first token at or after ``offset``; empty past the last one."""
        index = self.first_at(offset)
        return self.tokens[index].spelling if index < len(self.tokens) else ""

    def statement_end(self, cursor: Cursor) -> int:
        """Offset just past a statement, its terminating ``;`` included: libclang's extent
        of ``x = 1;`` stops before the ``;``, and that of ``for (...) x = 1;`` at the ``1``.
        """
        children = list(cursor.get_children())
        if children and cursor.kind in NESTING_STATEMENTS:
            return max(cursor.extent.end.offset, self.statement_end(children[-1]))
        end = cursor.extent.end.offset
        if cursor.kind == CK.COMPOUND_STMT:
            return end
        for index in (self.first_at(end - 1), self.first_at(end)):
            if index < len(self.tokens) and self.tokens[index].spelling == ";":
                return self.tokens[index].end
        return end


def strip(cursor: Cursor) -> Cursor:
    """Look through implicit casts and parentheses."""
    while cursor.kind in (CK.UNEXPOSED_EXPR, CK.PAREN_EXPR):
        children = list(cursor.get_children())
        if len(children) != 1:
            break
        cursor = children[0]
    return cursor
