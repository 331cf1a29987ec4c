"""What a loop's body does that no skipped iteration may leave out.

A body that calls MPI, does I/O, leaves the program or the loop early, or calls what cannot
be seen (a function pointer, a function no file of the profile defines) would change the
trace or the output when bodies are skipped, whatever values it computes. Calls are judged
through the functions they reach, transitively and across the profile's files, and the
refusal names the chain: ``calls G, which calls MPI_X``.
"""

from __future__ import annotations

import functools
from dataclasses import replace
from pathlib import Path

from clang.cindex import Cursor, CursorKind

from perfcast.csource.cursors import MPI_PREFIXES, callee, children, in_system_header, refusal_at
from perfcast.csource.program import Program
from perfcast.csource.sourcefile import SourceFile
from perfcast.csource.syntax import FUNCTION_KINDS
from perfcast.csource.verdicts import Hop, Reason, Refusal, Step

CK = CursorKind

EXIT_CALLS = {
    "exit",
    "_exit",
    "_Exit",
    "quick_exit",
    "abort",
    "longjmp",
    "_longjmp",
    "siglongjmp",
    "setjmp",
    "sigsetjmp",
    "pthread_exit",
    "raise",
    "kill",
    "terminate",
}
IO_CALLS = {
    "printf",
    "fprintf",
    "vprintf",
    "vfprintf",
    "dprintf",
    "puts",
    "fputs",
    "putchar",
    "fputc",
    "putc",
    "fwrite",
    "fread",
    "fgets",
    "fgetc",
    "getc",
    "getchar",
    "gets",
    "scanf",
    "fscanf",
    "fopen",
    "fclose",
    "fflush",
    "fseek",
    "perror",
    "write",
    "read",
    "pwrite",
    "pread",
    "open",
    "close",
    "send",
    "recv",
    "system",
    "popen",
    "operator<<",
    "operator>>",
}
BREAKABLE = {CK.FOR_STMT, CK.WHILE_STMT, CK.DO_STMT, CK.CXX_FOR_RANGE_STMT, CK.SWITCH_STMT}
LEAVING = {
    CK.RETURN_STMT: "return",
    CK.GOTO_STMT: "goto",
    CK.INDIRECT_GOTO_STMT: "goto",
    CK.LABEL_STMT: "a label",
    CK.CXX_THROW_EXPR: "throw",
}


def local_effect(call: Cursor) -> Refusal | None:
    """What a call does that the rule cannot skip, judged by the callee's name alone;
    None for a harmless call and for a function defined in another file."""
    called = callee(call)
    if called is None or called.kind not in FUNCTION_KINDS:
        if called is None and not children(call):
            return None  # an implicit constructor or conversion
        return refusal_at(Reason.FUNCTION_POINTER, call)
    name = called.spelling
    if called.location.file is None:
        return None  # a compiler builtin (__builtin_expect, implicit declarations)
    if name.startswith(MPI_PREFIXES):
        return refusal_at(Reason.MPI_CALL, call, subject=name)
    if name in EXIT_CALLS:
        return refusal_at(Reason.LEAVES_PROGRAM, call, subject=name)
    if name in IO_CALLS:
        return refusal_at(Reason.IO, call, subject=name)
    return None


def _spread(
    direct: dict[str, Refusal], calls: dict[str, set[str]], names: dict[str, str]
) -> dict[str, Refusal]:
    """Each function's effect (MPI, I/O, ...) with those it has only through its callees:
    ``calls G, which calls MPI_X``, to a fixed point, so a chain of any length is found and
    the reason names it (callees in sorted order, so the reason is the same every build)."""
    effects = dict(direct)
    changed = True
    while changed:
        changed = False
        for usr, callees in calls.items():
            if usr in effects:
                continue
            for called in sorted(callees):
                if called in effects:
                    effects[usr] = effects[called].after(Hop(Step.CALL_IN_CALLEE, names[called]))
                    changed = True
                    break
    return effects


