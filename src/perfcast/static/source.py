"""Source side: functions, loops, branches, calls and annotations from libclang.

Each source function becomes a tree of :class:`Construct` nodes: loops (with their header
parsed into an index, bounds and step), the two sides of every ``if``, and calls. A node
knows its source extent, so an instruction's DWARF location can be placed in the most
specific construct that contains it.

Annotations follow the paper: ``#pragma @Annotation {lp_init:x, lp_cond:y}`` inside a loop
body names its lower and upper bound, ``{lp_iters:k}`` its iteration count per entry,
``{br_ratio:r}`` inside a branch the fraction of executions taking it, and ``{skip:yes}``
drops the enclosing loop or branch from the model. Pragmas never reach libclang's AST, so
they are read from the token stream.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from perfcast.csource.languages import language_of
from perfcast.errors import InputError
from perfcast.lazy import optional_module
from perfcast.static import expressions as ex

ANNOTATION_KEYS = frozenset({"lp_init", "lp_cond", "lp_iters", "br_ratio", "skip"})
COMPILERS_FOR_HEADERS = ("clang-16", "clang", "clang-19", "clang-14", "gcc")

Position = tuple[int, int]


@dataclass(frozen=True)
class LoopHeader:
    """A loop in canonical form ``for (iv = init; conditions; iv += step)``.

    ``conditions`` hold while iterating. ``unknown`` names the reason the loop is outside
    the polyhedral model; its trip count per entry is then the parameter ``iterations``.
    """

    iv: str
    init: ex.Expr
    step: int
    conditions: tuple[ex.Expr, ...]
    unknown: str | None = None
    iterations: str | None = None


@dataclass(eq=False)
class Construct:
    """A node of a function's structure tree."""

    kind: str  # "function" | "loop" | "body" (of a loop) | "branch" | "call"
    file: str
    start: Position
    end: Position
    parent: Construct | None = None
    children: list[Construct] = field(default_factory=list)
    loop: LoopHeader | None = None
    condition: ex.Expr | None = None  # branch: what holds inside it
    ratio: str | None = None  # branch outside the model: parameter for its taken fraction
    callee: tuple[str, int] | None = None  # call: (file, line) identity of the callee
    callee_name: str = ""
    arguments: tuple[ex.Expr, ...] = ()
    annotations: dict[str, str] = field(default_factory=dict)
    element_size: int = 0  # loops: size of the array elements the body indexes

    def contains(self, file: str, position: Position) -> bool:
        return file == self.file and self.start <= position <= self.end

    def walk(self) -> Iterator[Construct]:
        yield self
        for child in self.children:
            yield from child.walk()

    def ancestors(self) -> Iterator[Construct]:
        node: Construct | None = self
        while node is not None:
            yield node
            node = node.parent

    @property
    def line(self) -> int:
        return self.start[0]

    @property
    def skipped(self) -> bool:
        return any(
            c.annotations.get("skip", "no") in ("yes", "true", "1") for c in self.ancestors()
        )

    def innermost(self, file: str, position: Position) -> Construct:
        """The most specific construct containing the position (self if none deeper)."""
        for child in self.children:
            if child.kind != "call" and child.contains(file, position):
                return child.innermost(file, position)
        return self


@dataclass(eq=False)
class SourceFunction:
    name: str  # qualified, e.g. "Grid::at" or "matvec"
    file: str
    line: int  # line of the name: DWARF's DW_AT_decl_line
    parameters: tuple[str, ...]
    integer_parameters: frozenset[str]
    root: Construct
    declaration_lines: frozenset[int] = frozenset()
    # Integer locals fixed at their declaration (``int edgeNodes = nx + 1;``, never
    # assigned again), in the function's parameters and globals: a loop bound that names
    # one is counted in the values it comes from, not as a parameter of its own.
    derived_locals: dict[str, ex.Expr] = field(default_factory=dict)

    @property
    def key(self) -> tuple[str, int]:
        return (self.file, self.line)


