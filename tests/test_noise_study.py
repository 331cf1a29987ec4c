"""The noise study's harness (benchmarks/noise_study.py): noise injection, classic vs
effort-prior fits, ED/RE, repetitions and the report, on known truths and on one tiny
generated program measured for real."""

from __future__ import annotations

import itertools
import shutil
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import noise_study  # the benchmark script; benchmarks/ is not a package

from perfcast.experiment import read_experiment
from perfcast.experiment.experiment import Experiment, Metric
from perfcast.synth import Noise, pmnf_function

P = (2, 3, 4, 5, 6)
N = (1000, 2000, 3000, 4000, 5000)
TEST_POINT = {"p": 7.0, "n": 6000.0}
COMPUTE = "t:main->kernel_01_compute"
ALLREDUCE = "t:main->kernel_02_allreduce->MPI_Allreduce"

# Counts: two loop nests of different shapes; bytes of an allreduce of n doubles per rank
# (recorded as p copies of the vector, one per receiving rank: effort/laws.py).
BLOCKS = pmnf_function(COMPUTE, 12.0, [(3.0, {"n": (2, 0)}), (40.0, {"p": (1, 0), "n": (1, 0)})])
BYTES = pmnf_function(ALLREDUCE, 0.0, [(8.0, {"p": (1, 0), "n": (1, 0)})])


def _time(callpath: str, p: float, n: float) -> float:
    point = {"p": np.asarray(p), "n": np.asarray(n)}
    if callpath == COMPUTE:
        return 2e-9 * float(BLOCKS.evaluate(point))
    return 3e-6 * np.log2(p) + 1e-9 * float(BYTES.evaluate(point)) / p  # the vector's bytes


def _study() -> noise_study.Study:
    """Noise-free time proportional to the effort, exact counts, 3 repetitions."""
    rows = []
    for p, n in itertools.product(P, N):
        point = {"p": np.asarray(p), "n": np.asarray(n)}
        for _ in range(3):
            rows.append((COMPUTE, "time", (p, n), _time(COMPUTE, p, n)))
            rows.append((COMPUTE, "basic_blocks", (p, n), float(BLOCKS.evaluate(point))))
            rows.append((ALLREDUCE, "time", (p, n), _time(ALLREDUCE, p, n)))
            rows.append((ALLREDUCE, "mpi_bytes_sent", (p, n), float(BYTES.evaluate(point))))
    train = Experiment.from_rows(("p", "n"), rows, [Metric("time", "s")])
    law = pmnf_function(ALLREDUCE, 0.0, [(1.0, {"p": (0, 1)}), (1.0, {"n": (1, 0)})])
    kernels = [
        noise_study.Kernel(COMPUTE, noise_study.COMPUTATION, BLOCKS),
        noise_study.Kernel(ALLREDUCE, noise_study.COMMUNICATION, law),
    ]
    test_time = {k.callpath: _time(k.callpath, TEST_POINT["p"], TEST_POINT["n"]) for k in kernels}
    return noise_study.Study(train, TEST_POINT, {"time": test_time}, kernels, train.data.iloc[:0])


def test_effort_priors_are_exact_without_noise_and_keep_their_exponents_under_noise():
    study = _study()
    comparison = noise_study.Comparison(study)
    assert not comparison.without_prior
    clean = comparison.evaluate([study.time])
    effort = clean[clean["approach"] == noise_study.EFFORT]
    assert (effort[["ed_p", "ed_n"]] == 0).all().all()
    assert (effort["re"] < 1e-6).all()

    rng = np.random.default_rng(3)
    heavy = comparison.evaluate(
        noise_study.noisy_variants(study.time, Noise("uniform", 0.75), 8, rng)
    )
    by_approach = heavy.groupby("approach")
    effort_ed = by_approach[["ed_p", "ed_n"]].mean().loc[noise_study.EFFORT]
    classic_ed = by_approach[["ed_p", "ed_n"]].mean().loc[noise_study.CLASSIC]
    assert effort_ed.sum() == 0  # the counts fix the exponents whatever the noise
    assert classic_ed.sum() > 0  # 75 % noise moves the black-box exponents
    # classic and effort as shipped, the other policies, classic on the minimum and effort
    # on the centre (the same points as the other approach)
    approaches = 2 + len(noise_study.NEGATIVE_TERM_POLICIES) - 1 + 2
    assert heavy["variant"].nunique() == 8 and len(heavy) == 8 * 2 * approaches


