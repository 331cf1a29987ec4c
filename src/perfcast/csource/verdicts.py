"""Why a loop may not be shortened: the reasons typed, their English written once.

A refusal names one :class:`Reason`, the place that decides it (the MPI call, the branch,
the ``break``) and what it is about (the callee, the variable and how it depends on the
skipped bodies); ``via`` is the path from the loop to that place: the calls, returns and
memory reads followed across functions and files, each a typed :class:`Hop`. Callers test
the reason and print :meth:`Refusal.describe`; every sentence the analysis says comes from
:data:`WORDING` and :data:`HOP_WORDING`. A loop the rule may take has no refusal: ``None``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace
from pathlib import Path

MAX_FOLLOW_DEPTH = 8
"""How many calls deep a value is followed from a loop into callers and callees; a chain
longer than this is refused rather than searched further."""


class Reason(enum.Enum):
    """Why the threshold rule leaves a loop alone (the value is a short label)."""

    # the plan (perfcast.measure.threshold)
    NOT_BUILT = "file not built here"
    COVERED = "inside a loop the rule covers"
    # the loop as written
    NO_LOOP = "no such loop in the parsed source"
    SEVERAL_LOOPS = "several such loops in the parsed source"
    MACRO = "written inside a macro"
    PRAGMA = "a pragma applies to it"
    CONSTEXPR = "in a constexpr function"
    # what the body does (itself or through the functions it calls)
    BREAK = "breaks out of the loop"
    LEAVES_LOOP = "return, goto, label or throw"
    MPI_CALL = "calls MPI"
    LEAVES_PROGRAM = "can leave the program"
    IO = "does I/O"
    FUNCTION_POINTER = "calls through a function pointer"
    UNSEEN_CALLEE = "calls a function no profile file defines"
    # what the body writes, and who reads it
    WRITES_GLOBAL = "writes a global or static variable"
    WRITES_REFERENCE = "writes through a reference to the caller"
    STORED_GLOBALLY = "a value from the body is stored in a global or static variable"
    STORED_BY_REFERENCE = "a value from the body is stored through a reference"
    HEADER_READS = "the header reads what the body writes"
    HEADER_CALLS = "the header calls a function"
    HEADER_READS_MEMORY = "the header reads memory the body writes"
    DECIDES_BRANCH = "a value from the body decides a branch"
    MPI_ARGUMENT = "a value from the body is an MPI argument"
    MPI_COUNT_ARRAY = "memory from the body is an MPI count array"
    ALLOCATION_SIZE = "a value from the body sizes an allocation"
    # where following a value stops
    RETURNED_BY_VIRTUAL = "returned by a virtual method"
    CALLERS_TOO_DEEP = "callers followed too deep"
    CALLERS_NOT_PARSED = "a profile file with callers does not parse"
    REFERRED_TO = "the function is referred to other than by a call"
    NO_CALLER = "no caller in the profile's files"
    RETURNED_OUTSIDE_FUNCTION = "returned to a call outside any function"
    PASSED_TO_UNSEEN = "passed to a function no profile file defines"
    PASSED_TO_VIRTUAL = "passed to a virtual method"
    VARIADIC_ARGUMENT = "passed as a variadic argument"
    CALLEES_TOO_DEEP = "callees followed too deep"
    READERS_NOT_PARSED = "a profile file that may read the memory does not parse"


WORDING = {
    Reason.NOT_BUILT: "file not built here",
    Reason.COVERED: "inside the loop at line {line}, which the rule covers",
    Reason.NO_LOOP: "no {subject} loop at this line in the parsed source",
    Reason.SEVERAL_LOOPS: "several {subject} loop at this line in the parsed source",
    Reason.MACRO: "written inside a macro",
    Reason.PRAGMA: "a #pragma applies to it",
    Reason.CONSTEXPR: "in a constexpr function",
    Reason.BREAK: "its body can break out of it (line {line})",
    Reason.LEAVES_LOOP: "its body can leave it: {subject} (line {line})",
    Reason.MPI_CALL: "calls {subject} ({at})",
    Reason.LEAVES_PROGRAM: "can leave the program: {subject} ({at})",
    Reason.IO: "does I/O: {subject} ({at})",
    Reason.FUNCTION_POINTER: "calls through a function pointer ({at})",
    Reason.UNSEEN_CALLEE: "calls {subject} ({at}), defined in no file of the profile{note}",
    Reason.WRITES_GLOBAL: "its body writes {subject}, a global or static variable",
    Reason.WRITES_REFERENCE: "its body writes {subject}, a reference to a variable of the caller",
    Reason.STORED_GLOBALLY: "{subject} is a global or static variable",
    Reason.STORED_BY_REFERENCE: "{subject} is a reference to a variable of the caller",
    Reason.HEADER_READS: "its body writes {subject}, which the loop's header reads",
    Reason.HEADER_CALLS: "its header calls {subject}, which the skipped bodies could change",
    Reason.HEADER_READS_MEMORY: (
        "its header reads memory of a type its body writes through a pointer (line {line})"
    ),
    Reason.DECIDES_BRANCH: "{subject} decides {target} at line {line}",
    Reason.MPI_ARGUMENT: "{subject} is an argument of {target} (line {line})",
    Reason.MPI_COUNT_ARRAY: "{subject} is a count or displacement array of {target} (line {line})",
    Reason.ALLOCATION_SIZE: "{subject} decides the size {target} allocates (line {line})",
    Reason.RETURNED_BY_VIRTUAL: (
        "{subject} is returned (line {line}) by a virtual method, whose calls through a base "
        "are not found"
    ),
    Reason.CALLERS_TOO_DEEP: (
        "{subject} is returned (line {line}), and callers are followed no deeper than "
        f"{MAX_FOLLOW_DEPTH} calls"
    ),
    Reason.CALLERS_NOT_PARSED: (
        "{subject} is returned (line {line}), and the callers of {target} cannot all be "
        "found: {note}"
    ),
    Reason.REFERRED_TO: (
        "{subject} is returned (line {line}), and {target} is referred to other than by a "
        "call ({note}), so its callers cannot all be found"
    ),
    Reason.NO_CALLER: (
        "{subject} is returned (line {line}), and no call of {target} is found in the "
        "profile's files"
    ),
    Reason.RETURNED_OUTSIDE_FUNCTION: (
        "{subject} is returned (line {line}) to {note}, outside any function"
    ),
    Reason.PASSED_TO_UNSEEN: (
        "{subject} is passed to {target} (line {line}), which is defined in no file of the "
        "profile{note}"
    ),
    Reason.PASSED_TO_VIRTUAL: (
        "{subject} is passed to {target} (line {line}), a virtual method whose overriders "
        "are not followed"
    ),
    Reason.VARIADIC_ARGUMENT: (
        "{subject} is passed to {target} (line {line}) as a variadic argument, whose use is "
        "not followed"
    ),
    Reason.CALLEES_TOO_DEEP: (
        "{subject} is passed to {target} (line {line}), and callees are followed no deeper "
        f"than {MAX_FOLLOW_DEPTH} calls"
    ),
    Reason.READERS_NOT_PARSED: (
        "its body writes {subject}, whose readers cannot all be found: {note}"
    ),
}
"""The sentence of each reason; ``{at}`` is ``line N``, or ``line N of FILE`` where the
place is in a file the path to it has not named."""


class Step(enum.Enum):
    """What one hop of a refusal's path from the loop to the deciding place follows (the
    value is a short label)."""

    BODY = "the loop's body"
    CALL = "call"
    """A call the body or a callee makes, at a line of the file the path is in."""
    CALL_IN_CALLEE = "call in a callee"
    """A call a callee makes, named without a line: calls are gathered per function,
    across the profile's files."""
    RETURN = "return"
    """A value returned into a caller."""
    ARGUMENT = "argument"
    """A value passed into a callee."""
    MEMORY_READ = "memory read"
    """Memory the body writes, read in a function of the program."""


