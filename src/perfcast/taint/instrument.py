"""Parse a project's sources with libclang, prune statically, and write rewritten copies.

The static pre-pass (paper section 5.1) runs on the same parse: a function whose loops all
have constant trip counts (or that has none) and whose callees are all such functions, and
that calls no library routine of the database, cannot depend on any parameter. It is
*pruned*: no frame and no sinks, so it costs nothing at run time and is reported as such. It
keeps its control-flow taint, since a value it computes under a parameter-driven branch
may still bound a loop elsewhere. ``main`` is never pruned: it roots every call path and
marks the command-line parameters.

Rewritten files go to a mirror of the project tree so the user's files are never touched;
headers of the project are rewritten too, so classes defined in headers are analysed.
"""

from __future__ import annotations

import os
import subprocess
from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from clang import cindex
from clang.cindex import Cursor, CursorKind

from perfcast.csource.languages import CXX_SUFFIXES
from perfcast.csource.syntax import (
    CONTAINER_KINDS,
    FUNCTION_KINDS,
    LOOP_KINDS,
    SourceText,
)
from perfcast.errors import InputError
from perfcast.taint.rewriter import Edit, FunctionRewriter, apply_edits, loop_is_constant
from perfcast.taint.sitemap import Function, SiteMap

CK = CursorKind
RUNTIME_DIR = Path(__file__).parent / "runtime"
INCLUDE_DIR = Path(__file__).parent / "include"
PRELUDE = RUNTIME_DIR / "perfcast_prelude.h"


@dataclass
class _Definition:
    cursor: Cursor
    path: Path
    tu: cindex.TranslationUnit
    cplusplus: bool
    loops_constant: dict[int, bool] = field(default_factory=dict)  # loop offset -> constant
    callees: set[str] = field(default_factory=set)
    unknown_calls: bool = False
    library_calls: set[str] = field(default_factory=set)


@dataclass
class InstrumentedSources:
    """The outcome of rewriting: where the copies are and what they contain."""

    sitemap: SiteMap
    shadow_root: Path
    rewritten: dict[Path, Path]  # original file -> rewritten copy
    library_calls: set[str]
    outside: list[Path] = field(default_factory=list)  # sources outside the root, as they are


