"""The ground truth written beside each program, and reading it back.

``<name>.truth.json`` is a perfcast model file (``perfcast_models``, ``parameters``,
``models``: :meth:`ModelSet.load` and ``perfcast predict`` read it as is) with the truth's
models in it, plus the exact program specification (``kernels``: loop nests with their
coefficients and outer-loop scales, messages) from which :func:`read_spec` rebuilds the
:class:`ProgramSpec` and :func:`read_truth` the per-kernel :class:`KernelTruth`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

from perfcast.effort.laws import CommunicationLaw, Law
from perfcast.errors import InputError
from perfcast.experiment.metrics import BYTES_RECEIVED, BYTES_SENT, TIME_METRIC
from perfcast.inputs import read_json
from perfcast.modeling.modelset import FORMAT_VERSION as MODELS_FORMAT_VERSION
from perfcast.modeling.pmnf import Factor, Model, Term
from perfcast.outputs import OutputKind, check_target, json_with, write_output
from perfcast.synth.programs.emit import render_program
from perfcast.synth.programs.spec import (
    ELEMENT_BYTES,
    ELEMENTS,
    RANK_SCALED_OPERATIONS,
    RECEIVE_ONLY_OPERATIONS,
    KernelSpec,
    LoopNest,
    Message,
    ProgramSpec,
    Work,
)

TRUTH_FORMAT_VERSION = 2
"""Version 2: a loop nest is one term (coefficient, factors, outer scale), its iteration
count rounded once; version 1 rounded every loop's trip count on its own."""
TRUTH_SUFFIX = ".truth.json"


@dataclass(frozen=True)
class KernelTruth:
    """What one kernel is known to do, per call and rank.

    Attributes:
        function: the kernel's C name; its call path is ``callpath`` (``main->function``).
        kind: ``"computation"`` or ``"communication"``.
        operation: the MPI operation (``"allreduce"``, ...) of a communication kernel.
        effort: innermost loop iterations per call as a PMNF model of the two parameters
            (coefficients as generated); ``None`` for a kernel without loops.
        bytes: the byte model ``B`` of the MPI call path ``mpi_callpath``, per call, as
            perfcast's runtime records it: the rank-mean of ``bytes_metric``
            (``mpi_bytes_sent``, or ``mpi_bytes_received`` for ``recv``, which sends
            nothing; constant 0 for ``barrier``); ``None`` for computation kernels.
        law: the operation's Table I law (:class:`~perfcast.effort.Law`; ``law.name`` such
            as ``"REDUCTION"``, ``law.value`` its formula).
        message: doubles per rank in the message, as a PMNF model.
        spec: the exact loop nests and message, for :meth:`iterations` and :meth:`exact_bytes`.
    """

    function: str
    kind: str
    operation: str | None
    effort: Model | None
    bytes: Model | None
    law: Law | None
    callpath: str
    mpi_callpath: str | None
    bytes_metric: str | None
    message: Model | None
    spec: KernelSpec
    parameters: tuple[str, str]

    @classmethod
    def of(cls, kernel: KernelSpec, parameters: tuple[str, str]) -> KernelTruth:
        callpath = f"main->{kernel.function}"
        mpi_callpath = None if kernel.mpi_function is None else f"{callpath}->{kernel.mpi_function}"
        bytes_model = message = None
        metric = None
        if mpi_callpath is not None:
            metric = BYTES_RECEIVED if kernel.operation in RECEIVE_ONLY_OPERATIONS else BYTES_SENT
            if kernel.message is None:
                bytes_model = Model(mpi_callpath, metric, 0.0)
            else:
                message = Model(mpi_callpath, ELEMENTS, 0.0, (kernel.message.term,))
                bytes_model = Model(
                    mpi_callpath, metric, 0.0, (_bytes_term(kernel, parameters[0]),)
                )
        return cls(
            function=kernel.function,
            kind=kernel.kind,
            operation=kernel.operation,
            effort=kernel.effort(callpath),
            bytes=bytes_model,
            law=kernel.law,
            callpath=callpath,
            mpi_callpath=mpi_callpath,
            bytes_metric=metric,
            message=message,
            spec=kernel,
            parameters=parameters,
        )

    def iterations(self, point: Mapping[str, float]) -> int:
        """Innermost iterations of one call at ``point`` (e.g. ``{"p": 4, "n": 2000}``):
        the exact integer the program executes, each term's ``c * g(p) * h(n)`` rounded
        once (within half an iteration per term of :attr:`effort`)."""
        return self.spec.iterations(point)

    def outer_iterations(self, point: Mapping[str, float]) -> int:
        """Iterations of the outer loops of product terms, exactly as executed: the counted
        blocks are ``iterations + 2 * outer_iterations + c`` (``c`` a constant of the
        kernel and build; see the package docstring)."""
        return self.spec.outer_iterations(point)

    def exact_bytes(self, point: Mapping[str, float]) -> int:
        """Rank-mean of ``bytes_metric`` per call at ``point``, exactly as recorded."""
        if self.spec.message is None:
            return 0
        elements = self.spec.message.elements(point)
        ranks = int(point[self.parameters[0]]) if self.operation in RANK_SCALED_OPERATIONS else 1
        return ELEMENT_BYTES * elements * ranks

    def computation_complexity(self) -> Model | None:
        """The expected growth of the kernel's own time (call path ``callpath``): the
        effort's terms with unit coefficients (time per iteration is machine-dependent);
        for exponent deviations and leading-exponent matches of fitted time models."""
        if self.effort is None:
            return None
        terms = tuple(Term(1.0, term.factors) for term in self.effort.terms)
        return Model(self.callpath, TIME_METRIC, 0.0, terms)

    def communication_complexity(self) -> Model | None:
        """The expected growth of the MPI call's time (call path ``mpi_callpath``): the
        operation's Table I law with ``B`` = :attr:`bytes`, e.g. ``log2(p) + p*n`` for an
        allreduce of ``n`` doubles per rank, unit coefficients."""
        if self.mpi_callpath is None or self.law is None or self.operation is None:
            return None
        law = CommunicationLaw(self.operation, self.law)
        shapes = law.structure(self.bytes, list(self.parameters), self.parameters[0])
        terms = tuple(Term(1.0, shape) for shape in shapes)
        return Model(self.mpi_callpath, TIME_METRIC, 0.0, terms)

    def models(self) -> list[Model]:
        return [m for m in (self.effort, self.bytes, self.message) if m is not None]


