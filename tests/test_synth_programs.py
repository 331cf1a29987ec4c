"""The benchmark generator: generated programs compile with perfcast build, run under
mpirun, and their counted effort follows the ground truth written beside them: exactly
``iterations + 2 * outer_iterations + c``, within 0.1 % of the effort model, and modeled by
the count modeler with the truth's terms."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from perfcast.cli import main
from perfcast.effort import CommunicationLaw, EffortModeler
from perfcast.errors import InputError
from perfcast.experiment.experiment import Experiment
from perfcast.measure.profiles import combine_runs
from perfcast.modeling import Factor, ModelSet, PMNFModeler
from perfcast.synth.programs import (
    COMMUNICATION_OPERATIONS,
    DEFAULT_RANKS,
    DEFAULT_SIZES,
    KernelSpec,
    KernelTruth,
    LoopNest,
    ProgramGenerator,
    ProgramSpec,
    kernel_name,
    random_program,
    read_spec,
    read_truth,
    render_program,
    truth_of,
    write_program,
)
from perfcast.synth.programs.generate import MIN_ITERATIONS

MPIRUN = ("mpirun", "--allow-run-as-root", "--oversubscribe")
TIMEOUT = 120
RANKS = DEFAULT_RANKS
SIZES = DEFAULT_SIZES
GRID = tuple(itertools.product(RANKS, SIZES))
TEST_POINT = (7, 6000)
"""The noise study's extrapolation point, beyond the grid the coefficients are sized for."""
REPEAT = 2
LOOP_OVERHEAD = 2
"""Basic blocks per iteration of a loop around an innermost loop (clang-16 -O2)."""
MAX_CONSTANT = 32
"""Largest per-call constant of a kernel's block count (entry, exits, term set-up)."""
EFFORT_TOLERANCE = 1e-3
"""Promised largest relative deviation of the counted blocks, less their constant, from the
effort model at every point of the default grid and at the test point."""
needs_toolchain = pytest.mark.skipif(
    shutil.which("mpicxx") is None or shutil.which("clang-16") is None,
    reason="needs Open MPI and clang-16",
)

COMPUTATION = (
    "n^2",
    "p^(1/2)*n*log2(n)",  # nested: p loop outside, n loop inside
    "n^(3/2) + p*log2(p)",  # sequential
    "p^2",
    "p^(1/4)*n^(1/3)",  # p^(1/4) and p^(1/3) differ by < 10 % over p in 2..6
    "log2(p)^2*n^(3/2)*log2(n)",
    # the noise study's kernels whose per-loop rounding swapped exponents (issue #6)
    "p^(9/4)*log2(p)^2*n^(3/2)",
    "p^3*log2(p)^2*n*log2(n)",
    "p^(5/3)*n^(5/4) + p*log2(p)*n^2*log2(n)",
)
COMMUNICATION = {  # every operation, message terms in n, p and both
    "allgather": "allgather:n",
    "allreduce": "allreduce:n^(1/2)*p",
    "barrier": "barrier",
    "bcast": "bcast:n*p",
    "gather": "gather:n^(3/4)",
    "reduce": "reduce:p^(1/2)*log2(n)",
    "scatter": "scatter:n",
    "send": "send:n*log2(n)",
    "recv": "recv:p",
    "sendrecv": "sendrecv:n^(1/3)*p",
}


def _generator() -> ProgramGenerator:
    # a small budget: the test is about growth, not run time
    return ProgramGenerator(reference=(max(RANKS), max(SIZES)), iterations=(5e4, 2e5))


def _specified_program(rng: np.random.Generator) -> ProgramSpec:
    generator = _generator()
    kernels = [
        generator.computation(kernel_name(i), text, rng)
        for i, text in enumerate(COMPUTATION, start=1)
    ]
    for text in COMMUNICATION.values():
        operation = text.split(":")[0]
        index = len(kernels) + 1
        effort = "n" if operation == "sendrecv" else None  # loops after the MPI call
        kernels.append(
            generator.communication(kernel_name(index, operation), text, rng, effort=effort)
        )
    return ProgramSpec("bench", tuple(kernels), reference=generator.reference)