def test_repetition_variants_are_every_subset():
    study = _study()
    for size, expected in ((1, 3), (2, 3), (3, 1)):
        variants = noise_study.repetition_variants(study.time, size)
        assert len(variants) == expected
        assert all(v.data["repetition"].nunique() == size for v in variants)


def test_report_has_every_setting_and_the_targets():
    study = _study()
    results = noise_study.analyse(study, injections=2, seed=1, stream=None)
    config = noise_study.Configuration(ranks=P, sizes=N, repetitions=3, injections=2)
    report = noise_study.render(study, results, config, ["$ header"])
    for setting in ("none (measured)", "uniform +2%", "normal +50%", "exponential +75%"):
        assert setting in report
    assert "computation (1 kernels)" in report and "communication (1 kernels)" in report
    assert "ED = 0 for effort-prior models in every noise setting: met" in report
    assert "one repetition enough (50 measurements instead of 75)" in report
    # time proportional to the effort: nothing to flag as waiting
    assert results.disagreements == {"computation": (0, 1), "communication": (0, 1)}
    assert "waiting-time diagnosis" in report


@pytest.mark.skipif(
    shutil.which("mpicxx") is None or shutil.which("clang-16") is None,
    reason="needs Open MPI and clang-16",
)
def test_tiny_generated_program_measured_for_real(tmp_path):
    config = noise_study.Configuration(
        programs=1,
        kernels=3,
        ranks=(2, 3, 4),
        sizes=(500, 1000, 1500),
        repetitions=2,
        repeat=1,
        injections=2,
        seed=5,
    )
    directories = noise_study.generate(config, tmp_path)
    noise_study.measure_all(directories, stream=None)
    runs, seconds = noise_study.stored_seconds(directories)
    assert runs == 2 * (9 * 2 + 2 * 2) and seconds > 0  # counting and timing campaigns
    # time comes from the build without counters, counts from the one with them
    (directory,) = directories
    light = read_experiment(directory / "train-light.sqlite")
    assert {"time", "cpu_time"} <= set(light.metrics) and "basic_blocks" not in light.metrics
    assert "basic_blocks" in read_experiment(directory / "train.sqlite").metrics
    study = noise_study.load(directories, config)
    assert study.kernels and set(study.test_time) == {k.callpath for k in study.kernels}
    # computation kernels are modeled from the CPU time the runtime measured for them
    assert study.metrics[noise_study.COMPUTATION] == "cpu_time"
    compute = [k.callpath for k in study.kernels if k.kind == noise_study.COMPUTATION]
    cpu = study.train.data[study.train.data["metric"] == "cpu_time"]
    assert set(compute) <= set(cpu["callpath"]) and (cpu["value"] > 0).all()
    results = noise_study.analyse(study, config.injections, config.seed, stream=None)
    heavy = results.noise[results.noise["intensity"] == 0.75]
    means = heavy.groupby("approach")["re"].mean()
    assert means[noise_study.CLASSIC] != means[noise_study.EFFORT]
    report = noise_study.render(study, results, config, ["$ header"])
    assert "poisson +75%" in report and "targets:" in report


def test_the_cache_is_keyed_by_the_programs_and_what_is_measured(tmp_path):
    config = noise_study.Configuration(programs=2, kernels=2, seed=5)
    first = noise_study.generate(config, tmp_path)
    assert noise_study.generate(config, tmp_path) == first  # same programs: same cache
    assert all(d.name.startswith(f"bench{i:02d}-") for i, d in enumerate(first))
    other_programs = noise_study.generate(replace(config, seed=6), tmp_path)
    other_runs = noise_study.generate(replace(config, repetitions=3), tmp_path)
    assert not set(first) & set(other_programs) and not set(first) & set(other_runs)
    source = first[0] / "bench00.cpp"
    source.write_text(source.read_text() + "// built and measured")
    noise_study.generate(config, tmp_path)
    assert source.read_text().endswith("// built and measured")  # kept, not rewritten
