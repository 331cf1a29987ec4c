"""perfcast next to ``thicket.model_extrap`` on thicket's own LULESH Caliper set.

The set (``../shared/data/caliper/mpi_scaling_cali``): LULESH with Caliper's SPOT channel
at 27, 64, 125, 216 and 343 ranks, ``problem_size`` 30 per rank (weak scaling), one run
each. Both tools read the same five ``.cali`` files and model the same metric, the mean
over ranks of each region's inclusive time (thicket's ``Avg time/rank``, perfcast's
``time_inclusive``), along ``jobsize``:

* **thicket**: ``Thicket.from_caliperreader`` + ``model_extrap.Modeling(tk, "jobsize")``
  (Extra-P 4.2.5 underneath), run in the Extra-P venv (Extra-P pins NumPy 1);
* **perfcast**: ``perfcast model DIR --parameters jobsize --metric time_inclusive``, the
  reader of ``.cali`` files, and the same through ``perfcast.integrations.thicket`` on a
  Thicket built here, which must give the same models.

Printed: one row per call path with both models, SMAPE, and perfcast's verdict at
jobsize = 1372 (4x the largest measured, 343; the summary's default target moves it up to
the next cube of the series, 1728), then the whole-process times.

The shared Caliper sets vary one parameter each (LULESH: jobsize; RAJAPerf: two problem
sizes), so the second part takes a Thicket that varies two: LULESH measured here by
perfcast over p in {1, 8, 27} and size in {4..8} (the plausibility benchmark's campaign,
``python3 benchmarks/plausibility.py --remeasure`` makes it, 3 repetitions, CPU time per
rank), handed to thicket as a Thicket (``perfcast.integrations.thicket.to_thicket``; the
venv builds the same Thicket from the same hatchet literals). ``thicket.model_extrap``
models one parameter: size, at p = 1 (the profiles filtered as a thicket user would);
perfcast models p and size on the whole Thicket (``model_thicket``). The code's
complexity per rank is ``size^3`` for every kernel listed (benchmarks/plausibility/
expected.toml, file and line); both sides are black-box here (a Thicket carries no
counters), so this compares the searches, not perfcast's default with its counting pass.

    python benchmarks/caliper_vs_thicket.py > benchmarks/results/caliper_vs_thicket.txt
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
SET = HERE.parents[1] / "shared" / "data" / "caliper" / "mpi_scaling_cali"
TARGET = 1372.0
THICKET_METRIC = "Avg time/rank"
PLAUSIBILITY_CACHE = HERE / ".plausibility-cache" / "lulesh"
KERNELS = (
    "CalcFBHourglassForceForElems",
    "IntegrateStressForElems",
    "CalcKinematicsForElems",
    "CalcHourglassControlForElems",
    "CalcMonotonicQGradientsForElems",
    "CalcEnergyForElems",
    "CalcPressureForElems",
    "CalcForceForNodes",
)
"""LULESH kernels of size^3 per rank (benchmarks/plausibility/expected.toml)."""

THICKET_LULESH_SCRIPT = """
import json, re, sys, warnings
warnings.simplefilter("ignore")
import pandas as pd
import thicket as th
from thicket.model_extrap import Modeling
literals = json.load(open(sys.argv[1]))
profiles = []
for literal, point in literals:
    profile = th.Thicket.from_literal(literal)
    index = pd.Index(profile.profile, name="profile")
    profile.metadata = pd.DataFrame({k: [v] for k, v in point.items()}, index=index)
    profiles.append(profile)
tk = th.Thicket.concat_thickets(profiles, disable_tqdm=True)
at_one = tk.filter_metadata(lambda row: row["p"] == 1)
Modeling(at_one, "size", chosen_metrics=["cpu_time"]).produce_models()
stats = at_one.statsframe.dataframe
out = {}
for node in stats.index:
    path = "->".join(str(n.frame["name"]) for n in node.path())
    # thicket names the one parameter of its models p; here it is size
    text = re.sub(r"\\bp\\b", "size", str(stats.at[node, "cpu_time_extrap-model"]))
    short = re.sub(r"-?[0-9]+[.][0-9]+(e[-+]?[0-9]+)?", lambda m: f"{float(m.group()):.3g}", text)
    out[path] = {"model": short, "smape": float(stats.at[node, "cpu_time_SMAPE_extrap-model"])}
