"""The program's files and its call graph: who calls whom, across every file.

A ``make`` compiles one file per step, and the loop of that file may return its result to
a function of another, or call one; so every file of the taint profile is part of the
program, parsed at most once and only when a question crosses into it. The index answers
where each function is defined, every place it is called from, and whether it is referred
to other than by a call (then its callers cannot all be found).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from clang.cindex import Cursor, CursorKind

from perfcast.csource.cursors import callee_reference, in_system_header, key
from perfcast.csource.languages import HEADER_SUFFIXES
from perfcast.csource.sourcefile import SourceFile
from perfcast.csource.syntax import FUNCTION_KINDS
from perfcast.errors import InputError

CK = CursorKind


@dataclass(frozen=True)
class _CallSite:
    """One call of a function of the program, in the file that makes it."""

    file: SourceFile
    call: Cursor
    function: Cursor | None
    """The function definition the call is in; None for a call outside any function."""


@dataclass
class _Index:
    """What :meth:`Program.index` collects over all profile files."""

    calls: dict[str, list[_CallSite]] = field(default_factory=dict)
    references: dict[str, str] = field(default_factory=dict)
    """Per function: one place it is referred to other than as a call's callee."""
    definitions: dict[str, tuple[SourceFile, Cursor]] = field(default_factory=dict)
    callees: set[tuple[str, int]] = field(default_factory=set)
    """The callee expressions of the calls seen, which are not such references."""
    seen: set[tuple[str, int]] = field(default_factory=set)


class Program:
    """Every file of the program (those of the taint profile), each parsed at most once.

    ``base`` is the directory file names are shown relative to; ``parse_flags`` every flag
    libclang needs to read the files as the compiler does (includes and defines of the
    compile command, the MPI wrapper's include flags).
    """

    def __init__(self, base: Path, files: Iterable[Path], parse_flags: Sequence[str]):
        self.base = base
        self.files = sorted({path for path in files if path.suffix not in HEADER_SUFFIXES})
        self.parse_flags = tuple(parse_flags)
        self._parsed: dict[Path, SourceFile | str] = {}

    def file(self, path: Path) -> SourceFile:
        """The file parsed; an InputError naming it where libclang cannot parse it."""
        parsed = self._parsed.get(path)
        if isinstance(parsed, SourceFile):
            return parsed
        file = SourceFile(path, self.parse_flags)
        self._parsed[path] = file
        return file

    def all_files(self) -> tuple[list[SourceFile], list[str]]:
        """Every profile file parsed, and why each that cannot be is missing."""
        parsed_files, failures = [], []
        for path in self.files:
            if path not in self._parsed:
                try:
                    self._parsed[path] = SourceFile(path, self.parse_flags)
                except InputError as exc:
                    self._parsed[path] = f"{self.name(path)} cannot be parsed ({exc})"
            parsed = self._parsed[path]
            if isinstance(parsed, SourceFile):
                parsed_files.append(parsed)
            else:
                failures.append(parsed)
        return parsed_files, failures

    def missing(self) -> str:
        """Why a definition may have been missed: the first profile file that does not
        parse, as a parenthesis to append to a sentence; empty where all parse."""
        _, failures = self.all_files()
        return f" ({failures[0]})" if failures else ""

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
    def index(self) -> _Index:
        """Per function (USR): its calls, where it is referred to other than by a direct
        call (its address taken, a function pointer set), and its definition."""
        index = _Index()
        parsed_files, _ = self.all_files()
        for file in parsed_files:
            for top in file.tu.cursor.get_children():
                if top.location.file is not None and not in_system_header(top):
                    self._walk(file, top, None, index)
        return index

    def _walk(self, file: SourceFile, node: Cursor, function: Cursor | None, index: _Index) -> None:
        if node.kind in FUNCTION_KINDS and node.is_definition():
            function = node
            index.definitions.setdefault(node.get_usr(), (file, node))
        if node.kind == CK.CALL_EXPR and node.referenced is not None:
            reference = callee_reference(node)
            if reference is not None:
                index.callees.add(key(reference))
                if key(node) not in index.seen:  # a header's inline function, parsed twice
                    index.seen.add(key(node))
                    site = _CallSite(file, node, function)
                    index.calls.setdefault(node.referenced.get_usr(), []).append(site)
        elif (
            node.kind in (CK.DECL_REF_EXPR, CK.MEMBER_REF_EXPR)
            and node.referenced is not None
            and node.referenced.kind in FUNCTION_KINDS
            and key(node) not in index.callees
        ):
            index.references.setdefault(node.referenced.get_usr(), self.place(node))
        for child in node.get_children():
            self._walk(file, child, function, index)
