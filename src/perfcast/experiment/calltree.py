"""Call paths and the tree they form.

A call path is written the way Score-P and Extra-P print it, callers first:
``main->solve->MPI_Allreduce``. The tree is derived from the set of paths, so a reader
only ever has to produce path strings.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

SEPARATOR = "->"


def split_callpath(callpath: str) -> list[str]:
    """The frames of a call path, outermost first."""
    return [frame.strip() for frame in callpath.split(SEPARATOR)]


def join_callpath(frames: Iterable[str]) -> str:
    return SEPARATOR.join(frames)


def recorded_callpath(names: Iterable[object]) -> str:
    """The call path of region or frame names another tool recorded (Caliper's nesting, a
    hatchet node's path): a name holding the separator has it replaced by ``-``, so the
    nesting stays the one recorded; an empty name is ``(unnamed)``."""
    return join_callpath(str(name).strip().replace(SEPARATOR, "-") or "(unnamed)" for name in names)


@dataclass
class CallNode:
    """One frame in the call tree; ``path`` is the full call path that ends here."""

    name: str
    path: str
    parent: CallNode | None = None
    children: dict[str, CallNode] = field(default_factory=dict)

    @property
    def depth(self) -> int:
        return 0 if self.parent is None else self.parent.depth + 1

    def walk(self) -> Iterator[CallNode]:
        """Pre-order traversal, children in insertion order."""
        yield self
        for child in self.children.values():
            yield from child.walk()


class CallTree:
    """The forest of call paths of an experiment (several roots are allowed)."""

    def __init__(self, callpaths: Iterable[str] = ()):
        self.roots: dict[str, CallNode] = {}
        self._nodes: dict[str, CallNode] = {}
        for callpath in callpaths:
            self.add(callpath)

    def add(self, callpath: str) -> CallNode:
        """Insert a call path (and its missing ancestors); returns its node."""
        frames = split_callpath(callpath)
        level = self.roots
        parent: CallNode | None = None
        for depth in range(len(frames)):
            path = join_callpath(frames[: depth + 1])
            node = level.get(frames[depth])
            if node is None:
                node = CallNode(frames[depth], path, parent)
                level[frames[depth]] = node
                self._nodes[path] = node
            parent, level = node, node.children
        assert parent is not None
        return parent

    def __getitem__(self, callpath: str) -> CallNode:
        return self._nodes[join_callpath(split_callpath(callpath))]

    def __contains__(self, callpath: object) -> bool:
        return isinstance(callpath, str) and join_callpath(split_callpath(callpath)) in self._nodes

    def __iter__(self) -> Iterator[CallNode]:
        for root in self.roots.values():
            yield from root.walk()

    def __len__(self) -> int:
        return len(self._nodes)

    def render(self) -> str:
        """An indented outline, one frame per line, as a profiler would show it."""
        return "\n".join("  " * node.depth + node.name for node in self)