print(json.dumps(out))
"""

THICKET_SCRIPT = """
import json, sys, time, glob, warnings
warnings.simplefilter("ignore")
start = time.perf_counter()
import thicket as th
from thicket.model_extrap import Modeling
files = sorted(glob.glob(sys.argv[1] + "/*.cali"))
tk = th.Thicket.from_caliperreader(files, disable_tqdm=True)
Modeling(tk, "jobsize", chosen_metrics=[sys.argv[2]]).produce_models()
stats = tk.statsframe.dataframe
out = {}
for node in stats.index:
    path = "->".join(str(n.frame["name"]) for n in node.path())
    model = stats.at[node, sys.argv[2] + "_extrap-model"]
    out[path] = {
        "model": str(model),
        "smape": float(stats.at[node, sys.argv[2] + "_SMAPE_extrap-model"]),
        "at_target": float(model.eval(float(sys.argv[3]))),
    }
print(json.dumps({"seconds": time.perf_counter() - start, "models": out}))
"""


def thicket_models() -> dict:
    python = thicket_python()
    done = subprocess.run(
        [str(python), "-c", THICKET_SCRIPT, str(SET), THICKET_METRIC, str(TARGET)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def perfcast_models() -> tuple[dict, float]:
    from perfcast.experiment import read_experiment
    from perfcast.workflows.model import ModelRequest, model_campaign

    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numhosts changes with jobsize: said once below
        experiment = read_experiment(SET, parameters="jobsize")
    request = ModelRequest(experiment, metrics=("time_inclusive",))
    models = model_campaign(request).models
    values = {"jobsize": sorted(set(experiment.coordinates()[:, 0]))}
    table = models.to_dataframe({"jobsize": TARGET}, values)
    return {row.callpath: row for row in table.itertuples()}, time.perf_counter() - start


def through_thicket() -> dict:
    import thicket as th

    from perfcast.integrations.thicket import model_thicket

    files = sorted(str(path) for path in SET.glob("*.cali"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tk = th.Thicket.from_caliperreader(files, disable_tqdm=True)
        models = model_thicket(tk, "jobsize", metrics=[THICKET_METRIC])
    return {model.callpath: model.text() for model in models}


def two_parameters() -> None:
    """The second part (module docstring): a Thicket over p and size."""
    import tempfile

    from perfcast.effort.combine import combine_sources
    from perfcast.experiment import read_experiment
    from perfcast.experiment.names import function_name
    from perfcast.integrations.thicket import model_thicket, thicket_literals, to_thicket

    store = PLAUSIBILITY_CACHE / "lulesh.sqlite"
    counts = PLAUSIBILITY_CACHE / "lulesh.counts.sqlite"
    print()
    if not (store.exists() and counts.exists()):
        print(
            f"# part 2 left out: no LULESH campaign in {PLAUSIBILITY_CACHE}; make it with "
            "python3 benchmarks/plausibility.py --remeasure"
        )
        return
    timed = read_experiment(store).restricted(metrics=["cpu_time"])
    combined = combine_sources(timed, read_experiment(counts), time_metric="cpu_time")
    metrics = ["cpu_time", "basic_blocks"]
    literals = thicket_literals(combined.experiment, metrics)
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as file:
        json.dump(literals, file)
    python = thicket_python()
    done = subprocess.run(
        [str(python), "-c", THICKET_LULESH_SCRIPT, file.name],
        capture_output=True,
        text=True,
        check=True,
    )
    Path(file.name).unlink()
    theirs = json.loads(done.stdout.strip().splitlines()[-1])
    tk = to_thicket(combined.experiment, metrics)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        black_box = model_thicket(tk, ["p", "size"], metrics=["cpu_time"], priors=["none"])
        default = model_thicket(tk, ["p", "size"], metrics=metrics)
    points = timed.coordinates()
    ranks, sizes = (sorted({int(v) for v in points[:, i]}) for i in (0, 1))
    print(
        f"# part 2: LULESH measured by perfcast, {len(points)} points over p {ranks} and "
        f"size {sizes} (CPU time, 3 repetitions; basic-block counts of its counting pass), "
        "as one Thicket"
    )
    print(
        "# thicket.model_extrap: size at p = 1; perfcast: p and size on the whole Thicket, "
        "black-box (--priors none) and as perfcast model chooses (effort priors from the counts)"
    )
    columns = ("thicket.model_extrap (size)", "perfcast black-box", "perfcast default")
    print(f"{'kernel (expected size^3)':<32} | " + " | ".join(f"{c:<40}" for c in columns))
    cubic = dict.fromkeys(columns, 0)
    for kernel in KERNELS:
        callpath = next(
            (m.callpath for m in default if function_name(m.callpath.split("->")[-1]) == kernel),
            None,
        )
        if callpath is None or callpath not in theirs:
            print(f"{kernel:<32} | (not measured)")
            continue
        peer = theirs[callpath]["model"]
        mine = black_box[(callpath, "cpu_time")], default[(callpath, "cpu_time")]
        cubic[columns[0]] += "size^(3)" in peer
        for column, model in zip(columns[1:], mine, strict=True):
            cubic[column] += model.leading_exponents().get("size") == (3, 0)
        texts = (peer, *(model.text(3) for model in mine))
        print(f"{kernel:<32} | " + " | ".join(f"{t:<40}" for t in texts))
    print(
        "lead term size^3 (the code's): "
        + ", ".join(f"{column} {count} of {len(KERNELS)}" for column, count in cubic.items())
    )


def thicket_python() -> Path:
    """The Extra-P venv's Python, with thicket installed in it."""
    sys.path.insert(0, str(HERE))
    from _extrap import ensure_extrap

    python = ensure_extrap()
    check = subprocess.run(
        [str(python), "-c", "import thicket"], capture_output=True, text=True, check=False
    )
    if check.returncode != 0:
        subprocess.run(
            [str(python), "-m", "pip", "install", "-q", "llnl-thicket", "caliper-reader"],
            check=True,
        )
    return python