def _bytes_term(kernel: KernelSpec, ranks: str) -> Term:
    assert kernel.message is not None
    term = kernel.message.term
    if kernel.operation not in RANK_SCALED_OPERATIONS:
        return Term(ELEMENT_BYTES * term.coefficient, term.factors)
    factors = [f for f in term.factors if f.parameter != ranks]
    rank_factor = next((f for f in term.factors if f.parameter == ranks), None)
    exponent, log_exponent = (
        (Fraction(0), 0)
        if rank_factor is None
        else (rank_factor.exponent, rank_factor.log_exponent)
    )
    factors.insert(0, Factor(ranks, exponent + 1, log_exponent))
    return Term(ELEMENT_BYTES * term.coefficient, tuple(factors))


def truth_of(spec: ProgramSpec) -> dict[str, KernelTruth]:
    """Per kernel function name, its truth."""
    return {k.function: KernelTruth.of(k, spec.parameters) for k in spec.kernels}


GENERATED_SOURCE = OutputKind(
    "a program perfcast synth generated", lambda head: b"generated by perfcast synth" in head
)
TRUTH_FILE = OutputKind("a perfcast synth truth", json_with('"perfcast_models"'))


def write_program(spec: ProgramSpec, directory: str | Path) -> Path:
    """Write ``directory/<name>.cpp`` and ``directory/<name>.truth.json``; the source's path.

    Each replaces only an earlier file of its kind (:func:`~perfcast.outputs.write_output`):
    ``-o`` naming a directory of the user's own sources, or a ``bench.cpp`` that is a link
    to a file elsewhere, is refused before anything is written."""
    directory = Path(directory)
    source = directory / f"{spec.name}.cpp"
    truth = directory / f"{spec.name}{TRUTH_SUFFIX}"
    check_target(source, GENERATED_SOURCE)
    check_target(truth, TRUTH_FILE)
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot create the directory: {exc.strerror}", path=directory) from None
    write_output(source, render_program(spec), GENERATED_SOURCE)
    write_output(truth, json.dumps(truth_json(spec), indent=2) + "\n", TRUTH_FILE)
    return source