class Instrumenter:
    """Rewrites the sources of one build.

    Args:
        root: the project directory; files under it (and not system headers) are
            instrumented, everything else is left alone.
        parse_flags: preprocessor and language flags of the compile command (-I, -D, -std).
        library_routines: names of library routines with a known parameter dependence
            (the MPI database); calling one keeps a function from being pruned.
        builtin_includes: clang's resource include directory (the pip libclang has none).
    """

    def __init__(
        self,
        root: Path,
        parse_flags: Sequence[str],
        library_routines: Collection[str],
        builtin_includes: Path,
    ):
        self.root = root.resolve()
        self.parse_flags = list(parse_flags)
        self.library_routines = set(library_routines)
        self.builtin_includes = builtin_includes
        self._index = cindex.Index.create()

    # ---- parsing ------------------------------------------------------------------------
    def parse(self, source: Path, cplusplus: bool) -> cindex.TranslationUnit:
        language = ["-x", "c++"] if cplusplus else ["-x", "c"]
        args = [
            *language,
            *self.parse_flags,
            "-DPERFCAST_TAINT",
            "-I",
            str(INCLUDE_DIR),
            "-isystem",
            str(self.builtin_includes),
        ]
        try:
            tu = self._index.parse(str(source), args=args)
        except cindex.TranslationUnitLoadError as exc:
            raise InputError(f"libclang cannot read the file: {exc}", path=source) from None
        for diagnostic in tu.diagnostics:
            if diagnostic.severity >= cindex.Diagnostic.Error:
                location = diagnostic.location
                where = Path(location.file.name) if location.file else source
                raise InputError(
                    f"libclang cannot parse it: {diagnostic.spelling}; fix the code or the "
                    "include/define flags of the compile command",
                    path=where,
                    line=location.line or None,
                )
        return tu

    def _in_project(self, cursor: Cursor) -> Path | None:
        location = cursor.location
        if location.file is None or location.is_in_system_header:
            return None
        path = Path(location.file.name).resolve()
        return path if path.is_relative_to(self.root) else None

    def _definitions(self, tu: cindex.TranslationUnit, cplusplus: bool, into: dict) -> None:
        def walk(cursor: Cursor) -> None:
            for child in cursor.get_children():
                if child.kind in CONTAINER_KINDS:
                    walk(child)
                elif child.kind in FUNCTION_KINDS and child.is_definition():
                    path = self._in_project(child)
                    usr = child.get_usr()
                    if path is None or usr in into or _body(child) is None:
                        continue
                    if _is_constexpr(child):
                        continue
                    into[usr] = _Definition(child, path, tu, cplusplus)

        walk(tu.cursor)

    # ---- static pre-pass ----------------------------------------------------------------
    def _summarise(self, definition: _Definition, sources: dict[Path, SourceText]) -> None:
        source = sources[definition.path]
        for node in definition.cursor.walk_preorder():
            if node.kind in LOOP_KINDS:
                definition.loops_constant[node.extent.start.offset] = loop_is_constant(node, source)
            elif node.kind == CK.CALL_EXPR:
                callee = node.referenced
                if callee is None:
                    definition.unknown_calls = True
                elif callee.spelling in self.library_routines:
                    definition.library_calls.add(callee.spelling)
                elif callee.kind in FUNCTION_KINDS:
                    if callee.kind == CK.CXX_METHOD and callee.is_virtual_method():
                        definition.unknown_calls = True
                    definition.callees.add(callee.get_usr())
                elif callee.kind != CK.CONSTRUCTOR:
                    definition.unknown_calls = True

    @staticmethod
    def _relevant(definitions: dict[str, _Definition]) -> set[str]:
        relevant = {
            usr
            for usr, d in definitions.items()
            if d.unknown_calls
            or d.library_calls
            or not all(d.loops_constant.values())
            or d.cursor.spelling == "main"
        }
        changed = True
        while changed:
            changed = False
            for usr, d in definitions.items():
                if usr not in relevant and d.callees & relevant:
                    relevant.add(usr)
                    changed = True
        return relevant

    # ---- rewriting ----------------------------------------------------------------------
    def run(self, sources: Sequence[Path], out_dir: Path, cplusplus: bool) -> InstrumentedSources:
        definitions: dict[str, _Definition] = {}
        texts: dict[Path, SourceText] = {}
        units = []
        for source in sources:
            source = source.resolve()
            is_cxx = cplusplus or source.suffix in CXX_SUFFIXES
            tu = self.parse(source, is_cxx)
            units.append(tu)
            self._definitions(tu, is_cxx, definitions)
        for d in definitions.values():
            if d.path not in texts:
                texts[d.path] = SourceText(d.path, d.tu)
            self._summarise(d, texts)
        relevant = self._relevant(definitions)
        ordered = sorted(
            definitions.items(), key=lambda kv: (str(kv[1].path), kv[1].cursor.extent.start.offset)
        )
        names = _definition_names(
            _display_names([d.cursor for _, d in ordered]),
            [os.path.relpath(d.path, self.root) for _, d in ordered],
        )
        name_of = {usr: names[fid] for fid, (usr, _) in enumerate(ordered)}
        resolved = [Path(s).resolve() for s in sources]
        outside = [s for s in resolved if not s.is_relative_to(self.root)]
        if len(outside) == len(resolved):
            raise InputError(
                f"the project directory {self.root} (--root) holds none of the sources of the "
                "compile command: give the directory that holds them"
            )
        edits: dict[Path, list[Edit]] = {s: [] for s in resolved if s not in outside}
        project = {usr: fid if usr in relevant else None for fid, (usr, _) in enumerate(ordered)}
        functions = []
        for fid, (usr, d) in enumerate(ordered):
            record = usr in relevant
            rewriter = FunctionRewriter(
                texts[d.path],
                d.cursor,
                fid,
                record=record,
                cplusplus=d.cplusplus,
                constant_loops={o for o, c in d.loops_constant.items() if c},
                project=project,
                library_routines=self.library_routines,
            )
            body = _body(d.cursor)
            assert body is not None
            rewriter.run(body)
            for site in rewriter.sites:
                called = rewriter.branch_calls.get(site.index, ())
                site.calls = sorted(
                    {
                        name_of.get(usr, spelling)
                        for usr, spelling in called
                        if usr in name_of or spelling in self.library_routines
                    }
                )
                site.work = site.kind == "branch" and (
                    any(site.index in loop.branches for loop in rewriter.loops)
                    or any(u in relevant or n in self.library_routines for u, n in called)
                )
            edits.setdefault(d.path, []).extend(rewriter.edits)
            functions.append(
                Function(
                    fid=fid,
                    name=names[fid],
                    file=os.path.relpath(d.path, self.root),
                    line=d.cursor.location.line,
                    pruned=not record,
                    loops=rewriter.loops,
                    sites=rewriter.sites if record else [],
                    library_calls=sorted(d.library_calls),
                    call_branches=rewriter.call_branches,
                )
            )
        rewritten = {}
        for path, file_edits in edits.items():
            target = out_dir / path.relative_to(self.root)
            target.parent.mkdir(parents=True, exist_ok=True)
            data = path.read_bytes()
            header = f'#include "{PRELUDE}"\n#line 1 "{path}"\n'.encode()
            target.write_bytes(header + apply_edits(data, file_edits))
            rewritten[path] = target
        library_calls = set().union(*(d.library_calls for d in definitions.values()))
        return InstrumentedSources(SiteMap(functions), out_dir, rewritten, library_calls, outside)