HOP_WORDING = {
    Step.BODY: "its body ",
    Step.CALL: "calls {function} (line {line}), which ",
    Step.CALL_IN_CALLEE: "calls {function}, which ",
    Step.RETURN: "{subject} is returned (line {line}) to {function} ({place}), where ",
    Step.ARGUMENT: "{subject} is passed to {function} (line {line}) ({place}), where ",
    Step.MEMORY_READ: "its body writes memory read in {function} ({place}): ",
}
"""The phrase of each step, which the next hop or the reason's sentence continues."""


@dataclass(frozen=True)
class Hop:
    """One step of the path from a loop to the place that decides its refusal."""

    step: Step
    function: str = ""
    """The function called, returned into (the caller), passed into (the callee) or
    reading the memory."""
    line: int = 0
    """The line of the call, the ``return`` or the call the argument is passed in."""
    subject: str = ""
    """The value returned or passed and how it depends on the skipped bodies."""
    place: str = ""
    """``file:line`` of the caller's call, the callee's or the reader's definition."""

    def describe(self) -> str:
        return HOP_WORDING[self.step].format(
            function=self.function, line=self.line, subject=self.subject, place=self.place
        )


@dataclass(frozen=True)
class Refusal:
    """Why the rule may not take a loop, and where that is decided."""

    reason: Reason
    file: Path
    """The file of the deciding place (a header's, a callee's, a caller's)."""
    line: int
    subject: str = ""
    """What the reason is about: the callee, the variable and how it depends on the skipped
    bodies (``m, computed from s,``), the kind of memory, the loop's kind."""
    target: str = ""
    """The second name some reasons need: the MPI routine or allocator called, the function
    whose callers are sought, the construct a value decides (``the branch``)."""
    note: str = ""
    """What else the sentence says: why a profile file is missing, where a function is
    referred to."""
    via: tuple[Hop, ...] = ()
    """The hops from the loop to the place, the outermost first."""
    in_file: str = ""
    """The file to name beside the line, where no hop names it (an effect found in another
    file); empty where the line is read in the file the path last named."""

    def describe(self) -> str:
        at = f"line {self.line}" + (f" of {self.in_file}" if self.in_file else "")
        sentence = WORDING[self.reason].format(
            subject=self.subject, target=self.target, note=self.note, line=self.line, at=at
        )
        return "".join(hop.describe() for hop in self.via) + sentence

    def after(self, hop: Hop) -> Refusal:
        """This refusal reached through one more hop, the outermost first."""
        return replace(self, via=(hop, *self.via))
