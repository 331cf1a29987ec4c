"""Which files are C, which C++ and which headers, told by the file name alone.

The taint build, the threshold rule's analysis and ``perfcast static`` each hand files to
clang or libclang and must agree on the language they are read as. ``perfcast static``
asks before it knows libclang is installed (its absence is reported with the extra to
install), so this lives apart from :mod:`~perfcast.csource.syntax`, which imports
libclang, and the import contract keeps it free of it.
"""

from __future__ import annotations

from pathlib import Path

CXX_SUFFIXES = frozenset({".cc", ".cpp", ".cxx", ".c++", ".C", ".hpp", ".hh", ".hxx"})
"""File suffixes read as C++ (every other file as C)."""
HEADER_SUFFIXES = frozenset({".h", ".hh", ".hpp", ".hxx", ".H", ".inl", ".inc"})
"""Files that are not parsed on their own: what they define is seen in every file that
includes them, with that file's language and flags."""


def language_of(path: str | Path) -> str:
    """The language clang reads ``path`` as (``-x``): C++ by suffix, else C."""
    return "c++" if Path(path).suffix in CXX_SUFFIXES else "c"
