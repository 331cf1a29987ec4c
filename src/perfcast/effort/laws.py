"""Communication laws of MPI operations (``noise-resilient-priors.txt`` Table I).

Each law says how the run time of an operation grows with the bytes it moves, ``B(p, x)``,
and with the number of ranks ``p``:

=======================  =================================================
operation                expected run time
=======================  =================================================
send, recv               ``alpha + B * beta``
bcast                    ``log2(p) * alpha + B * beta``
scatter, gather,         ``log2(p) * alpha + B * (p-1)/p * beta``
allgather
reduce, allreduce        ``log2(p) * alpha + (beta + (p-1)/p * gamma) * B``
barrier                  ``log2(p) * alpha``
=======================  =================================================

As a prior the law becomes a *fixed structure of term shapes*: a ``log2(p)`` column for the
latency of the tree-shaped collectives, and one column per term of the byte model ``B``
(each term gets its own free coefficient, so the fitted bandwidth and reduction costs need
not be shared between them; the constant of ``B`` merges with the model's constant, which
also carries the point-to-point latency ``alpha``).

The factor ``(p-1)/p`` is approximated by 1: it is not a PMNF factor, it lies in
``[1/2, 1)`` and is within 1/p of 1, so at the rank counts a model is fitted for it
changes a coefficient by a few percent and never the exponents the prior is there to fix.
Where ``p`` is not a parameter of the experiment the ``log2(p)`` column is dropped.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from fractions import Fraction

from perfcast.errors import InputError
from perfcast.modeling.pmnf import Factor, Model
from perfcast.modeling.prior import TermShape

RANKS_PARAMETER = "p"
"""Default name of the parameter that counts MPI ranks."""


class Law(StrEnum):
    """The families of Table I."""

    POINT_TO_POINT = "alpha + B*beta"
    BROADCAST = "log2(p)*alpha + B*beta"
    PERSONALISED = "log2(p)*alpha + B*(p-1)/p*beta"
    REDUCTION = "log2(p)*alpha + (beta + (p-1)/p*gamma)*B"
    SYNCHRONISATION = "log2(p)*alpha"

    @property
    def has_tree_latency(self) -> bool:
        return self is not Law.POINT_TO_POINT

    @property
    def moves_bytes(self) -> bool:
        return self is not Law.SYNCHRONISATION


OPERATION_LAWS: dict[str, Law] = {
    "send": Law.POINT_TO_POINT,
    "isend": Law.POINT_TO_POINT,
    "ssend": Law.POINT_TO_POINT,
    "bsend": Law.POINT_TO_POINT,
    "rsend": Law.POINT_TO_POINT,
    "recv": Law.POINT_TO_POINT,
    "irecv": Law.POINT_TO_POINT,
    "sendrecv": Law.POINT_TO_POINT,
    "bcast": Law.BROADCAST,
    "scatter": Law.PERSONALISED,
    "gather": Law.PERSONALISED,
    "allgather": Law.PERSONALISED,
    "reduce": Law.REDUCTION,
    "allreduce": Law.REDUCTION,
    "barrier": Law.SYNCHRONISATION,
}
"""MPI operation (lower case, without ``MPI_``) to its law; the nine operations of the
paper's benchmark generator plus the point-to-point variants the runtime records."""


@dataclass(frozen=True)
class CommunicationLaw:
    """The law of one MPI call path, ready to become a fixed prior structure."""

    operation: str
    law: Law

    @classmethod
    def for_callpath(cls, callpath: str) -> CommunicationLaw | None:
        """The law of the MPI routine that ends ``callpath``; ``None`` if it is not an MPI
        leaf (``main->solve->MPI_Allreduce``) or the routine has no law in Table I."""
        leaf = callpath.rsplit("->", 1)[-1]
        if not leaf.startswith("MPI_"):
            return None
        operation = leaf[len("MPI_") :].lower()
        law = OPERATION_LAWS.get(operation)
        return None if law is None else cls(operation, law)

    def structure(
        self, bytes_model: Model | None, parameters: list[str], ranks: str = RANKS_PARAMETER
    ) -> tuple[TermShape, ...]:
        """Term shapes of the law with ``B`` replaced by ``bytes_model``'s terms."""
        if self.law.moves_bytes and bytes_model is None:
            raise InputError(
                f"MPI_{self.operation.capitalize()} moves bytes (law {self.law.value}) but "
                "no byte model was given"
            )
        shapes: list[TermShape] = []
        if self.law.has_tree_latency and ranks in parameters:
            shapes.append((Factor(ranks, Fraction(0), 1),))
        if self.law.moves_bytes and bytes_model is not None:
            shapes += [term.shape for term in bytes_model.terms if term.shape not in shapes]
        return tuple(shapes)

    def describe(self) -> str:
        return f"MPI_{self.operation.capitalize()}: {self.law.value}"