def whole_process(command: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, capture_output=True, check=True)
    return time.perf_counter() - start


def main() -> None:
    start = time.perf_counter()
    theirs = thicket_models()
    theirs_whole = time.perf_counter() - start
    ours, ours_seconds = perfcast_models()
    bridged = through_thicket()
    common = sorted(set(theirs["models"]) & set(ours), key=lambda c: -ours[c].at_target)
    print(f"# perfcast vs thicket.model_extrap on {SET.name} (LULESH, 27..343 ranks, weak)")
    print("# command: python benchmarks/caliper_vs_thicket.py")
    print(
        f"call paths: thicket {len(theirs['models'])}, perfcast {len(ours)}, in both "
        f"{len(common)}; perfcast through perfcast.integrations.thicket gives the same "
        f"formulas: {all(bridged.get(c) == ours[c].model for c in common)}"
    )
    print(f"value at jobsize={TARGET:g}; verdict: perfcast's reasons not to read it there")
    print()
    header = f"{'call path':<60} | {'thicket.model_extrap':<44} | {'SMAPE':>6} | "
    print(header + f"{'perfcast':<44} | {'SMAPE':>6} | verdict")
    for callpath in common:
        mine, peer = ours[callpath], theirs["models"][callpath]
        verdict = "ranked" if not mine.unfit else mine.unfit.split(";")[0]
        short = callpath if len(callpath) <= 60 else "..." + callpath[-57:]
        print(
            f"{short:<60} | {peer['model'][:44]:<44} | {peer['smape']:>6.1f} | "
            f"{mine.model[:44]:<44} | {mine.smape:>6.1f} | {verdict}"
        )
    steep = [c for c in common if "^" in theirs["models"][c]["model"]]
    ranked_steep = [c for c in steep if not ours[c].unfit]
    print()
    print(
        f"thicket models with a power of the parameter: {len(steep)} of {len(common)}; of these "
        f"perfcast ranks {len(ranked_steep)} at the target, the others carry their reason"
    )
    files = [str(path) for path in sorted(SET.glob("*.cali"))]
    ours_whole = whole_process(
        ["perfcast", "model", *files, "--parameters", "jobsize", "--metric", "time_inclusive"]
    )
    print()
    print("| | thicket.model_extrap | perfcast | ratio |")
    print("|---|---|---|---|")
    print(
        f"| read + model, in process (s) | {theirs['seconds']:.2f} | {ours_seconds:.2f} | "
        f"{theirs['seconds'] / ours_seconds:.1f}x |"
    )
    print(
        f"| whole process (s): the thicket script / perfcast model | {theirs_whole:.2f} | "
        f"{ours_whole:.2f} | {theirs_whole / ours_whole:.1f}x |"
    )
    two_parameters()


if __name__ == "__main__":
    main()
