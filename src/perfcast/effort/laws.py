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

``B`` is the law's message size, which is not always what the runtime records.
``measure/runtime/perfcast_mpi.c`` counts, per rank, "one copy of my data per receiving
rank", and the experiment holds the mean over ranks. :data:`RECORDED_BYTES_RANKS_POWER`
converts that mean into ``B`` (``B = recorded * p^k``), per operation, with ``|x|`` the
buffer size (count times type size):

=====================  ======================  =====================  ===
operation              law's ``B``              recorded, rank mean    k
=====================  ======================  =====================  ===
send/recv (and i-,     ``|buf|``                ``|buf|``               0
s-, b-, r-), sendrecv
bcast                  ``|buf|``                ``|buf|`` (root p|buf|) 0
reduce                 ``|buf|`` (the vector)   ``|buf|``               0
allreduce              ``|buf|`` (the vector)   ``p*|buf|``            -1
scatter, gather        ``p*|x|`` (all data)     ``|x|`` (root p|x|)     1
allgather              ``p*|x|`` (all data)     ``p*|x|``               0
barrier                (no bytes)               0                       -
=====================  ======================  =====================  ===

The scatter/gather/allgather rows follow the binomial-tree and ring costs the table cites
(``log2(p)*alpha + (p-1)/p * n * beta`` with ``n`` the data of all ranks together), so
gathering a fixed ``|x|`` from each of more ranks costs more; reduction and broadcast cost
the vector's size, whatever ``p`` is, so an 8-byte allreduce is ``log2(p)*alpha`` plus a
constant, never linear in ``p``. Received bytes convert with the same power (their rank
means are the same as the sent ones' up to ``(p-1)/p``).

``MPI_Wait`` and ``MPI_Waitall`` (and ``Alltoall``/``Alltoallv``) have no law here: the
runtime records no bytes for Wait/Waitall (the bytes belong to the ``Isend``/``Irecv``
that started the transfer, under whose call path they are counted), and their time is
the rest of that transfer plus however long the partner took to post its side, which is
waiting, not effort. Their call paths get no effort prior and are modeled classically
(or under a taint prior with ``--taint``).

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

RECORDED_BYTES_RANKS_POWER: dict[str, int] = {
    **{operation: 0 for operation, law in OPERATION_LAWS.items() if law is Law.POINT_TO_POINT},
    "bcast": 0,
    "reduce": 0,
    "allreduce": -1,
    "scatter": 1,
    "gather": 1,
    "allgather": 0,
    "barrier": 0,
}
"""``k`` in ``B = (rank mean of the recorded bytes) * p^k``: how the runtime's byte rules
relate to the message size ``B`` of each law (table in the module docstring)."""


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

    @property
    def ranks_power(self) -> int:
        """``k`` of :data:`RECORDED_BYTES_RANKS_POWER` for this operation."""
        return RECORDED_BYTES_RANKS_POWER[self.operation]

    def structure(
        self, bytes_model: Model | None, parameters: list[str], ranks: str = RANKS_PARAMETER
    ) -> tuple[TermShape, ...]:
        """Term shapes of the law with ``B`` replaced by the terms of ``bytes_model`` (a
        model of the recorded rank-mean bytes), converted to the law's message size."""
        if self.law.moves_bytes and bytes_model is None:
            raise InputError(
                f"MPI_{self.operation.capitalize()} moves bytes (law {self.law.value}) but "
                "no byte model was given"
            )
        shapes: list[TermShape] = []
        if self.law.has_tree_latency and ranks in parameters:
            shapes.append((Factor(ranks, Fraction(0), 1),))
        if self.law.moves_bytes and bytes_model is not None:
            power = self.ranks_power if ranks in parameters else 0
            shapes_of_bytes = [term.shape for term in bytes_model.terms]
            # a constant |x| per rank is p*|x| of all ranks' data; bytes are whole
            # numbers, so a fitted constant under half a byte is rounding, not data
            if abs(bytes_model.constant) >= 0.5 and power > 0:
                shapes_of_bytes.append(())
            for shape_of_bytes in shapes_of_bytes:
                shape = _times_ranks(shape_of_bytes, ranks, power)
                if shape and shape not in shapes:  # () is a constant: the model has one
                    shapes.append(shape)
        return tuple(shapes)

    def describe(self) -> str:
        text = f"MPI_{self.operation.capitalize()}: {self.law.value}"
        if self.law.moves_bytes and self.ranks_power:
            text += f", B = recorded bytes * p^{self.ranks_power}"
        return text


def _times_ranks(shape: TermShape, ranks: str, power: int) -> TermShape:
    """``shape * ranks^power``; a factor of ``ranks`` left with exponent and log exponent 0
    disappears. A negative result (a term of the recorded bytes without ``p``, where the
    rules say every term has one) keeps the term as it was: the prior must not invent a
    ``p^-1`` the operation cannot have."""
    if not power:
        return shape
    own = next((f for f in shape if f.parameter == ranks), None)
    exponent = (own.exponent if own else Fraction(0)) + power
    log_exponent = own.log_exponent if own else 0
    if exponent < 0:
        return shape
    if own is None:
        return (*shape, Factor(ranks, exponent, 0))
    if exponent == 0 and log_exponent == 0:
        return tuple(f for f in shape if f is not own)
    return tuple(Factor(ranks, exponent, log_exponent) if f is own else f for f in shape)