def _body(cursor: Cursor) -> Cursor | None:
    bodies = [c for c in cursor.get_children() if c.kind == CK.COMPOUND_STMT]
    return bodies[-1] if bodies else None


def _is_constexpr(cursor: Cursor) -> bool:
    body = _body(cursor)
    assert body is not None
    for token in cursor.get_tokens():
        if token.extent.start.offset >= body.extent.start.offset:
            return False
        if token.spelling in ("constexpr", "consteval"):
            return True
    return False


def _qualified(cursor: Cursor) -> str:
    parts = []
    parent = cursor.semantic_parent
    while parent is not None and parent.kind != CK.TRANSLATION_UNIT:
        if parent.spelling:
            parts.append(parent.spelling)
        parent = parent.semantic_parent
    name = "::".join([*reversed(parts), cursor.displayname])
    if cursor.kind == CK.CXX_METHOD and cursor.is_const_method():
        name += " const"
    return name


def _definition_names(names: list[str], files: list[str]) -> list[str]:
    """Profile keys: the display name, and where two definitions print alike (``static void
    helper(int)`` in ``a.c`` and in ``b.c``), the name followed by `` [FILE]``.

    Only ambiguous names get the file, so every other key stays the name measurements
    print. The suffix is unmistakable: a function's name ends in ``)``, a qualifier or an
    identifier, never in `` [...]`` (:func:`perfcast.taint.profile_model.symbol_name` takes it
    off again for the name measurements, the filter and the linker know).
    """
    count = Counter(names)
    return [
        f"{name} [{file}]" if count[name] > 1 else name
        for name, file in zip(names, files, strict=True)
    ]


def _display_names(cursors: Sequence[Cursor]) -> list[str]:
    """Demangled names as profilers print them (``ns::f(int, double)``, ``main``); template
    definitions, which have no symbol, get their qualified source name."""
    mangled = [c.mangled_name or "" for c in cursors]
    to_demangle = [m for m in mangled if m.startswith("_Z")]
    demangled: dict[str, str] = {}
    if to_demangle:
        output = subprocess.run(
            ["c++filt"], input="\n".join(to_demangle), capture_output=True, text=True
        ).stdout.splitlines()
        demangled = dict(zip(to_demangle, output, strict=False))
    names = []
    for cursor, symbol in zip(cursors, mangled, strict=True):
        if symbol in demangled:
            names.append(demangled[symbol])
        elif symbol and not symbol.startswith("_Z"):
            names.append(symbol)
        else:
            names.append(_qualified(cursor))
    return names