def _build(source: Path) -> Path:
    executable = source.with_suffix("")
    argv = ["build", "--counters", "--", "mpicxx", "-O2", str(source), "-o", str(executable)]
    assert main(argv) == 0
    return executable


def _run(executable: Path, ranks: int, size: int, profile: Path, *extra: str):
    environment = {**os.environ, "PERFCAST_PROFILE_DIR": str(profile)}
    command = [*MPIRUN, "-np", str(ranks), str(executable), str(size), *extra]
    return subprocess.run(command, env=environment, capture_output=True, text=True, timeout=TIMEOUT)


def _measure(executable: Path, points, directory: Path) -> Experiment:
    runs = []
    for ranks, size in points:
        profile = directory / f"p{ranks}-n{size}"
        done = _run(executable, ranks, size, profile, str(REPEAT))
        assert done.returncode == 0, done.stderr
        assert f"n={size} p={ranks} repeat={REPEAT}" in done.stdout
        runs.append(({"p": ranks, "n": size}, profile))
    return combine_runs(runs)


def _per_call(experiment: Experiment, callpath: str, metric: str) -> dict[tuple[int, int], float]:
    """Per point, the rank-mean of ``metric`` per visit of ``callpath``."""

    def table(name: str) -> dict[tuple[int, int], float]:
        rows = experiment.select(callpath, name)
        points = zip(rows["p"].tolist(), rows["n"].tolist(), strict=True)
        return {
            (int(p), int(n)): v for (p, n), v in zip(points, rows["value"].tolist(), strict=True)
        }

    values, visits = table(metric), table("visits")
    assert visits and set(visits.values()) == {REPEAT}, (callpath, visits)
    return {point: value / visits[point] for point, value in values.items()}


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    """The specified program (all ten operations) built with counters and run on the
    5 x 5 default grid and at the test point: (truth, grid, test point)."""
    directory = tmp_path_factory.mktemp("synth")
    source = write_program(_specified_program(np.random.default_rng(11)), directory)
    executable = _build(source)
    grid = _measure(executable, GRID, directory)
    beyond = _measure(executable, [TEST_POINT], directory)
    return read_truth(directory / "bench.truth.json"), grid, beyond


@pytest.fixture(scope="module")
def measured_random(tmp_path_factory):
    """A random program of the default generator (default sizing), mostly computation,
    built with counters and run on the default grid and at the test point: (truth, grid,
    test point)."""
    directory = tmp_path_factory.mktemp("random")
    spec = random_program(np.random.default_rng(2026), "random", kernels=7, communication_share=0.2)
    executable = _build(write_program(spec, directory))
    grid = _measure(executable, GRID, directory)
    beyond = _measure(executable, [TEST_POINT], directory)
    return read_truth(directory / "random.truth.json"), grid, beyond


@pytest.mark.slow
@needs_toolchain
def test_every_operation_runs_and_has_its_call_paths(measured):
    truth, experiment, _ = measured
    operations = {t.operation for t in truth.values() if t.operation}
    assert operations == set(COMMUNICATION_OPERATIONS)
    callpaths = set(experiment.callpaths)
    for kernel in truth.values():
        assert kernel.callpath in callpaths
        if kernel.mpi_callpath is not None:
            assert kernel.mpi_callpath in callpaths
            law = CommunicationLaw.for_callpath(kernel.mpi_callpath)
            assert law is not None and law.law is kernel.law
    # the frame posts the other side of send and recv; nothing else is measured
    frame = {"main", "main->MPI_Init", "main->MPI_Finalize", "main->MPI_Irecv",
             "main->MPI_Isend", "main->MPI_Wait"}  # fmt: skip
    kernels = {p for t in truth.values() for p in (t.callpath, t.mpi_callpath) if p}
    assert callpaths == frame | kernels