class Effects:
    """Per function of the program: why calling it would change the trace or the output.

    A file's own functions are judged within its translation unit, so that the loop of one
    compile step parses other files only where it calls into them; a call into another
    file is judged over all the profile's files at once.
    """

    def __init__(self, program: Program):
        self.program = program
        self._in_file: dict[Path, dict[str, Refusal]] = {}

    def body_refusal(self, file: SourceFile, body: Cursor) -> Refusal | None:
        """MPI, I/O, early exits and unknown calls in a loop's body."""

        def walk(node: Cursor, breakable: int) -> Refusal | None:
            kind = node.kind
            if kind == CK.BREAK_STMT and breakable == 0:
                return refusal_at(Reason.BREAK, node)
            if kind in LEAVING:
                return refusal_at(Reason.LEAVES_LOOP, node, subject=LEAVING[kind])
            if kind == CK.CALL_EXPR:
                effect = self._of_call(file, node)
                if effect is not None:
                    return effect.after(Hop(Step.BODY))
            inner = breakable + (kind in BREAKABLE)
            for child in node.get_children():
                refusal = walk(child, inner)
                if refusal is not None:
                    return refusal
            return None

        return walk(body, 0)

    def _of_call(self, file: SourceFile, call: Cursor) -> Refusal | None:
        effect = self._call_effect(call)
        if effect is not None:
            return effect
        called = callee(call)
        effects = self._file_effects(file)
        if called is not None and called.get_usr() in effects:
            hop = Hop(Step.CALL, called.spelling, call.location.line)
            return effects[called.get_usr()].after(hop)
        return None

    def _call_effect(self, call: Cursor) -> Refusal | None:
        """What a call does that the rule cannot skip, judged by the callee's name and, for
        a function of another file, by that file; None for a harmless call."""
        effect = local_effect(call)
        if effect is not None:
            return effect
        called = callee(call)
        if called is not None and not called.is_definition() and not in_system_header(called):
            return self._elsewhere(call, called)
        return None

    def _file_effects(self, file: SourceFile) -> dict[str, Refusal]:
        """Per function (USR) of ``file``'s translation unit: its effect, by a fixed point
        over the calls within it (a call to a function of another file is judged by
        :meth:`_elsewhere`)."""
        if file.path in self._in_file:
            return self._in_file[file.path]
        direct: dict[str, Refusal] = {}
        calls: dict[str, set[str]] = {}
        names: dict[str, str] = {}
        for function in file.definitions():
            usr = function.get_usr()
            names[usr] = function.spelling
            calls[usr] = set()
            for node in function.walk_preorder():
                if node.kind != CK.CALL_EXPR:
                    continue
                effect = self._call_effect(node)
                if effect is not None:
                    direct.setdefault(usr, effect)
                called = callee(node)
                if called is not None and called.is_definition():
                    calls[usr].add(called.get_usr())
        effects = self._in_file[file.path] = _spread(direct, calls, names)
        return effects

    def _elsewhere(self, call: Cursor, called: Cursor) -> Refusal | None:
        """What calling ``called``, defined in another file, does that the rule cannot
        skip; None where the file defining it shows nothing such."""
        usr = called.get_usr()
        effects, defined = self._program_effects
        if usr not in defined:
            note = self.program.missing()
            return refusal_at(Reason.UNSEEN_CALLEE, call, subject=called.spelling, note=note)
        effect = effects.get(usr)
        if effect is None:
            return None
        return effect.after(Hop(Step.CALL, called.spelling, call.location.line))

    @functools.cached_property
    def _program_effects(self) -> tuple[dict[str, Refusal], frozenset[str]]:
        """Per function (USR) of any profile file: its effect, by a fixed point over the
        calls of all the files, a call of a function that no profile file defines counting
        as one, since what it does is not visible; and the functions the files define."""
        files, _ = self.program.all_files()
        direct: dict[str, Refusal] = {}
        calls: dict[str, set[str]] = {}
        names: dict[str, str] = {}
        first_call: dict[tuple[str, str], Cursor] = {}
        for file in files:
            for function in file.definitions():
                usr = function.get_usr()
                if usr in calls:
                    continue  # an inline function of a header, seen in an earlier file
                calls[usr] = set()
                for node in function.walk_preorder():
                    if node.kind != CK.CALL_EXPR:
                        continue
                    effect = local_effect(node)
                    if effect is not None and usr not in direct:
                        direct[usr] = replace(effect, in_file=self.program.name(effect.file))
                    called = callee(node)
                    if (
                        called is not None
                        and called.location.file is not None
                        and not in_system_header(called)
                    ):
                        calls[usr].add(called.get_usr())
                        names.setdefault(called.get_usr(), called.spelling)
                        first_call.setdefault((usr, called.get_usr()), node)
        note = self.program.missing()
        for usr, callees in calls.items():
            for unseen in sorted(callees - calls.keys()):
                call = first_call[(usr, unseen)]
                refusal = refusal_at(Reason.UNSEEN_CALLEE, call, subject=names[unseen], note=note)
                direct.setdefault(usr, replace(refusal, in_file=self.program.name(refusal.file)))
        return _spread(direct, calls, names), frozenset(calls)
