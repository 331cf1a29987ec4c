"""One file of the program as libclang reads it: its functions, loops and tokens.

A file is parsed as the compiler reads it (the compile command's include and define flags,
the MPI wrapper's) or refused with libclang's first error: an analysis of a file parsed
with errors would judge code the compiler never built.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from pathlib import Path

from clang import cindex
from clang.cindex import Cursor

from perfcast.clang_toolchain import find_clang
from perfcast.csource.accesses import Accesses
from perfcast.csource.cursors import in_system_header
from perfcast.csource.languages import language_of
from perfcast.csource.syntax import CONTAINER_KINDS, FUNCTION_KINDS, LOOP_KINDS, SourceText
from perfcast.errors import InputError


class SourceFile:
    """One source file parsed once, with its translation unit's function definitions."""

    def __init__(self, path: Path, parse_flags: Sequence[str]):
        self.path = path
        self.openmp = any(flag.startswith(("-fopenmp", "-qopenmp")) for flag in parse_flags)
        """Compiled with OpenMP: without it, every ``#pragma omp`` is ignored by the
        compiler, and libclang parses the loop under it as a plain loop."""
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
    def lines(self) -> list[str]:
        """The file's lines as text (bytes that are not UTF-8 replaced), decoded once: what
        libclang keeps no cursor for, the pragmas before loops, is read from them."""
        return self.source.data.decode(errors="replace").splitlines()

    @functools.cached_property
    def accesses(self) -> Accesses:
        return Accesses(self.source)

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
                if child.location.file is None or in_system_header(child):
                    continue
                if child.kind in FUNCTION_KINDS and child.is_definition():
                    yield child
                elif child.kind in CONTAINER_KINDS:
                    yield from walk(child)

        yield from walk(self.tu.cursor)