@dataclass
class SourceProgram:
    functions: list[SourceFunction]
    warnings: list[str]
    included: dict[str, tuple[str, int]] = field(default_factory=dict)
    """Functions defined in the project's headers this file includes, qualified name ->
    (file, line): not modeled, but named when the user asks for one of them."""

    def by_key(self) -> dict[tuple[str, int], SourceFunction]:
        table: dict[tuple[str, int], SourceFunction] = {}
        for function in self.functions:
            for line in function.declaration_lines | {function.line}:
                table[(function.file, line)] = function
        return table


@cache
def builtin_include_directory() -> str | None:
    """The compiler's own header directory; the pip libclang wheel ships none."""
    for compiler in COMPILERS_FOR_HEADERS:
        if shutil.which(compiler) is None:
            continue
        flag = "-print-resource-dir" if "clang" in compiler else "-print-file-name=include"
        out = subprocess.run([compiler, flag], capture_output=True, text=True, check=False)
        path = Path(out.stdout.strip())
        path = path / "include" if "clang" in compiler else path
        if out.returncode == 0 and path.is_dir():
            return str(path)
    return None


MPI_WRAPPERS = {"c": "mpicc", "c++": "mpicxx"}
_WRAPPER_FLAG_PREFIXES = ("-I", "-D", "-isystem", "-pthread")


@cache
def mpi_wrapper_flags(language: str) -> tuple[str, tuple[str, ...]]:
    """(command shown, flags): the compile flags the MPI wrapper adds for ``language``.

    Asks the wrapper itself, Open MPI's ``--showme:compile`` first, then MPICH's
    ``-compile_info`` (which prints a whole command: only its include, define and thread
    flags are kept). ("", ()) when there is no wrapper or it answers neither."""
    wrapper = shutil.which(MPI_WRAPPERS[language])
    if wrapper is None:
        return "", ()
    for option in ("--showme:compile", "-compile_info"):
        try:
            out = subprocess.run(
                [wrapper, option], capture_output=True, text=True, check=True, timeout=30
            ).stdout.split()
        except (OSError, subprocess.SubprocessError):
            continue
        flags = tuple(f for f in out if f.startswith(_WRAPPER_FLAG_PREFIXES))
        if flags:
            return f"{MPI_WRAPPERS[language]} {option}", flags
    return "", ()


def finds_mpi_header(flags: Sequence[str]) -> bool:
    """Do the include directories among ``flags`` hold mpi.h?"""
    directories = []
    for k, flag in enumerate(flags):
        if flag in ("-I", "-isystem") and k + 1 < len(flags):
            directories.append(flags[k + 1])
        elif flag.startswith("-I") and len(flag) > 2:
            directories.append(flag[2:])
        elif flag.startswith("-isystem") and len(flag) > len("-isystem"):
            directories.append(flag[len("-isystem") :])
    return any((Path(d) / "mpi.h").is_file() for d in directories)


def parse_source(path: str | Path, flags: Sequence[str] = ()) -> SourceProgram:
    """Parse a C or C++ file into functions with their construct trees."""
    cindex = optional_module("clang.cindex", "perfcast static needs libclang")
    path = Path(path).resolve()
    if not path.is_file():
        raise InputError("source file not found", path=path)
    language = language_of(path)
    args = ["-x", language, *(["-std=c++17"] if language == "c++" else [])]
    include = builtin_include_directory()
    if include:
        args += ["-isystem", include]
    args += list(flags)
    unsaved, repaired = _as_utf8(path)
    _refuse_endless_includes(path)
    try:
        unit = cindex.Index.create().parse(str(path), args=args, unsaved_files=unsaved)
    except cindex.TranslationUnitLoadError as exc:
        raise InputError(f"libclang could not parse the file ({exc})", path=path) from exc
    errors = [d for d in unit.diagnostics if d.severity >= cindex.Diagnostic.Error]
    if errors:
        first = errors[0]
        where = first.location
        raise InputError(
            f"does not compile: {first.spelling} (fix the source or pass its flags with --cflags)",
            path=where.file.name if where.file else path,
            line=where.line or None,
        )
    builder = _Builder(cindex, str(path))
    if repaired:
        builder.warnings.append(repaired)
    builder.collect(unit.cursor)
    builder.attach_annotations(unit)
    return SourceProgram(builder.functions, builder.warnings, builder.included)