@pytest.mark.slow
@needs_toolchain
def test_measured_bytes_equal_the_truth(measured):
    truth, experiment, _ = measured
    for kernel in truth.values():
        if kernel.mpi_callpath is None:
            continue
        assert kernel.bytes is not None and kernel.bytes_metric is not None
        measured_bytes = _per_call(experiment, kernel.mpi_callpath, kernel.bytes_metric)
        assert len(measured_bytes) == len(RANKS) * len(SIZES)
        for (ranks, size), value in measured_bytes.items():
            point = {"p": ranks, "n": size}
            exact = kernel.exact_bytes(point)
            assert value == exact, (kernel.function, point)
            model = float(kernel.bytes.evaluate(point))
            if kernel.message is None:
                assert exact == model == 0  # barrier
            else:
                elements = kernel.spec.message.elements(point)
                assert abs(model / exact - 1) <= 0.5 / elements, (kernel.function, point)


def _check_blocks_follow_the_effort(
    kernel: KernelTruth, experiment: Experiment
) -> tuple[int, float]:
    """The package's promise for one kernel at every measured point: the counted blocks
    are exactly ``iterations + 2 * outer_iterations + c`` with one small constant ``c``,
    the iterations are the effort rounded once per term, and ``blocks - c`` is within
    :data:`EFFORT_TOLERANCE` of the effort model. Returns (points checked, ``c``)."""
    assert kernel.effort is not None
    blocks = _per_call(experiment, kernel.callpath, "basic_blocks")
    constants = set()
    for (ranks, size), value in blocks.items():
        point = {"p": ranks, "n": size}
        iterations, outer = kernel.iterations(point), kernel.outer_iterations(point)
        model = float(kernel.effort.evaluate(point))
        assert abs(iterations - model) <= 0.5 * len(kernel.spec.nests), (kernel.function, point)
        constant = value - iterations - LOOP_OVERHEAD * outer
        constants.add(constant)
        deviation = abs(value - constant - model) / model
        assert deviation <= EFFORT_TOLERANCE, (kernel.function, point, deviation)
    assert len(constants) == 1, (kernel.function, constants)
    constant = constants.pop()
    assert 0 <= constant <= MAX_CONSTANT
    return len(blocks), constant


def _check_count_models(truth: dict[str, KernelTruth], experiment: Experiment) -> None:
    """The effort modeler's count models of the grid's blocks have the truth's terms (every
    term's exponents, not only the leading ones), and beyond them only the loops' own
    overhead, which exact counts carry: a term of lower order than a truth term (the outer
    loop of a ``p^2`` nest adds ``2 * p`` blocks)."""
    computing = [k for k in truth.values() if k.effort is not None]
    counts = experiment.restricted(
        callpaths=[k.callpath for k in computing], metrics=["basic_blocks"]
    )
    models = EffortModeler().counter_modeler().fit(counts)
    for kernel in computing:
        assert kernel.effort is not None
        fitted = models[(kernel.callpath, "basic_blocks")]
        shapes = {frozenset(term.factors) for term in fitted.terms}
        expected = {frozenset(term.factors) for term in kernel.effort.terms}
        why = (kernel.function, kernel.effort.text(), fitted.text())
        assert expected <= shapes, why
        assert all(any(_lower_order(e, t) for t in expected) for e in shapes - expected), why


def _lower_order(shape: frozenset, than: frozenset) -> bool:
    """Does every factor of ``shape`` grow no faster than ``than``'s in that parameter?"""
    powers = {f.parameter: (f.exponent, f.log_exponent) for f in than}
    return all(
        f.parameter in powers and (f.exponent, f.log_exponent) <= powers[f.parameter] for f in shape
    )


@pytest.mark.slow
@needs_toolchain
def test_counted_blocks_follow_the_effort(measured):
    truth, grid, beyond = measured
    computing = [k for k in truth.values() if k.effort is not None]
    assert len(computing) == len(COMPUTATION) + 1
    for kernel in computing:
        points, constant = _check_blocks_follow_the_effort(kernel, grid)
        assert points == len(GRID)
        assert _check_blocks_follow_the_effort(kernel, beyond) == (1, constant)


