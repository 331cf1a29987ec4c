"""Source-to-source instrumentation of loops and branches with libclang.

For every function definition of the project (its own files, not system headers) the
rewriter inserts, as text, calls into the perfcast taint runtime:

* a frame at the top of the body (``__PERFCAST_FRAME``), so records are per call path; it
  holds one record per condition site, which the runtime adds to the calling context when
  the frame ends;
* around every loop ``__perfcast_loop_begin/end``, so calls know which loop they sit in;
* around every loop exit condition and every ``if``/``switch`` condition an inline sink
  (``__perfcast_cond``, no call) that adds the condition's taint labels and outcome to the
  frame's record of its site (``&__pc_sites[N]``) and keeps its labels in a local *slot*
  variable, as a *carrier* (data 0, the labels as its own DataFlowSanitizer label); ``if``
  conditions that guard a ``break``/``return`` are recorded as exit guards of the loops
  they leave; range-for loops check ``begin != end``;
* control-flow taint, which DataFlowSanitizer lacks: an assignment, increment, modifying
  member call or ``return`` made under a branch or inside a loop gets the labels of the
  enclosing conditions: a scalar by or-ing the carriers into the stored word inline
  (``__perfcast_flow_scalar``), an aggregate through the runtime (``__perfcast_flow``). A
  simple variable only inherits from conditions whose statement does not also contain its
  declaration, because a variable born inside a loop body does not carry the trip count out
  of the loop;
* the control a call is made under, handed to the callee when it is project code
  (``__perfcast_call`` before the call, ``__pc_in`` in the callee): the callee's own writes
  that outlive its frame inherit it, so a branch taints what its callee really writes, not
  the whole object the callee is called on. Only calls into code the rewriter cannot see
  (system headers, libraries: ``v.push_back(x)``) still taint their whole object;
* per call of a recorded function or library routine a call-site number, pushed with the
  callee's id, so that two calls from one loop of one caller stay two calling contexts and
  their dependencies add (``f(x1); f(x2);`` is ``x1 + x2``, not ``x1*x2``).

Only insertions are made (plus the left-hand side of instrumented assignments, which is
re-emitted), never new lines, so line numbers stay those of the original file; a ``#line``
directive after the prelude keeps diagnostics pointing at the user's file.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from clang import cindex
from clang.cindex import Cursor, CursorKind, StorageClass, TypeKind

from perfcast.csource.syntax import (
    ASSIGN_OPS,
    FRAME_KINDS,
    LOOP_KINDS,
    STEP_OPS,
    SourceText,
    strip,
)
from perfcast.taint.sitemap import Loop, Site

CK = CursorKind

SCALAR_TYPES = {
    TypeKind.BOOL,
    TypeKind.CHAR_U,
    TypeKind.UCHAR,
    TypeKind.CHAR16,
    TypeKind.CHAR32,
    TypeKind.USHORT,
    TypeKind.UINT,
    TypeKind.ULONG,
    TypeKind.ULONGLONG,
    TypeKind.CHAR_S,
    TypeKind.SCHAR,
    TypeKind.WCHAR,
    TypeKind.SHORT,
    TypeKind.INT,
    TypeKind.LONG,
    TypeKind.LONGLONG,
    TypeKind.FLOAT,
    TypeKind.DOUBLE,
    TypeKind.LONGDOUBLE,
    TypeKind.POINTER,
    TypeKind.ENUM,
}
SIMPLE_OBJECT_TOKENS = {".", "this", "->"}
REFERENCE_TYPES = {TypeKind.LVALUEREFERENCE, TypeKind.RVALUEREFERENCE}
UNEVALUATED = {CK.LAMBDA_EXPR, CK.CXX_UNARY_EXPR}
"""Expressions whose calls are not instrumented: a lambda body is no frame of the function
(``__pc_in`` is not captured), ``sizeof``/``alignof`` operands never run."""
CALL_RANK = 10_000
"""Rank depth of call-site edits: inside every statement-level edit at the same offset."""
LIBRARY_CALLEE = -2
"""Callee id pushed before a call of a library routine (the runtime's MPI wrappers pop it)."""


@dataclass(order=True)
class Edit:
    """Insert ``text`` at ``start`` (``end == start``) or replace ``[start, end)``.

    ``rank`` orders edits at the same offset: closing text before opening text, inner
    closers before outer ones, outer openers before inner ones.
    """

    start: int
    rank: tuple[int, int]
    end: int = field(compare=False)
    text: str = field(compare=False)


def apply_edits(data: bytes, edits: list[Edit]) -> bytes:
    out: list[bytes] = []
    pos = 0
    for edit in sorted(edits):
        if edit.start < pos:  # overlapping replacement: the rewriter never produces one
            raise AssertionError(f"overlapping edits at byte {edit.start}")
        out.append(data[pos : edit.start])
        out.append(edit.text.encode())
        pos = edit.end
    out.append(data[pos:])
    return b"".join(out)


def is_constant_expression(cursor: Cursor) -> bool:
    cursor = strip(cursor)
    kind = cursor.kind
    if kind in (CK.INTEGER_LITERAL, CK.CHARACTER_LITERAL, CK.CXX_BOOL_LITERAL_EXPR):
        return True
    if kind == CK.CXX_UNARY_EXPR:  # sizeof / alignof
        return True
    if kind in (CK.BINARY_OPERATOR, CK.UNARY_OPERATOR, CK.CSTYLE_CAST_EXPR):
        children = list(cursor.get_children())
        return bool(children) and all(is_constant_expression(c) for c in children)
    if kind == CK.DECL_REF_EXPR and cursor.referenced is not None:
        ref = cursor.referenced
        if ref.kind == CK.ENUM_CONSTANT_DECL:
            return True
        if ref.kind == CK.VAR_DECL and ref.type.is_const_qualified():
            inits = [c for c in ref.get_children() if c.kind != CK.TYPE_REF]
            return len(inits) == 1 and is_constant_expression(inits[0])
    return False


class FunctionRewriter:
    """Instruments one function body; ``record`` False keeps only control-flow taint."""

    def __init__(
        self,
        source: SourceText,
        cursor: Cursor,
        fid: int,
        *,
        record: bool,
        cplusplus: bool,
        constant_loops: set[int],
        project: Mapping[str, int | None],
        library_routines: Collection[str],
    ):
        self.src = source
        self.cursor = cursor
        self.fid = fid
        self.record = record
        self.cplusplus = cplusplus
        self.constant_loops = constant_loops  # body offsets of loops with constant trip counts
        self.project = project  # USR of each rewritten function -> its id if it has a frame
        self.library_routines = library_routines
        self.call_sites = 0
        self._inherits = False  # some edit uses the control inherited from the caller
        self.edits: list[Edit] = []
        self.loops: list[Loop] = []
        self.sites: list[Site] = []
        self._scopes: list[_Scope] = []
        self._loop_stack: list[int] = []
        self._breakables: list[int | None] = []  # loop index, or None for a switch
        self.branch_calls: dict[int, set[tuple[str, str]]] = {}  # site -> (USR, name)
        self.call_branches: list[list[int]] = []  # call site -> branch sites around it
        self._depth = 0

    # ---- edits --------------------------------------------------------------------------
    def _open(self, offset: int, text: str) -> None:
        self.edits.append(Edit(offset, (1, self._depth), offset, text))

    def _close(self, offset: int, text: str) -> None:
        self.edits.append(Edit(offset, (0, -self._depth), offset, text))

    # ---- entry --------------------------------------------------------------------------
    def run(self, body: Cursor) -> None:
        for statement in body.get_children():
            self._statement(statement)
        self._resolve_loop_controls()
        brace = body.extent.start.offset + 1
        prelude = []
        if self.record:
            prelude.append(f"__PERFCAST_FRAME({self.fid}, {len(self.sites)});")
        if self._inherits:
            prelude.append("__PERFCAST_INHERIT;")
        if self.sites:
            slots = ", ".join(f"__pc_s{s.index} = 0" for s in self.sites)
            prelude.append(f"__attribute__((unused)) __pc_label {slots};")
        if self.record and self.cursor.spelling == "main":
            params = [c.spelling for c in self.cursor.get_children() if c.kind == CK.PARM_DECL]
            if len(params) >= 2 and all(params[:2]):
                prelude.append(f"__perfcast_argv({params[0]}, {params[1]});")
        if prelude:
            self.edits.append(Edit(brace, (1, -1), brace, " " + " ".join(prelude) + " "))

    # ---- statements ---------------------------------------------------------------------
    def _statement(self, cursor: Cursor) -> None:
        kind = cursor.kind
        self._depth += 1
        try:
            if kind in LOOP_KINDS:
                self._loop(cursor)
            elif kind == CK.IF_STMT:
                self._if(cursor)
            elif kind == CK.SWITCH_STMT:
                self._switch(cursor)
            elif kind == CK.BREAK_STMT:
                self._break()
            elif kind in (CK.RETURN_STMT, CK.GOTO_STMT):
                self._leave_function(cursor)
                self._call_sites(cursor)
            elif kind == CK.CASE_STMT:  # the label is a constant expression: leave it
                self._statement(list(cursor.get_children())[-1])
            elif kind in (
                CK.COMPOUND_STMT,
                CK.LABEL_STMT,
                CK.DEFAULT_STMT,
                CK.CXX_TRY_STMT,
                CK.CXX_CATCH_STMT,
            ):
                for child in cursor.get_children():
                    if child.kind.is_statement() or child.kind.is_expression():
                        self._statement(child)
            elif kind == CK.DECL_STMT:
                self._call_sites(cursor)
            elif kind.is_expression():
                self._expression_statement(cursor)
                self._call_sites(cursor)
        finally:
            self._depth -= 1

    def _parens(self, cursor: Cursor, keyword: str, after: int | None = None) -> tuple[int, int]:
        """Token indices of the ``(`` and matching ``)`` following ``keyword``."""
        start = cursor.extent.start.offset if after is None else after
        index = self.src.first_at(start)
        tokens = self.src.tokens
        while index < len(tokens) and tokens[index].spelling != keyword:
            index += 1
        while index < len(tokens) and tokens[index].spelling != "(":
            if tokens[index].spelling in ("{", ";"):
                raise _Skip
            index += 1
        if index >= len(tokens):
            raise _Skip
        open_index, level = index, 0
        for index in range(open_index, len(tokens)):
            spelling = tokens[index].spelling
            if spelling in ("(", "[", "{"):
                level += 1
            elif spelling in (")", "]", "}"):
                level -= 1
                if level == 0:
                    return open_index, index
        raise _Skip

    def _top_level(self, first: int, last: int, spelling: str) -> list[int]:
        """Token indices of ``spelling`` strictly between ``first`` and ``last`` at depth 0."""
        found, level = [], 0
        for index in range(first + 1, last):
            s = self.src.tokens[index].spelling
            if s in ("(", "[", "{"):
                level += 1
            elif s in (")", "]", "}"):
                level -= 1
            elif s == spelling and level == 0:
                found.append(index)
        return found

    def _wrap_condition(self, first: int, last: int, site: Site | None, slot: int) -> None:
        """Wrap the tokens ``first..last`` (inclusive) in a condition sink."""
        tokens = self.src.tokens
        if first > last:
            return
        start, end = tokens[first].start, tokens[last].end
        self._open(start, "__perfcast_cond(!!(")
        self._close(end, f"), &__pc_s{slot}, {_site_record(site)})")

    def _new_site(self, kind: str, line: int, loop: int | None) -> Site:
        site = Site(
            index=len(self.sites),
            kind=kind,
            line=line,
            loop=loop,
            branches=self._enclosing_branches() if kind == "branch" else [],
        )
        self.sites.append(site)
        return site

    def _enclosing_branches(self) -> list[int]:
        """Branch sites whose arms hold the statement being rewritten: a loop, branch or
        call under them runs or not as their conditions decide (control dependence)."""
        return [scope.site.index for scope in self._scopes if scope.site is not None]

    # ---- loops --------------------------------------------------------------------------
    def _loop(self, cursor: Cursor) -> None:
        kind = LOOP_KINDS[cursor.kind]
        keyword = {"range-for": "for"}.get(kind, kind)
        first = self.src.tokens[self.src.first_at(cursor.extent.start.offset)]
        if first.spelling != keyword:  # written inside a macro: leave it alone
            return
        children = list(cursor.get_children())
        body = children[0] if kind == "do" else children[-1]
        for part in children:
            if part != body and part.kind != CK.VAR_DECL:
                self._call_sites(part)
        try:
            if kind == "do":
                lparen, rparen = self._parens(cursor, "while", after=body.extent.end.offset)
            else:
                lparen, rparen = self._parens(cursor, keyword)
        except _Skip:
            return
        index = len(self.loops)
        parent = self._loop_stack[-1] if self._loop_stack else None
        line = cursor.location.line
        site: Site | None = None
        cond_first, cond_last = lparen + 1, rparen - 1
        if kind == "for":
            semis = self._top_level(lparen, rparen, ";")
            if len(semis) != 2:
                return
            cond_first, cond_last = semis[0] + 1, semis[1] - 1
        elif kind == "range-for":
            colons = self._top_level(lparen, rparen, ":")
            if not colons:
                return
            cond_first = colons[-1] + 1
        has_condition = cond_first <= cond_last
        if kind == "range-for" and self.src.tokens[cond_first].spelling == "{":
            has_condition = False  # a braced list: its length is fixed in the source
        if has_condition:
            site = self._new_site("loop", line, index)
        loop = Loop(
            index=index,
            kind=kind,
            line=line,
            parent=parent,
            condition=site.index if site is not None else None,
            constant=cursor.extent.start.offset in self.constant_loops,
            branches=self._enclosing_branches(),
        )
        self.loops.append(loop)
        if site is not None:
            self._condition_for_loop(kind, cond_first, cond_last, site)
        if self.record:
            self._open(cursor.extent.start.offset, f"{{ __perfcast_loop_begin({index}); ")
            self._close(
                self.src.statement_end(cursor),
                f" __perfcast_loop_end({-1 if parent is None else parent}); }}",
            )
        scope = _Scope(
            start=cursor.extent.start.offset,
            end=cursor.extent.end.offset,
            slot=site.index if site is not None else None,
            site=None,
            loops=list(self._loop_stack),
            loop=index,
        )
        self._scopes.append(scope)
        self._loop_stack.append(index)
        self._breakables.append(index)
        try:
            self._statement(body)
        finally:
            self._breakables.pop()
            self._loop_stack.pop()
            self._scopes.pop()

    def _condition_for_loop(self, kind: str, first: int, last: int, site: Site) -> None:
        record = _site_record(site if self.record else None)
        if kind == "range-for":
            if not self.cplusplus:
                return
            tokens = self.src.tokens
            self._open(tokens[first].start, f"__perfcast_range({record}, &__pc_s{site.index}, ")
            self._close(tokens[last].end, ")")
        else:
            self._wrap_condition(first, last, site if self.record else None, site.index)

    # ---- branches -----------------------------------------------------------------------
    def _if(self, cursor: Cursor) -> None:
        tokens = self.src.tokens
        start = self.src.first_at(cursor.extent.start.offset)
        if tokens[start].spelling != "if":
            return
        try:
            lparen, rparen = self._parens(cursor, "if")
        except _Skip:
            return
        constexpr = tokens[start + 1].spelling == "constexpr"
        boundary = tokens[rparen].end
        children = list(cursor.get_children())
        header = [c for c in children if c.extent.start.offset < boundary]
        bodies = [c for c in children if c.extent.start.offset >= boundary]
        plain = (
            not constexpr
            and not self._top_level(lparen, rparen, ";")
            and not any(c.kind in (CK.VAR_DECL, CK.DECL_STMT) for c in header)
        )
        site = None
        if plain:
            site = self._new_site(
                "branch", cursor.location.line, self._loop_stack[-1] if self._loop_stack else None
            )
            self._wrap_condition(lparen + 1, rparen - 1, site if self.record else None, site.index)
        if not constexpr:
            for part in header:
                self._call_sites(part)
        self._branch_scope(cursor, site, bodies)

    def _switch(self, cursor: Cursor) -> None:
        try:
            lparen, rparen = self._parens(cursor, "switch")
        except _Skip:
            return
        children = list(cursor.get_children())
        condition = [c for c in children if c.extent.start.offset < self.src.tokens[rparen].end]
        bodies = [c for c in children if c.extent.start.offset >= self.src.tokens[rparen].end]
        site = None
        value = strip(condition[-1]) if condition else None
        if (
            value is not None
            and not self._top_level(lparen, rparen, ";")
            and value.type.get_canonical().kind in SCALAR_TYPES
        ):
            site = self._new_site(
                "branch", cursor.location.line, self._loop_stack[-1] if self._loop_stack else None
            )
            text = self.src.text(self.src.tokens[lparen + 1].start, self.src.tokens[rparen - 1].end)
            self._open(
                self.src.tokens[lparen + 1].start,
                f"(__typeof__({text}))__perfcast_value((long long)(",
            )
            record = _site_record(site if self.record else None)
            self._close(self.src.tokens[rparen - 1].end, f"), &__pc_s{site.index}, {record})")
        for part in condition:
            self._call_sites(part)
        self._breakables.append(None)
        try:
            self._branch_scope(cursor, site, bodies)
        finally:
            self._breakables.pop()

    def _branch_scope(self, cursor: Cursor, site: Site | None, bodies: list[Cursor]) -> None:
        if site is not None:
            self.branch_calls[site.index] = {
                callee
                for body in bodies
                for node in body.walk_preorder()
                if node.kind == CK.CALL_EXPR and (callee := _callee_key(node)) is not None
            }
        scope = _Scope(
            start=cursor.extent.start.offset,
            end=cursor.extent.end.offset,
            slot=site.index if site is not None else None,
            site=site,
            loops=list(self._loop_stack),
            loop=None,
        )
        self._scopes.append(scope)
        try:
            for body in bodies:
                self._statement(body)
        finally:
            self._scopes.pop()

    # ---- early exits --------------------------------------------------------------------
    def _break(self) -> None:
        if not self._breakables or self._breakables[-1] is None:
            return
        target = self._breakables[-1]
        for scope in reversed(self._scopes):
            if scope.loop == target:
                break
            if scope.site is not None and target not in scope.site.exits:
                scope.site.exits.append(target)

    def _leave_function(self, cursor: Cursor) -> None:
        for scope in self._scopes:
            if scope.site is not None:
                for loop in scope.loops:
                    if loop not in scope.site.exits:
                        scope.site.exits.append(loop)
        if cursor.kind == CK.RETURN_STMT:
            self._return_flow(cursor)

    # ---- control-flow taint -------------------------------------------------------------
    def _control(self, declared_at: int | None) -> str:
        """The OR of the slots of enclosing conditions a write at this point depends on.

        ``declared_at`` is the declaration offset of a simple local variable being written;
        conditions whose statement encloses that declaration do not reach it."""
        slots = [
            f"@loop{scope.loop}@" if scope.loop is not None else f"__pc_s{scope.slot}"
            for scope in self._scopes
            if (scope.slot is not None or scope.loop is not None)
            and (declared_at is None or not scope.start <= declared_at < scope.end)
        ]
        return " | ".join(dict.fromkeys(slots))

    def _resolve_loop_controls(self) -> None:
        """A loop's control labels are those of its condition and of its exit guards, which
        are only all known once the body has been visited."""
        for edit in self.edits:
            for loop in self.loops:
                marker = f"@loop{loop.index}@"
                if marker in edit.text:
                    slots = [f"__pc_s{s}" for s in self._loop_sites(loop)] or ["0"]
                    edit.text = edit.text.replace(marker, "(" + " | ".join(slots) + ")")

    def _loop_sites(self, loop: Loop) -> list[int]:
        found = [loop.condition] if loop.condition is not None else []
        return found + [s.index for s in self.sites if loop.index in s.exits]

    def _declared_at(self, lvalue: Cursor) -> int | None:
        target = strip(lvalue)
        if target.kind != CK.DECL_REF_EXPR or target.referenced is None:
            return None
        ref = target.referenced
        if ref.kind not in (CK.VAR_DECL, CK.PARM_DECL) or ref.location.file is None:
            return None
        if Path(ref.location.file.name).resolve() != self.src.path:
            return None
        return int(ref.extent.start.offset)

    def _write_control(self, target: Cursor | None) -> str:
        """The control labels of a write to ``target``: those of the enclosing conditions
        and, unless the target lives in this frame and dies with it, the control this call
        was made under (``__pc_in``): what a callee writes for its caller under a branch of
        the caller carries that branch."""
        local = self._control(None if target is None else self._declared_at(target))
        if target is not None and _is_local(target):
            return local
        self._inherits = True
        return f"{local} | __pc_in" if local else "__pc_in"

    def _writable(self, lvalue: Cursor) -> bool:
        target = strip(lvalue)
        ref = target.referenced if target.kind == CK.MEMBER_REF_EXPR else None
        if ref is not None and ref.kind == CK.FIELD_DECL and ref.is_bitfield():
            return False
        kind = lvalue.type.get_canonical().kind
        if kind in SCALAR_TYPES:
            return True
        return not self.cplusplus and kind in (TypeKind.RECORD, TypeKind.ELABORATED)

    def _expression_statement(self, cursor: Cursor) -> None:
        cursor = strip(cursor)  # a call with temporaries (``v.push_back(1)``) comes wrapped
        if cursor.kind in (CK.BINARY_OPERATOR, CK.COMPOUND_ASSIGNMENT_OPERATOR):
            self._assignment_flow(cursor)
        elif cursor.kind == CK.UNARY_OPERATOR:
            self._step_flow(cursor)
        elif cursor.kind == CK.CALL_EXPR:
            self._call_flow(cursor)

    def _assignment_flow(self, cursor: Cursor) -> None:
        children = list(cursor.get_children())
        if len(children) != 2:
            return
        lhs, rhs = children
        index = self.src.first_at(lhs.extent.end.offset)
        if index >= len(self.src.tokens):
            return
        op = self.src.tokens[index]
        if op.spelling not in ASSIGN_OPS or rhs.extent.start.offset < op.end:
            return
        if not self._writable(lhs):
            return
        control = self._write_control(lhs)
        if not control:
            return
        target = self.src.text(lhs.extent.start.offset, lhs.extent.end.offset)
        self.edits.append(
            Edit(
                lhs.extent.start.offset,
                (1, self._depth),
                op.end,
                f"({{ __typeof__(&({target})) __pc_p = &({target}); *__pc_p {op.spelling} (",
            )
        )
        self._close(
            rhs.extent.end.offset,
            f"); {_flow(lhs, control)}; }})",
        )

    def _step_flow(self, cursor: Cursor) -> None:
        tokens = self.src.tokens_in(cursor.extent.start.offset, cursor.extent.end.offset)
        children = list(cursor.get_children())
        if not tokens or len(children) != 1:
            return
        prefix = tokens[0].spelling in STEP_OPS
        if not prefix and tokens[-1].spelling not in STEP_OPS:
            return
        operand = children[0]
        if not self._writable(operand):
            return
        control = self._write_control(operand)
        if not control:
            return
        target = self.src.text(operand.extent.start.offset, operand.extent.end.offset)
        step = tokens[0].spelling if prefix else tokens[-1].spelling
        self.edits.append(
            Edit(
                cursor.extent.start.offset,
                (1, self._depth),
                cursor.extent.end.offset,
                f"({{ __typeof__(&({target})) __pc_p = &({target}); (*__pc_p){step}; "
                f"{_flow(operand, control)}; }})",
            )
        )

    def _call_flow(self, cursor: Cursor) -> None:
        """A call into code the rewriter cannot see that modifies an object (non-const
        method, ``f(&x)``) writes the whole object. Project code is left to its own
        instrumentation: it inherits the call's control (:meth:`_call_sites`) and taints
        what it really writes.

        The object is reached through its address, and only an lvalue has one: a method
        called through a pointer (``this->resize(n)``, ``p->f()``, or ``resize(n)`` with
        ``this`` implied) writes ``*pointer``, never the pointer, which may be an rvalue."""
        callee = cursor.referenced
        if callee is None or callee.get_usr() in self.project:
            return
        objects: list[_Object] = []
        children = list(cursor.get_children())
        if (
            children
            and children[0].kind == CK.MEMBER_REF_EXPR
            and callee.kind == CK.CXX_METHOD
            and not callee.is_const_method()
            and not callee.is_static_method()
        ):
            receiver = self._receiver(children[0])
            if receiver is not None:
                objects.append(receiver)
        parameter_types = (
            list(callee.type.argument_types()) if callee.type.kind == TypeKind.FUNCTIONPROTO else []
        )
        for position, argument in enumerate(children[1:]):
            argument = strip(argument)
            if position >= len(parameter_types):
                break
            if parameter_types[position].get_pointee().is_const_qualified():
                continue  # passed read-only
            if argument.kind == CK.UNARY_OPERATOR:
                tokens = self.src.tokens_in(
                    argument.extent.start.offset, argument.extent.end.offset
                )
                inner = list(argument.get_children())
                if tokens and tokens[0].spelling == "&" and inner:
                    extent = inner[0].extent
                    objects.append(_Object((extent.start.offset, extent.end.offset), False))
        flows = []
        for target in objects:
            if target.extent is None:  # the object of an implied ``this``
                text, at = "this", None
            else:
                start, end = target.extent
                tokens = self.src.tokens_in(start, end)
                simple = all(
                    t.spelling in SIMPLE_OBJECT_TOKENS or t.spelling.isidentifier() for t in tokens
                )
                if not tokens or not simple or "->" in {t.spelling for t in tokens}:
                    continue
                text, at = self.src.text(start, end), self._cursor_at(start)
            control = self._write_control(at)
            if control:
                where = (
                    f"({text}), sizeof(*({text}))"
                    if target.pointer
                    else f"&({text}), sizeof({text})"
                )
                flows.append(f"__perfcast_flow({where}, (__pc_label)({control}))")
        if flows:
            self._open(cursor.extent.start.offset, "(")
            self._close(cursor.extent.end.offset, ", " + ", ".join(flows) + ")")

    def _receiver(self, member: Cursor) -> _Object | None:
        """The object a method is called on. libclang omits the object of a call into a
        class template specialisation (``v.push_back(x)``); its tokens still show it, and
        show none where ``this`` is implied."""
        base = list(member.get_children())
        if base:
            extent = base[0].extent
            pointer = base[0].type.get_canonical().kind == TypeKind.POINTER
            return _Object((extent.start.offset, extent.end.offset), pointer)
        tokens = self.src.tokens_in(member.extent.start.offset, member.extent.end.offset)
        dots = [i for i, t in enumerate(tokens) if t.spelling in (".", "->")]
        if not dots:
            return _Object(None, pointer=True) if self._has_this() else None
        if dots[-1] == 0:
            return None
        arrow = tokens[dots[-1]].spelling == "->"
        return _Object((tokens[0].start, tokens[dots[-1] - 1].end), arrow)

    def _has_this(self) -> bool:
        """Whether the function being rewritten is a non-static member, so has ``this``."""
        kind = self.cursor.kind
        if kind in (CK.CONSTRUCTOR, CK.DESTRUCTOR, CK.CONVERSION_FUNCTION):
            return True
        return kind == CK.CXX_METHOD and not self.cursor.is_static_method()

    def _cursor_at(self, offset: int) -> Cursor | None:
        """The innermost expression starting at ``offset`` (an object named by its tokens)."""
        tu = self.cursor.translation_unit
        handle = tu.get_file(str(self.src.path))
        found = cindex.Cursor.from_location(
            tu, cindex.SourceLocation.from_offset(tu, handle, offset)
        )
        return found if found is not None and found.kind.is_expression() else None

    def _call_sites(self, cursor: Cursor) -> None:
        """Hand the control of the point of call to project callees, and number the calls
        of recorded functions and library routines (``__perfcast_call(control, callee,
        site)`` just before the call: the comma keeps it ahead of the callee's entry, and the
        pushes of calls in the arguments are popped first, as the runtime expects)."""
        replaced = [(e.start, e.end) for e in self.edits if e.end > e.start]

        def visit(node: Cursor, level: int) -> None:
            if node.kind in UNEVALUATED:
                return
            if node.kind == CK.VAR_DECL and _declared_constexpr(node, self.src):
                return
            if node.kind == CK.CALL_EXPR and self._call_site(node, level, replaced):
                level += 1
            for child in node.get_children():
                visit(child, level)

        visit(cursor, 0)

    def _call_site(self, call: Cursor, level: int, replaced: list[tuple[int, int]]) -> bool:
        """Instrument one call; False where it is not project code or a library routine, or
        cannot be wrapped: its callee then inherits the control last announced."""
        callee = call.referenced
        if callee is None or callee.kind == CK.CONSTRUCTOR:
            return False
        usr = callee.get_usr()
        library = callee.spelling in self.library_routines and usr not in self.project
        if usr not in self.project and not library:
            return False
        start, end = call.extent.start.offset, call.extent.end.offset
        tokens = self.src.tokens_in(start, end)
        if (
            not tokens
            or tokens[-1].spelling != ")"
            or callee.spelling not in {t.spelling for t in tokens}
            or any(start < stop and first < end for first, stop in replaced)
        ):
            return False  # spelled by a macro, or inside text an edit re-emits
        fid = LIBRARY_CALLEE if library else self.project[usr]
        site = -1
        if self.record and fid is not None:
            site = self.call_sites
            self.call_sites += 1
            self.call_branches.append(self._enclosing_branches())
        control = self._control(None)
        self._inherits = True
        self.edits.append(
            Edit(
                start,
                (1, CALL_RANK + level),
                start,
                f"(__perfcast_call((__pc_label)({control + ' | ' if control else ''}__pc_in), "
                f"{fid if site >= 0 else -1}, {site}), ",
            )
        )
        self.edits.append(Edit(end, (0, -(CALL_RANK + level)), end, ")"))
        return True

    def _return_flow(self, cursor: Cursor) -> None:
        values = list(cursor.get_children())
        result = self.cursor.result_type
        spelling = result.spelling
        if len(values) != 1 or result.get_canonical().kind not in SCALAR_TYPES:
            return
        if "auto" in spelling or "decltype" in spelling:
            return
        control = self._control(None)
        if not control:
            return
        value = values[0]
        self._open(value.extent.start.offset, f"({{ {spelling} __pc_r = (")
        self._close(
            value.extent.end.offset,
            f"); __perfcast_flow_scalar(&__pc_r, (__pc_label)({control})); __pc_r; }})",
        )


def _site_record(site: Site | None) -> str:
    """The frame's record of a condition site (``__PERFCAST_FRAME`` declares them), or a null
    pointer where the condition only gives control-flow taint (a pruned function)."""
    return "0" if site is None else f"&__pc_sites[{site.index}]"


def _flow(target: Cursor, control: str) -> str:
    """The sink that gives the object just written through ``__pc_p`` the control's labels:
    a scalar takes them inline (the control is or-ed into its value, perfcast_prelude.h), an
    aggregate through the runtime, which labels each byte so that its fields keep their own
    labels."""
    if target.type.get_canonical().kind in SCALAR_TYPES:
        return f"__perfcast_flow_scalar(__pc_p, (__pc_label)({control}))"
    return f"__perfcast_flow(__pc_p, sizeof(*__pc_p), (__pc_label)({control}))"


def _is_local(target: Cursor) -> bool:
    """A variable of the function's own frame (not ``static``, not a reference): writing
    it cannot be seen by the caller once the function returns."""
    target = strip(target)
    if target.kind != CK.DECL_REF_EXPR or target.referenced is None:
        return False
    ref = target.referenced
    if ref.type.get_canonical().kind in REFERENCE_TYPES:
        return False
    if ref.kind == CK.PARM_DECL:
        return True
    parent = ref.semantic_parent
    return (
        ref.kind == CK.VAR_DECL
        and parent is not None
        and parent.kind in FRAME_KINDS
        and ref.storage_class not in (StorageClass.STATIC, StorageClass.EXTERN)
    )


def _declared_constexpr(declaration: Cursor, source: SourceText) -> bool:
    """A compile-time constant's initializer cannot hold a call into the runtime."""
    tokens = source.tokens_in(declaration.extent.start.offset, declaration.extent.end.offset)
    return any(t.spelling in ("constexpr", "constinit") for t in tokens[:4])


def _callee_key(call: Cursor) -> tuple[str, str] | None:
    """(USR, name) of a called function; ``None`` for calls through pointers. The
    instrumenter names project functions by USR and library routines by name."""
    callee = call.referenced
    if callee is None:
        return None
    return callee.get_usr(), callee.spelling


@dataclass
class _Object:
    """An object a call into unseen code may write: the extent (start and end offsets) of the
    expression naming it, ``None`` for an implied ``this``, and whether that expression is a
    pointer to it."""

    extent: tuple[int, int] | None
    pointer: bool


@dataclass
class _Scope:
    """A statement whose condition controls what runs inside it."""

    start: int
    end: int
    slot: int | None  # local site whose slot holds the condition's labels
    site: Site | None  # branch site (for exit guards)
    loops: list[int]  # loops enclosing the statement
    loop: int | None  # the loop itself, for loop scopes


class _Skip(Exception):
    """The construct cannot be instrumented safely (macro, unusual syntax): leave it."""


def loop_is_constant(cursor: Cursor, source: SourceText) -> bool:
    """Static verdict for the pre-pass: a ``for`` loop with literal bounds, an induction
    variable only its header writes, and no early exit from its body; or a range-for
    over a fixed-size array."""
    children = list(cursor.get_children())
    if cursor.kind == CK.CXX_FOR_RANGE_STMT:
        ranges = [c for c in children if c.kind != CK.VAR_DECL]
        if not ranges:
            return False
        first = source.tokens_in(ranges[0].extent.start.offset, ranges[0].extent.end.offset)
        braced = bool(first) and first[0].spelling == "{"
        return braced or strip(ranges[0]).type.get_canonical().kind == TypeKind.CONSTANTARRAY
    if cursor.kind != CK.FOR_STMT or len(children) != 4:
        return False
    init, cond, step, body = children
    variable = _induction_variable(init)
    if variable is None or not _constant_bound(cond, variable):
        return False
    if not _is_step(step, variable, source):
        return False
    body_tokens = source.tokens_in(body.extent.start.offset, body.extent.end.offset)
    for i, token in enumerate(body_tokens):
        if token.spelling in ("break", "return", "goto"):
            return False
        if token.spelling == variable:
            before = body_tokens[i - 1].spelling if i else ""
            after = body_tokens[i + 1].spelling if i + 1 < len(body_tokens) else ""
            if before in STEP_OPS | {"&"} or after in STEP_OPS | ASSIGN_OPS:
                return False
    return True


def _induction_variable(init: Cursor) -> str | None:
    if init.kind == CK.DECL_STMT:
        decls = list(init.get_children())
        if len(decls) == 1 and decls[0].kind == CK.VAR_DECL:
            values = [c for c in decls[0].get_children() if c.kind != CK.TYPE_REF]
            if len(values) == 1 and is_constant_expression(values[0]):
                return str(decls[0].spelling)
    if init.kind == CK.BINARY_OPERATOR:
        parts = list(init.get_children())
        if (
            len(parts) == 2
            and strip(parts[0]).kind == CK.DECL_REF_EXPR
            and is_constant_expression(parts[1])
        ):
            return str(strip(parts[0]).spelling)
    return None


def _constant_bound(cond: Cursor, variable: str) -> bool:
    if cond.kind != CK.BINARY_OPERATOR:
        return False
    parts = list(cond.get_children())
    if len(parts) != 2:
        return False
    names = [strip(p).spelling if strip(p).kind == CK.DECL_REF_EXPR else None for p in parts]
    if names[0] == variable:
        return is_constant_expression(parts[1])
    if names[1] == variable:
        return is_constant_expression(parts[0])
    return False


def _is_step(step: Cursor, variable: str, source: SourceText) -> bool:
    tokens = [
        t.spelling for t in source.tokens_in(step.extent.start.offset, step.extent.end.offset)
    ]
    if tokens in ([variable, "++"], ["++", variable], [variable, "--"], ["--", variable]):
        return True
    if len(tokens) >= 3 and tokens[0] == variable and tokens[1] in ("+=", "-="):
        parts = list(step.get_children())
        return len(parts) == 2 and is_constant_expression(parts[1])
    return False
