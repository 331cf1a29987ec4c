"""Which parameters a program's cost combines multiplicatively: what experiment design needs.

A model of ``a + b`` is learned from one line per parameter; only ``a * b`` needs points off
those lines (paper section A1), and ``a*b + a*c`` needs the ``(a, b)`` and ``(a, c)`` planes
but not the ``(b, c)`` one. The taint profile says which case holds: every function's
inclusive dependency is a sum of parameter products; the products of all functions are the
joint variations a model can need. ``main``'s inclusive dependency composes every callee,
so a product anywhere in the program shows up there too -- the whole program's time is a
model of its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import combinations

from perfcast.taint.profile_model import CONSTANT, TaintProfile

Pair = frozenset[str]


@dataclass(frozen=True)
class Interactions:
    """What the profile says about combining parameters.

    Attributes:
        marked: parameters the taint run labelled (anything else is unknown to it).
        used: parameters some function's cost depends on.
        unreached: marked parameters whose label reached no loop, no branch and no MPI
            call. That is no evidence that they cost nothing: the label was more likely lost
            on the way (a value read by a routine the analysis cannot follow), so the design
            treats them as unknown, not as unused.
        terms: the products of all functions, none contained in another.
        products: each interacting pair -> the functions with a product naming both.
        switches: parameters that switch algorithms -> where (``work (app.c:12)``): their
            cost enters through a branch that selects work, so they are in ``used`` and
            multiply the parameters of that work; the design says why it keeps them.
    """

    marked: frozenset[str]
    used: frozenset[str]
    unreached: frozenset[str]
    terms: frozenset[frozenset[str]]
    products: Mapping[Pair, tuple[str, ...]]
    switches: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def interact(self, first: str, second: str) -> bool:
        return frozenset((first, second)) in self.products

    def witnesses(self, first: str, second: str) -> tuple[str, ...]:
        return self.products.get(frozenset((first, second)), ())


def interactions(profile: TaintProfile) -> Interactions:
    """The :class:`Interactions` of a taint profile (user functions and library routines)."""
    products: dict[Pair, list[str]] = {}
    used: set[str] = set()
    terms: set[frozenset[str]] = set()
    for name, function in profile.functions.items():
        for term in function.terms - CONSTANT:
            used.update(term)
            terms.add(term)
            for pair in combinations(sorted(term), 2):
                products.setdefault(frozenset(pair), []).append(name)
    switches: dict[str, list[str]] = {}
    for switch in profile.algorithm_switches():
        switches.setdefault(switch.parameter, []).append(f"{switch.function} ({switch.where})")
    return Interactions(
        marked=frozenset(profile.parameters),
        used=frozenset(used),
        unreached=frozenset(
            name
            for name, coverage in profile.parameters.items()
            if name not in used and not coverage.branches
        ),
        terms=frozenset(t for t in terms if not any(t < other for other in terms)),
        products={pair: tuple(sorted(names)) for pair, names in products.items()},
        switches={name: tuple(places) for name, places in switches.items()},
    )