def truth_json(spec: ProgramSpec) -> dict:
    truths = truth_of(spec)
    return {
        "perfcast_models": MODELS_FORMAT_VERSION,
        "parameters": list(spec.parameters),
        "models": [_model_json(m) for t in truths.values() for m in t.models()],
        "perfcast_synth_truth": TRUTH_FORMAT_VERSION,
        "program": spec.name,
        "source": f"{spec.name}.cpp",
        "run": f"mpirun -np P ./{spec.name} N [REPEAT]",
        "ranks_parameter": spec.ranks,
        "size_parameter": spec.size,
        "reference": None
        if spec.reference is None
        else dict(zip(spec.parameters, spec.reference, strict=True)),
        "kernels": [_kernel_json(kernel, truths[kernel.function]) for kernel in spec.kernels],
    }


def _model_json(model: Model) -> dict:
    """A model entry without fit statistics: a truth was not fitted, and leaving out their
    NaN placeholders keeps the file strict JSON (readable by jq and other languages)."""
    data = model.to_json()
    del data["statistics"]
    return data


def _kernel_json(kernel: KernelSpec, truth: KernelTruth) -> dict:
    return {
        "function": kernel.function,
        "kind": kernel.kind,
        "operation": kernel.operation,
        "mpi_function": kernel.mpi_function,
        "callpath": truth.callpath,
        "mpi_callpath": truth.mpi_callpath,
        "work": kernel.work.value,
        "law": None if truth.law is None else truth.law.name,
        "law_formula": None if truth.law is None else truth.law.value,
        "effort": None if truth.effort is None else truth.effort.text(),
        "bytes_metric": truth.bytes_metric,
        "bytes": None if truth.bytes is None else truth.bytes.text(),
        "nests": [nest.to_json() for nest in kernel.nests],
        "message": None
        if kernel.message is None
        else {
            "scale": kernel.message.scale,
            "factors": [f.to_json() for f in kernel.message.factors],
        },
    }


def read_spec(path: str | Path) -> ProgramSpec:
    """The program specification stored in a truth file."""
    path = Path(path)
    data = read_json(path, "truth file", "perfcast synth writes <name>.truth.json")
    if not isinstance(data, dict) or "perfcast_synth_truth" not in data:
        raise InputError(
            "not a perfcast synth truth file (no 'perfcast_synth_truth' key)", path=path
        )
    if data["perfcast_synth_truth"] != TRUTH_FORMAT_VERSION:
        raise InputError(
            f"truth format {data['perfcast_synth_truth']} is not version {TRUTH_FORMAT_VERSION}; "
            "regenerate the program and its truth with this perfcast (perfcast synth)",
            path=path,
        )
    try:
        parameters = (str(data["ranks_parameter"]), str(data["size_parameter"]))
        reference = data.get("reference")
        kernels = tuple(_kernel_from_json(k) for k in data["kernels"])
        return ProgramSpec(
            str(data["program"]),
            kernels,
            parameters,
            None
            if reference is None
            else (float(reference[parameters[0]]), float(reference[parameters[1]])),
        )
    except (KeyError, TypeError, ValueError, ZeroDivisionError) as exc:
        raise InputError(f"malformed truth entry ({exc!r})", path=path) from None
    except InputError as exc:
        raise InputError(exc.reason, path=path) from None


def _kernel_from_json(data: Mapping) -> KernelSpec:
    message = data.get("message")
    return KernelSpec(
        function=str(data["function"]),
        nests=tuple(LoopNest.from_json(nest) for nest in data["nests"]),
        operation=data.get("operation"),
        message=None
        if message is None
        else Message(
            float(message["scale"]), tuple(Factor.from_json(f) for f in message["factors"])
        ),
        work=Work(data.get("work", Work.AXPY.value)),
    )


def read_truth(path: str | Path) -> dict[str, KernelTruth]:
    """Per kernel function name, its :class:`KernelTruth`, from ``<name>.truth.json``."""
    return truth_of(read_spec(path))


__all__ = [
    "TRUTH_SUFFIX",
    "KernelTruth",
    "read_spec",
    "read_truth",
    "truth_json",
    "truth_of",
    "write_program",
]
