"""The instrumentation map: what the rewriter put where, so run-time records can be read.

The runtime only knows numbers: a function id, a condition site index and a loop index local
to that function. This map, written next to the instrumented sources, turns them back into
source locations, the loop-nest tree and the exit guards of each loop. It is plain JSON so a
build made in one process can be analysed in another.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

FORMAT = "perfcast-taint-map/1"


@dataclass
class Loop:
    """One loop statement of a function.

    ``condition`` is the site of its own exit condition (``None`` for ``for(;;)``); exit
    guards (``if`` conditions that lead to ``break``/``return``) are sites listing this loop
    in their ``exits``. ``constant`` is the static verdict: literal bounds, an induction
    variable nobody else writes, no early exit.
    """

    index: int
    kind: str
    line: int
    parent: int | None
    condition: int | None
    constant: bool
    branches: list[int] = field(default_factory=list)  # branch sites whose arms hold it


@dataclass
class Site:
    """A condition the runtime records: a loop's exit condition or a branch."""

    index: int
    kind: str  # "loop" or "branch"
    line: int
    loop: int | None  # the loop it controls ("loop") or the innermost loop around it
    exits: list[int] = field(default_factory=list)  # loops a branch can leave early
    calls: list[str] = field(default_factory=list)  # functions called in a branch's arms
    branches: list[int] = field(default_factory=list)  # branch sites whose arms hold it
    work: bool = False
    """A branch with a loop in its arms, or a call of a function that may depend on a
    parameter (loops, library routines): it decides how much work runs, not just a value."""


@dataclass
class Function:
    """A function definition of the project, instrumented or pruned statically."""

    fid: int
    name: str
    file: str
    line: int
    pruned: bool
    loops: list[Loop] = field(default_factory=list)
    sites: list[Site] = field(default_factory=list)
    library_calls: list[str] = field(default_factory=list)
    call_branches: list[list[int]] = field(default_factory=list)
    """Per numbered call site, the branch sites whose arms hold the call."""

    def loop_labels_sites(self, loop: int) -> list[int]:
        """All sites whose labels bound the trip count of ``loop``."""
        found = [s.index for s in self.sites if s.kind == "loop" and s.loop == loop]
        found += [s.index for s in self.sites if s.kind == "branch" and loop in s.exits]
        return found


@dataclass
class SiteMap:
    functions: list[Function] = field(default_factory=list)

    def by_fid(self) -> dict[int, Function]:
        return {f.fid: f for f in self.functions}

    def to_json(self) -> dict[str, Any]:
        return {"format": FORMAT, "functions": [asdict(f) for f in self.functions]}

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(self.to_json(), indent=1))

    @classmethod
    def load(cls, path: Path) -> SiteMap:
        data = json.loads(path.read_text())
        functions = []
        for f in data["functions"]:
            loops = [Loop(**loop) for loop in f.pop("loops")]
            sites = [Site(**site) for site in f.pop("sites")]
            functions.append(Function(**f, loops=loops, sites=sites))
        return cls(functions)