_INCLUDE = re.compile(r'^\s*#\s*include\s*["<]([^">]+)[">]', re.MULTILINE)


def _refuse_endless_includes(path: Path) -> None:
    """Refuse an ``#include`` of a device or a pipe (``"/dev/zero"``), naming its line:
    libclang reads it without end, in this process (15 GB in a minute, then the kernel's
    out-of-memory kill). Names are resolved as the preprocessor resolves quoted ones first,
    beside the source; include directories are left to the compiler."""
    text = path.read_bytes().decode("utf-8", errors="replace")
    for match in _INCLUDE.finditer(text):
        included = path.parent / match.group(1)  # an absolute name replaces the directory
        if included.exists() and not included.is_file() and not included.is_dir():
            raise InputError(
                f"#include of {match.group(1)}, which is not a regular file (a device or a "
                "pipe: the parser would read it without end): include a file",
                path=path,
                line=text.count("\n", 0, match.start()) + 1,
            )


def _as_utf8(path: Path) -> tuple[list[tuple[str, str]] | None, str]:
    """The source as libclang is given it, and what was repaired. libclang's Python
    binding decodes every token's text as UTF-8, so one Latin-1 byte in a comment (common
    in old codes) stopped the analysis with a UnicodeDecodeError; such bytes are read as
    U+FFFD instead, which changes no line number and no code that compiles."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read the source file: {exc.strerror}", path=path) from None
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        text = raw.decode("utf-8", errors="replace")
        return [(str(path), text)], (
            f"{path.name}:{line}: bytes that are not UTF-8 (the first {raw[exc.start]:#04x}) "
            "were read as U+FFFD; save the file as UTF-8 to silence this"
        )
    return None, ""


class _Builder:
    def __init__(self, cindex, path: str):
        self.ci = cindex
        self.kinds = cindex.CursorKind
        self.path = path
        self.functions: list[SourceFunction] = []
        self.warnings: list[str] = []
        self.included: dict[str, tuple[str, int]] = {}

    # --- functions -------------------------------------------------------------------
    def collect(self, cursor) -> None:
        function_kinds = {
            self.kinds.FUNCTION_DECL,
            self.kinds.CXX_METHOD,
            self.kinds.CONSTRUCTOR,
            self.kinds.DESTRUCTOR,
            self.kinds.FUNCTION_TEMPLATE,
        }
        for child in cursor.get_children():
            location = child.location
            if location.file is None or location.is_in_system_header:
                continue
            here = str(Path(location.file.name).resolve()) == self.path
            if child.kind in function_kinds and child.is_definition():
                if here:
                    self.functions.append(self.function(child))
                else:
                    name = "::".join(self.qualified_names(child))
                    self.included.setdefault(name, (location.file.name, location.line))
            elif child.kind in (
                self.kinds.NAMESPACE,
                self.kinds.CLASS_DECL,
                self.kinds.STRUCT_DECL,
                self.kinds.CLASS_TEMPLATE,
            ):
                self.collect(child)

    def qualified_names(self, cursor) -> list[str]:
        names = [cursor.spelling]
        parent = cursor.semantic_parent
        while parent is not None and parent.kind != self.kinds.TRANSLATION_UNIT:
            names.insert(0, parent.spelling)
            parent = parent.semantic_parent
        return names

    def function(self, cursor) -> SourceFunction:
        names = self.qualified_names(cursor)
        parameters, integers = [], set()
        for child in cursor.get_children():
            if child.kind == self.kinds.PARM_DECL:
                parameters.append(child.spelling)
                if _is_integer_type(child.type.spelling):
                    integers.add(child.spelling)
        root = self.construct("function", cursor, None)
        body = [c for c in cursor.get_children() if c.kind == self.kinds.COMPOUND_STMT]
        for statement in body:
            self.statement(statement, root)
        declarations = {cursor.location.line, cursor.canonical.location.line}
        return SourceFunction(
            name="::".join(n for n in names if n),
            file=self.path,
            line=cursor.location.line,
            parameters=tuple(parameters),
            integer_parameters=frozenset(integers),
            root=root,
            declaration_lines=frozenset(declarations),
            derived_locals=self.derived_locals(body),
        )

    def derived_locals(self, body: list) -> dict[str, ex.Expr]:
        """Top-level integer locals initialised from arithmetic on parameters, globals and
        earlier such locals, where neither the local nor what it is computed from is
        written in the body (no assignment, ``++``/``--`` or address taken), each
        rewritten in those values.

        Only declarations directly in the function body qualify: one inside a loop may
        depend on the loop index, and a name declared twice (shadowing) counts as written.
        """
        integer_kinds = {
            self.ci.TypeKind.INT,
            self.ci.TypeKind.UINT,
            self.ci.TypeKind.LONG,
            self.ci.TypeKind.ULONG,
            self.ci.TypeKind.LONGLONG,
            self.ci.TypeKind.ULONGLONG,
            self.ci.TypeKind.SHORT,
            self.ci.TypeKind.USHORT,
        }
        candidates: dict[str, tuple[int, ex.Expr]] = {}
        written: set[str] = set()
        tokens = [t for statement in body for t in statement.get_tokens()]
        for statement in (c for block in body for c in block.get_children()):
            if statement.kind != self.kinds.DECL_STMT:
                continue
            for variable in statement.get_children():
                if variable.kind != self.kinds.VAR_DECL:
                    continue
                initializer = _initializer_tokens(variable)
                if variable.spelling in candidates:
                    written.add(variable.spelling)
                elif (
                    initializer
                    and variable.type.get_canonical().kind in integer_kinds
                    and not variable.type.get_canonical().spelling.startswith("volatile")
                ):
                    candidates[variable.spelling] = (
                        variable.location.offset,
                        ex.parse(initializer),
                    )
        for index, token in enumerate(tokens):
            name = token.spelling
            if name in candidates and token.location.offset == candidates[name][0]:
                continue
            after = tokens[index + 1].spelling if index + 1 < len(tokens) else ""
            before = tokens[index - 1].spelling if index else ""
            if after in _WRITES or after in ("++", "--") or before in ("++", "--", "&"):
                written.add(name)
        resolved: dict[str, ex.Expr] = {}
        for name, (_, value) in sorted(candidates.items(), key=lambda item: item[1][0]):
            if (
                name in written
                or ex.names(value) & written
                or any(isinstance(a, ex.Opaque) for a in ex.atoms(value))
            ):
                continue
            resolved[name] = ex.substitute(value, resolved)
        return resolved

    def construct(self, kind: str, cursor, parent: Construct | None, **fields) -> Construct:
        extent = cursor.extent
        node = Construct(
            kind=kind,
            file=self.path,
            start=(extent.start.line, extent.start.column),
            end=(extent.end.line, extent.end.column),
            parent=parent,
            **fields,
        )
        if parent is not None:
            parent.children.append(node)
        return node

    # --- statements ------------------------------------------------------------------
    def statement(self, cursor, parent: Construct) -> None:
        kind = cursor.kind
        if kind == self.kinds.FOR_STMT:
            self.for_loop(cursor, parent)
        elif kind in (self.kinds.WHILE_STMT, self.kinds.DO_STMT, self.kinds.CXX_FOR_RANGE_STMT):
            self.opaque_loop(cursor, parent, kind.name.lower().replace("_stmt", ""))
        elif kind == self.kinds.IF_STMT:
            self.branch(cursor, parent)
        elif kind == self.kinds.CALL_EXPR and cursor.referenced is not None:
            self.call(cursor, parent)
        elif kind == self.kinds.LAMBDA_EXPR:
            return
        else:
            for child in cursor.get_children():
                self.statement(child, parent)

    def call(self, cursor, parent: Construct) -> None:
        callee = cursor.referenced
        location = callee.location
        key = None
        if location.file is not None:
            key = (str(Path(location.file.name).resolve()), location.line)
        arguments = tuple(ex.parse(_spellings(arg)) for arg in cursor.get_arguments())
        node = self.construct(
            "call", cursor, parent, callee=key, callee_name=callee.spelling, arguments=arguments
        )
        for child in cursor.get_children():
            self.statement(child, node.parent or parent)

    def branch(self, cursor, parent: Construct) -> None:
        tokens = list(cursor.get_tokens())
        close = _matching_paren(tokens, 1)
        condition = ex.parse([t.spelling for t in tokens[2:close]])
        end_offset = tokens[close].extent.end.offset
        arms = [c for c in cursor.get_children() if c.extent.start.offset >= end_offset]
        for child in cursor.get_children():
            if child.extent.start.offset < end_offset:
                self.statement(child, parent)
        for index, arm in enumerate(arms[:2]):
            holds = condition if index == 0 else ex.Unary("!", condition)
            node = self.construct("branch", arm, parent, condition=holds)
            self.statement(arm, node)

    def opaque_loop(self, cursor, parent: Construct, what: str) -> None:
        line = cursor.extent.start.line
        header = LoopHeader(
            iv=f"t_{line}",
            init=ex.Num(0),
            step=1,
            conditions=(),
            unknown=f"{what} loop",
            iterations=f"iters_{line}",
        )
        node = self.construct("loop", cursor, parent, loop=header)
        node.element_size = self.element_size(cursor)
        children = list(cursor.get_children())
        if not children:
            return
        body = children[0] if cursor.kind == self.kinds.DO_STMT else children[-1]
        for child in children:
            if child is not body:
                self.statement(child, node)
        self.statement(body, self.construct("body", body, node))

    def for_loop(self, cursor, parent: Construct) -> None:
        tokens = [t.spelling for t in cursor.get_tokens()]
        close = _matching_paren_spellings(tokens, 1)
        parts = _split_top_level(tokens[2:close], ";")
        line = cursor.extent.start.line
        header = _canonical_loop(parts, line) if len(parts) == 3 else None
        if header is None or _leaves_early(cursor, self.kinds):
            why = "a loop with break/return/goto" if header else "a non-canonical for loop"
            header = LoopHeader(
                iv=header.iv if header else f"t_{line}",
                init=ex.Num(0),
                step=1,
                conditions=(),
                unknown=why,
                iterations=f"iters_{line}",
            )
        node = self.construct("loop", cursor, parent, loop=header)
        node.element_size = self.element_size(cursor)
        children = list(cursor.get_children())
        if children:
            for child in children[:-1]:
                self.statement(child, parent)  # init/cond/inc calls belong to the header
            self.statement(children[-1], self.construct("body", children[-1], node))

    def element_size(self, cursor) -> int:
        """Size of the widest array element the loop indexes (bytes); 0 when none."""
        sizes = [
            c.type.get_size()
            for c in cursor.walk_preorder()
            if c.kind == self.kinds.ARRAY_SUBSCRIPT_EXPR and c.type.get_size() > 0
        ]
        if not sizes:
            # operator[] on classes: the element type is the call's result type.
            sizes = [
                c.type.get_pointee().get_size() if c.type.get_pointee().get_size() > 0 else 0
                for c in cursor.walk_preorder()
                if c.kind == self.kinds.CALL_EXPR and c.spelling in ("operator[]", "at")
            ]
        sizes = [s for s in sizes if s > 0]
        return max(sizes, default=0)

    # --- annotations -----------------------------------------------------------------
    def attach_annotations(self, unit) -> None:
        tokens = list(unit.get_tokens(extent=unit.cursor.extent))
        for index, token in enumerate(tokens):
            if token.spelling != "pragma" or index == 0 or tokens[index - 1].spelling != "#":
                continue
            if index + 2 >= len(tokens) or tokens[index + 1].spelling != "@":
                continue
            if tokens[index + 2].spelling != "Annotation":
                continue
            line = token.location.line
            pairs = _annotation_pairs(tokens, index + 3)
            unknown = sorted(set(pairs) - ANNOTATION_KEYS)
            if unknown:
                raise InputError(
                    f"unknown annotation key(s) {unknown}; known: {sorted(ANNOTATION_KEYS)}",
                    path=self.path,
                    line=line,
                )
            target = self.annotation_target(line)
            if target is None:
                self.warnings.append(f"{self.path}:{line}: annotation outside any function")
                continue
            target.annotations.update(pairs)
        for function in self.functions:
            for node in function.root.walk():
                if node.kind == "loop" and node.annotations:
                    node.loop = _annotated_loop(node, self.path)
                if node.kind == "branch" and "br_ratio" in node.annotations:
                    node.ratio = ex.sanitize(node.annotations["br_ratio"])

    def annotation_target(self, line: int) -> Construct | None:
        for function in self.functions:
            if function.root.contains(self.path, (line, 1)):
                node = function.root.innermost(self.path, (line, 10**6))
                while node.kind not in ("loop", "branch", "function") and node.parent:
                    node = node.parent
                return node
        return None


def _annotated_loop(node: Construct, path: str) -> LoopHeader:
    header = node.loop
    assert header is not None
    notes = node.annotations
    if "lp_iters" in notes:
        return LoopHeader(
            iv=header.iv,
            init=ex.Num(0),
            step=1,
            conditions=(),
            unknown="annotated iteration count",
            iterations=ex.sanitize(notes["lp_iters"]),
        )
    if "lp_init" not in notes and "lp_cond" not in notes:
        return header
    init = ex.Var(notes["lp_init"]) if "lp_init" in notes else header.init
    conditions = header.conditions
    if "lp_cond" in notes:
        op = "<" if header.step > 0 else ">"
        conditions = (ex.Binary(op, ex.Var(header.iv), ex.Var(notes["lp_cond"])),)
    if not conditions:
        raise InputError(
            "lp_init alone cannot complete this loop: also give lp_cond", path=path, line=node.line
        )
    return LoopHeader(iv=header.iv, init=init, step=header.step or 1, conditions=conditions)


def _annotation_pairs(tokens, start: int) -> dict[str, str]:
    pairs: dict[str, str] = {}
    if start >= len(tokens) or tokens[start].spelling != "{":
        return pairs
    index = start + 1
    key: str | None = None
    value: list[str] = []
    while index < len(tokens) and tokens[index].spelling != "}":
        spelling = tokens[index].spelling
        if spelling == ":" and key is None and value:
            key, value = "".join(value), []
        elif spelling == ",":
            if key is not None:
                pairs[key] = "".join(value)
            key, value = None, []
        else:
            value.append(spelling)
        index += 1
    if key is not None:
        pairs[key] = "".join(value)
    return pairs


_WRITES = frozenset({"=", "+=", "-=", "*=", "/=", "%=", "<<=", ">>=", "&=", "|=", "^="})


def _initializer_tokens(variable) -> list[str]:
    """The spellings after ``name =`` in a variable declaration ([] for none or ``{}``)."""
    spellings = _spellings(variable)
    for index in range(len(spellings) - 1):
        if spellings[index] == variable.spelling and spellings[index + 1] == "=":
            rest = spellings[index + 2 :]
            return rest[:-1] if rest and rest[-1] in (",", ";") else rest
    return []


def _spellings(cursor) -> list[str]:
    return [t.spelling for t in cursor.get_tokens()]


def _is_integer_type(spelling: str) -> bool:
    words = spelling.replace("const", "").split()
    return (
        "*" not in spelling
        and "&" not in spelling
        and bool(words)
        and all(w in ex._TYPE_WORDS or w.endswith("_t") for w in words)
    )


def _matching_paren(tokens, open_index: int) -> int:
    return _matching_paren_spellings([t.spelling for t in tokens], open_index)


def _matching_paren_spellings(tokens: Sequence[str], open_index: int) -> int:
    depth = 0
    for index in range(open_index, len(tokens)):
        if tokens[index] == "(":
            depth += 1
        elif tokens[index] == ")":
            depth -= 1
            if depth == 0:
                return index
    raise InputError(f"unbalanced parentheses in `{' '.join(tokens[:12])}`")


def _split_top_level(tokens: Sequence[str], separator: str) -> list[list[str]]:
    parts: list[list[str]] = [[]]
    depth = 0
    for token in tokens:
        if token in ("(", "[", "{"):
            depth += 1
        elif token in (")", "]", "}"):
            depth -= 1
        if token == separator and depth == 0:
            parts.append([])
        else:
            parts[-1].append(token)
    return parts


def _canonical_loop(parts: list[list[str]], line: int) -> LoopHeader | None:
    """``for (int i = a; i < b && i < c; i += s)`` -> LoopHeader, or None."""
    init_tokens, cond_tokens, inc_tokens = parts
    if "=" not in init_tokens or not cond_tokens or not inc_tokens:
        return None
    equals = init_tokens.index("=")
    if "," in init_tokens:
        return None
    iv = init_tokens[equals - 1]
    init = ex.parse(init_tokens[equals + 1 :])
    step = _step(iv, inc_tokens)
    if step is None or step == 0:
        return None
    condition = ex.parse(cond_tokens)
    conjuncts = _conjuncts(condition)
    if not conjuncts or not all(iv in ex.names(c) for c in conjuncts[:1]):
        return None
    if step not in (1, -1) and any(isinstance(c, ex.Binary) and c.op == "!=" for c in conjuncts):
        return None
    conditions = tuple(_strict(c, iv, step) for c in conjuncts)
    return LoopHeader(iv=iv, init=init, step=step, conditions=conditions)


def _strict(condition: ex.Expr, iv: str, step: int) -> ex.Expr:
    """``i != n`` in a counting loop means ``i < n`` (or ``i > n`` counting down)."""
    if isinstance(condition, ex.Binary) and condition.op == "!=":
        if condition.left == ex.Var(iv):
            return ex.Binary("<" if step > 0 else ">", condition.left, condition.right)
        if condition.right == ex.Var(iv):
            return ex.Binary(">" if step > 0 else "<", condition.left, condition.right)
    return condition


def _conjuncts(expr: ex.Expr) -> list[ex.Expr]:
    if isinstance(expr, ex.Binary) and expr.op == "&&":
        return _conjuncts(expr.left) + _conjuncts(expr.right)
    if isinstance(expr, ex.Binary) and expr.op in ex.COMPARISONS:
        return [expr]
    return []


def _step(iv: str, tokens: list[str]) -> int | None:
    if tokens in ([iv, "++"], ["++", iv]):
        return 1
    if tokens in ([iv, "--"], ["--", iv]):
        return -1
    if len(tokens) >= 3 and tokens[0] == iv and tokens[1] in ("+=", "-="):
        value = ex.constant_value(ex.parse(tokens[2:]))
        if value is None:
            return None
        return value if tokens[1] == "+=" else -value
    if len(tokens) >= 5 and tokens[0] == iv and tokens[1] == "=" and tokens[2] == iv:
        value = ex.constant_value(ex.parse(tokens[4:]))
        if value is None or tokens[3] not in "+-":
            return None
        return value if tokens[3] == "+" else -value
    return None


def _leaves_early(cursor, kinds) -> bool:
    """Does the body contain a break/return/goto that can end this loop early?"""
    nested_loops = {kinds.FOR_STMT, kinds.WHILE_STMT, kinds.DO_STMT, kinds.CXX_FOR_RANGE_STMT}

    def visit(node, inside_nested: bool) -> bool:
        for child in node.get_children():
            kind = child.kind
            if kind in (kinds.RETURN_STMT, kinds.GOTO_STMT):
                return True
            if kind == kinds.BREAK_STMT and not inside_nested:
                return True
            if kind == kinds.LAMBDA_EXPR:
                continue
            nested = inside_nested or kind in nested_loops or kind == kinds.SWITCH_STMT
            if visit(child, nested):
                return True
        return False

    children = list(cursor.get_children())
    return bool(children) and visit(children[-1], False)