@pytest.mark.slow
@needs_toolchain
def test_count_models_have_the_truths_terms(measured):
    truth, grid, _ = measured
    _check_count_models(truth, grid)


@pytest.mark.slow
@needs_toolchain
def test_models_of_the_bytes_have_the_truths_exponents(measured):
    truth, experiment, _ = measured
    counts = experiment.restricted(
        callpaths=[k.mpi_callpath for k in truth.values() if k.mpi_callpath and k.message],
        metrics=["mpi_bytes_sent", "mpi_bytes_received"],
    )
    models = PMNFModeler().with_params(significance=None).fit(counts)
    for kernel in truth.values():
        if kernel.message is not None:
            assert kernel.mpi_callpath is not None and kernel.bytes is not None
            assert kernel.bytes_metric is not None
            fitted = models[(kernel.mpi_callpath, kernel.bytes_metric)]
            expected = kernel.bytes.leading_exponents()
            assert fitted.leading_exponents() == expected, (kernel.function, fitted.text())


@pytest.mark.slow
@needs_toolchain
def test_random_program_counts_follow_the_effort_and_model_exactly(measured_random):
    truth, grid, beyond = measured_random
    computing = [k for k in truth.values() if k.effort is not None]
    assert len(computing) >= 5 and any(
        nest.nested for k in computing for nest in k.spec.nests
    )  # the seed draws product terms
    for kernel in computing:
        points, constant = _check_blocks_follow_the_effort(kernel, grid)
        assert points == len(GRID)
        assert _check_blocks_follow_the_effort(kernel, beyond) == (1, constant)
    _check_count_models(truth, grid)


@pytest.mark.slow
@needs_toolchain
def test_random_programs_compile_run_and_match_their_truth(tmp_path):
    rng = np.random.default_rng(2024)
    for number in range(2):
        spec = random_program(rng, f"random_{number}", kernels=6, communication_share=0.5)
        source = write_program(spec, tmp_path)
        executable = _build(source)
        truth = read_truth(tmp_path / f"random_{number}.truth.json")
        points = [(2, 1000), (3, 2000), (6, 5000), TEST_POINT]
        experiment = _measure(executable, points, tmp_path / f"run-{number}")
        for kernel in truth.values():
            if kernel.effort is not None:
                assert _check_blocks_follow_the_effort(kernel, experiment)[0] == len(points)
            if kernel.mpi_callpath is not None:
                assert kernel.bytes_metric is not None
                for (ranks, size), value in _per_call(
                    experiment, kernel.mpi_callpath, kernel.bytes_metric
                ).items():
                    assert value == kernel.exact_bytes({"p": ranks, "n": size})


@pytest.mark.slow
def test_generated_kernels_follow_their_truth_on_the_grid():
    """The sizing promise, on the exact integers the programs execute (the tests above
    show the programs execute them): for random kernels of the default generator,
    ``iterations + 2 * outer_iterations`` is within the tolerance of the effort on the
    default grid and at the test point, each product term's inner loops share out its
    iterations exactly, and no term runs beyond ``max_iterations`` at the reference."""
    generator = ProgramGenerator(communication_share=0.0)
    rng = np.random.default_rng(6)
    reference = generator.reference_point
    for index in range(400):
        kernel = generator.random_kernel(index + 1, rng)
        effort = kernel.effort("main")
        assert effort is not None
        for ranks, size in [*GRID, TEST_POINT]:
            point = {"p": ranks, "n": size}
            model = float(effort.evaluate(point))
            counted = kernel.iterations(point) + LOOP_OVERHEAD * kernel.outer_iterations(point)
            assert abs(counted / model - 1) <= EFFORT_TOLERANCE, (effort.text(), point)
            for nest in kernel.nests:
                trips = nest.inner_trips(point)
                assert sum(trips) == nest.iterations(point) and min(trips) >= 1
                assert len(trips) == max(1, nest.outer_iterations(point))
        terms = len(kernel.nests)
        assert kernel.iterations(reference) <= generator.max_iterations * terms + terms


