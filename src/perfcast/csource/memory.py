"""Memory told apart by type, as C's aliasing rules allow objects to overlap.

The loop analysis (:mod:`perfcast.csource.loopsafety`) cannot tell objects apart, only
the types memory is accessed as: a loop writing ``double`` memory may change whatever reads
``double`` memory. These helpers name those types (*kinds*) the way aliasing compares them,
so that a write and a read of one object always get one kind.
"""

from __future__ import annotations

from clang import cindex
from clang.cindex import Cursor, CursorKind, TypeKind

from perfcast.csource.syntax import strip

CK = CursorKind

ALLOCATION_CALLS = {"malloc", "calloc", "realloc", "reallocarray", "aligned_alloc"}
"""Library calls whose size arguments decide how much memory a later send may read."""
ANY_KIND = {"char", "void", "std::byte"}
"""Memory kinds that may be any object's bytes (C's character types, ``void *``)."""
ARRAY_KINDS = {
    TypeKind.CONSTANTARRAY,
    TypeKind.INCOMPLETEARRAY,
    TypeKind.VARIABLEARRAY,
    TypeKind.DEPENDENTSIZEDARRAY,
}
CAST_KINDS = {
    CK.UNEXPOSED_EXPR,
    CK.CSTYLE_CAST_EXPR,
    CK.CXX_STATIC_CAST_EXPR,
    CK.CXX_REINTERPRET_CAST_EXPR,
    CK.CXX_FUNCTIONAL_CAST_EXPR,
}


def memory_kind(kind: cindex.Type) -> str:
    """The type memory is accessed as, compared the way C's aliasing rules compare it:
    canonical, an array's element, without qualifiers, signed and unsigned variants as one
    (``uint32_t`` and ``int`` memory may be the same object)."""
    canonical = kind.get_canonical()
    while canonical.kind in ARRAY_KINDS:
        canonical = canonical.element_type.get_canonical()
    words = canonical.spelling.replace("*", " * ").split()
    dropped = {"const", "volatile", "restrict", "__restrict", "signed", "unsigned"}
    kept = [word for word in words if word not in dropped]
    return " ".join(kept) if kept and kept[0] != "*" else " ".join(["int", *kept])


def pointee_kind(expression: Cursor) -> str | None:
    """The memory kind an argument points to (a pointer's pointee, an array's element),
    looking through implicit conversions (``memcpy(keys, ...)`` points to ``uint32_t``)."""
    kind = strip(expression).type.get_canonical()
    if kind.kind == TypeKind.POINTER:
        return memory_kind(kind.get_pointee())
    if kind.kind in ARRAY_KINDS:
        return memory_kind(kind)
    return None


def pointed_to(parameter: cindex.Type) -> tuple[cindex.Type, bool] | None:
    """What a pointer parameter points to, and whether it is const; a parameter declared
    as an array (``const int counts[]``, where libclang puts the ``const`` on the array)
    points to its element. None for other parameters."""
    canonical = parameter.get_canonical()
    if canonical.kind == TypeKind.POINTER:
        pointee = canonical.get_pointee()
        return pointee, pointee.is_const_qualified()
    if canonical.kind in ARRAY_KINDS:
        element = canonical.element_type
        return element, element.is_const_qualified() or canonical.is_const_qualified()
    return None


def memory_key(kind: str) -> tuple[str, int]:
    """The key under which :meth:`perfcast.csource.accesses.Accesses.reads` reports a
    read of memory of ``kind``."""
    return ("memory " + kind, -2)


def record_kinds(kind: cindex.Type, depth: int = 0) -> set[str]:
    """The kinds of a struct's members, recursively: writing a whole struct writes each."""
    found: set[str] = set()
    canonical = kind.get_canonical()
    while canonical.kind in ARRAY_KINDS:
        canonical = canonical.element_type.get_canonical()
    if canonical.kind != TypeKind.RECORD or depth > 4:
        return found
    for member in canonical.get_fields():
        found.add(memory_kind(member.type))
        found |= record_kinds(member.type, depth + 1)
    return found


def fresh_or_null(expression: Cursor) -> bool:
    """Whether a ``void *`` is a null pointer or an allocation's result: converting it to
    a character pointer launders no other type."""
    node = strip(expression)
    while node.kind in CAST_KINDS and list(node.get_children()):
        node = strip(list(node.get_children())[-1])
    if node.kind in (CK.INTEGER_LITERAL, CK.CXX_NULL_PTR_LITERAL_EXPR, CK.GNU_NULL_EXPR):
        return True
    return node.kind == CK.CALL_EXPR and node.spelling in ALLOCATION_CALLS
