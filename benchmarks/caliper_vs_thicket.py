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
jobsize = 1372 (4x the largest measured: the summary's target), then the whole-process
times. A multi-parameter comparison needs a set that varies two parameters; the shared
Caliper sets vary one each (LULESH: jobsize; RAJAPerf: two problem sizes), so this set
shows the single-parameter case thicket supports, and the multi-parameter path is tested
on hatchet GraphFrames (tests/test_thicket.py).

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


if __name__ == "__main__":
    main()