@pytest.mark.slow
@needs_toolchain
def test_generated_program_rejects_bad_arguments(tmp_path):
    spec = ProgramSpec("tiny", (KernelSpec("kernel_01_barrier", operation="barrier"),))
    executable = _build(write_program(spec, tmp_path))
    for argv in (["x"], ["100", "0"]):
        environment = {**os.environ, "PERFCAST_PROFILE_DIR": str(tmp_path / "prof")}
        done = subprocess.run(
            [*MPIRUN, "-np", "1", str(executable), *argv],
            env=environment,
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
        )
        assert done.returncode != 0 and "usage: mpirun -np P" in done.stderr, argv


def test_truth_round_trip_and_model_file(tmp_path):
    spec = _specified_program(np.random.default_rng(5))
    write_program(spec, tmp_path)
    path = tmp_path / "bench.truth.json"
    assert read_spec(path) == spec
    truth = read_truth(path)
    assert list(truth) == [k.function for k in spec.kernels]
    assert truth == truth_of(spec)
    operations = {t.operation: t for t in truth.values() if t.operation}
    allreduce = operations["allreduce"]
    assert allreduce.kind == "communication" and allreduce.operation == "allreduce"
    assert allreduce.law is not None and allreduce.law.name == "REDUCTION"
    assert allreduce.bytes is not None and allreduce.bytes.text().endswith("p^(2) * n^(1/2)")
    bcast = operations["bcast"].bytes
    assert bcast is not None and bcast.leading_exponents() == {"p": (1, 0), "n": (1, 0)}
    complexity = allreduce.communication_complexity()
    assert complexity is not None and complexity.callpath == allreduce.mpi_callpath
    # the law's B is the reduced vector (p * n^(1/2) doubles), not the p copies the runtime
    # records per rank (effort/laws.py): linear in p, not quadratic
    assert complexity.leading_exponents() == {"p": (1, 0), "n": (1 / 2, 0)}
    assert complexity.terms[0].factors == (Factor("p", Fraction(0), 1),)  # log2(p)
    barrier = operations["barrier"].communication_complexity()
    assert barrier is not None and barrier.text() == "0 + 1 * log2(p)"
    assert operations["send"].bytes_metric == "mpi_bytes_sent"
    assert operations["recv"].bytes_metric == "mpi_bytes_received"
    nested = truth["kernel_02_compute"]
    assert nested.kind == "computation" and nested.bytes is None and nested.law is None
    assert nested.communication_complexity() is None
    computation = nested.computation_complexity()
    assert computation is not None and computation.text() == "0 + 1 * p^(1/2) * n * log2(n)"
    nest = nested.spec.nests[0]
    assert [factor.parameter for factor in nest.factors] == ["p", "n"]  # the p loop outside
    assert nest.nested and nest.outer_scale is not None
    # strict JSON (no NaN), and also a perfcast model file
    json.loads(path.read_text(), parse_constant=lambda name: pytest.fail(f"{name} in JSON"))
    models = ModelSet.load(path)
    assert models[("main->kernel_02_compute", "iterations")].leading_exponents() == {
        "p": (1 / 2, 0),
        "n": (1, 1),
    }
    assert (allreduce.mpi_callpath, "mpi_bytes_sent") in models


def test_same_seed_same_program():
    first = random_program(np.random.default_rng(9), kernels=8)
    second = random_program(np.random.default_rng(9), kernels=8)
    other = random_program(np.random.default_rng(10), kernels=8)
    assert first == second and render_program(first) == render_program(second)
    assert render_program(first) != render_program(other)
    assert [k.function for k in first.kernels][:2] == [
        kernel_name(1, first.kernels[0].operation),
        kernel_name(2, first.kernels[1].operation),
    ]


def test_random_byte_truths_stay_in_the_search_space():
    """allgather/allreduce bytes gain a factor p: the generator keeps p's exponent in I."""
    generator = ProgramGenerator(communication_share=1.0)
    rng = np.random.default_rng(1)
    allowed = set(generator.exponents)
    seen = set()
    for index in range(300):
        kernel = generator.random_kernel(index + 1, rng)
        seen.add(kernel.operation)
        bytes_model = KernelTruth.of(kernel, generator.parameters).bytes
        assert bytes_model is not None
        for term in bytes_model.terms:
            assert all(f.exponent in allowed for f in term.factors), bytes_model.text()
    assert seen == set(COMMUNICATION_OPERATIONS)


def test_cli_writes_programs_with_their_truth(tmp_path, capsys):
    argv = ["synth", "-o", str(tmp_path / "a"), "--count", "2", "--seed", "3", "--kernels", "4"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    for name in ("bench_000", "bench_001"):
        assert (tmp_path / "a" / f"{name}.cpp").is_file()
        truth = read_truth(tmp_path / "a" / f"{name}.truth.json")
        assert len(truth) == 4
        for function in truth:
            assert function in out
    assert "(seed 3)" in out
    assert main([*argv[:2], str(tmp_path / "b"), *argv[3:]]) == 0
    assert (tmp_path / "a" / "bench_001.cpp").read_text() == (
        tmp_path / "b" / "bench_001.cpp"
    ).read_text()


def test_cli_specified_kernels(tmp_path, capsys):
    argv = [
        "synth", "-o", str(tmp_path), "--seed", "1", "--name", "spec",
        "--computation", "2.5*n^2*log2(n)^1 + p^(1/2)",
        "--communication", "allreduce:n^1", "--communication", "barrier",
    ]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    truth = read_truth(tmp_path / "spec.truth.json")
    assert list(truth) == ["kernel_01_compute", "kernel_02_allreduce", "kernel_03_barrier"]
    effort = truth["kernel_01_compute"].effort
    assert effort is not None and effort.terms[0].coefficient == 2.5
    assert effort.leading_exponents() == {"n": (2, 1), "p": (1 / 2, 0)}
    assert "MPI_Allreduce" in out and "REDUCTION" in out and "SYNCHRONISATION" in out
    assert json.loads((tmp_path / "spec.truth.json").read_text())["kernels"][2]["law"] == (
        "SYNCHRONISATION"
    )


@pytest.mark.parametrize(
    ("option", "expression", "message"),
    [
        ("--computation", "n^2*m", "bad token 'm' at column 5"),
        ("--computation", "n^^2", "bad token '^' at column 3"),
        ("--computation", "n $ p", "bad token '$' at column 3"),
        ("--computation", "log(n)", "bad token 'log' at column 1"),
        ("--computation", "n^-1", "bad token '-' at column 3"),
        ("--computation", "n^(1/0)", "division by zero"),
        ("--computation", "n +", "ends where a factor was expected"),
        ("--computation", "3", "must be followed by '*'"),
        ("--communication", "bcast", "needs a message size term"),
        ("--communication", "barrier:n", "a barrier moves no message"),
        ("--communication", "allreduce:n+p", "bad token '+' at column 12 of 'allreduce:n+p'"),
        ("--communication", "bcast:log2(n", "ends where ) was expected"),
        ("--computation", "log2)n(", "bad token ')' at column 5"),
        ("--communication", "broadcast:n", "known operations: allgather, allreduce, barrier"),
    ],
)
def test_cli_bad_expressions_name_the_problem(tmp_path, capsys, option, expression, message):
    assert main(["synth", "-o", str(tmp_path), option, expression]) == 2
    err = capsys.readouterr().err
    assert err.startswith("perfcast synth: error: ") and message in err, err
    assert not list(tmp_path.iterdir())


def test_bad_specs_are_rejected(tmp_path):
    with pytest.raises(InputError, match="unknown MPI operation 'alltoall'"):
        KernelSpec("kernel_01_x", operation="alltoall")
    with pytest.raises(InputError, match="needs a message"):
        KernelSpec("kernel_01_x", operation="bcast")
    with pytest.raises(InputError, match="at least one loop"):
        KernelSpec("kernel_01_x")
    barrier = KernelSpec("kernel_01_barrier", operation="barrier")
    with pytest.raises(InputError, match="unique"):
        ProgramSpec("bench", (barrier, barrier))
    with pytest.raises(InputError, match="C identifier"):
        ProgramSpec("my-bench", (barrier,))
    with pytest.raises(InputError, match="not a perfcast synth truth file"):
        (tmp_path / "x.json").write_text("{}")
        read_truth(tmp_path / "x.json")
    with pytest.raises(InputError, match="no such truth file"):
        read_truth(tmp_path / "missing.truth.json")
    p, n = Factor("p", Fraction(1)), Factor("n", Fraction(2))
    with pytest.raises(InputError, match="needs an outer_scale"):
        LoopNest(2.0, (p, n))
    with pytest.raises(InputError, match="needs an outer_scale"):
        LoopNest(2.0, (n,), 1.0)
    with pytest.raises(InputError, match="coefficient must be positive"):
        LoopNest(0.0, (n,))
    with pytest.raises(InputError, match="smallest values"):
        ProgramGenerator(smallest=(8, 1000))


def test_truth_of_an_older_format_asks_to_regenerate(tmp_path):
    """Version-1 truth files rounded each loop on its own: their programs count differently."""
    spec = ProgramSpec("old", (KernelSpec("kernel_01_barrier", operation="barrier"),))
    write_program(spec, tmp_path)
    path = tmp_path / "old.truth.json"
    data = json.loads(path.read_text())
    data["perfcast_synth_truth"] = 1
    path.write_text(json.dumps(data))
    with pytest.raises(InputError, match="not version 2; regenerate"):
        read_truth(path)


def test_product_terms_share_their_iterations_out_exactly():
    """A product term's iterations are its coefficient times its factors rounded once;
    the outer loop runs over the ranks factor, never more often than there are iterations,
    and however its count rounds, the inner loops run exactly the term's iterations."""
    text = "3e5*p^(1/4)*n^(1/3)"
    kernel = ProgramGenerator().computation("kernel_01_compute", text, np.random.default_rng(0))
    (nest,) = kernel.nests
    assert nest.coefficient == 3e5 and nest.outer_scale is not None
    outer_counts = set()
    for ranks, size in [*GRID, TEST_POINT, (3, 2)]:
        point = {"p": ranks, "n": size}
        exact = 3e5 * ranks ** (1 / 4) * size ** (1 / 3)
        assert abs(nest.iterations(point) - exact) <= 0.5
        outer = nest.outer_iterations(point)
        outer_counts.add(outer)
        assert outer == round(nest.outer_scale * ranks ** (1 / 4))  # the ranks factor
        trips = nest.inner_trips(point)
        assert len(trips) == outer and sum(trips) == nest.iterations(point)
        assert max(trips) - min(trips) <= 1
    assert min(outer_counts) > 100  # really nested
    # an outer loop never runs more often than the term has iterations
    crowded = LoopNest(1.0, (Factor("p", Fraction(2)), Factor("n", Fraction(1))), 100.0)
    point = {"p": 3, "n": 2}
    assert crowded.iterations(point) == crowded.outer_iterations(point) == 18
    assert crowded.inner_trips(point) == [1] * 18


def test_cli_smallest_point_sizes_the_loops_there(tmp_path):
    # sized by default for n >= 1000; measured down to n = 100 only with --smallest
    for name, extra in (("default", []), ("small", ["--smallest", "2,100"])):
        argv = ["synth", "-o", str(tmp_path), "--seed", "4", "--name", name, "--kernels", "0"]
        assert main([*argv, "--computation", "n^2", *extra]) == 0
    point = {"p": 2, "n": 100}
    default = read_truth(tmp_path / "default.truth.json")["kernel_01_compute"]
    small = read_truth(tmp_path / "small.truth.json")["kernel_01_compute"]
    assert default.iterations(point) < MIN_ITERATIONS <= small.iterations(point)
