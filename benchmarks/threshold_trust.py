"""Issue 25: the threshold rule on the loops that carry the time, on the user's word.

``threshold_coverage.py`` measured that the rule refuses each shared application's hot loops
for what their results do (they reach branches, MPI sizes, later steps), which no level of
analysis changes. dPerf asked its users which loops the rule takes; ``perfcast build
--threshold-trust FILE:LINE`` does too. This script tries that word, loop by loop, as a user
would, and measures what it gives and what it costs, for each application with C or C++
loops the build rewrites (miniFE's are all in header templates: none):

1. the candidates: the loops of the taint profile that the default build refused for a use
   of their results only (a reason ``--threshold-trust`` overrides: not an MPI call, I/O, exit
   or unseen call in the body, nor a header that reads what the body writes), in the
   functions with most time (``threshold_coverage.function_times``), at most
   ``--per-app`` of them;
2. each trusted alone: ``perfcast build --trace --threshold PROFILE --threshold-trust LOOP``,
   the traced run at the apps matrix's native point, and the same binary with
   ``PERFCAST_THRESHOLD=0`` (the full trace); whether the run completed, whether its MPI
   calls are those of the full run (every action but ``compute``), the share of the loop's
   iterations skipped, and the prediction (``perfcast simulate`` on this machine calibrated)
   against the full trace's;
3. the loops that completed with unchanged MPI calls, trusted together: the same figures
   and the traced run's time saved.

Run after ``apps_matrix.py`` (its taint and threshold stages)::

    python3 benchmarks/threshold_trust.py --output benchmarks/results/threshold_trust.txt
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from apps_matrix import (  # the sibling benchmarks; benchmarks/ is not a package
    APPLICATIONS,
    MPIRUN,
    PERFCAST,
    AppRun,
    StageError,
    machine_setup,
    shell,
)
from threshold_coverage import function_key, function_times, profile_loops, verdicts

from perfcast.csource.verdicts import Reason
from perfcast.simulate.trace import read_threshold_stats, read_trace

NOT_OVERRIDDEN = frozenset(
    {
        Reason.NOT_BUILT,
        Reason.COVERED,
        Reason.NO_LOOP,
        Reason.SEVERAL_LOOPS,
        Reason.MACRO,
        Reason.PRAGMA,
        Reason.CONSTEXPR,
        Reason.BREAK,
        Reason.LEAVES_LOOP,
        Reason.MPI_CALL,
        Reason.LEAVES_PROGRAM,
        Reason.IO,
        Reason.FUNCTION_POINTER,
        Reason.UNSEEN_CALLEE,
        Reason.HEADER_READS,
        Reason.HEADER_CALLS,
        Reason.HEADER_READS_MEMORY,
    }
)
"""Refusals ``--threshold-trust`` leaves standing (``LoopSafety.check``): what the loop as
written or its body itself does, and a header that depends on the body."""


@dataclass(frozen=True)
class Outcome:
    label: str
    completed: bool
    same_mpi: bool = False
    skipped: float = 0.0  # share of the trusted loops' iterations skipped
    traced: float = 0.0  # traced run, s
    full_traced: float = 0.0
    predicted: float = 0.0
    full_predicted: float = 0.0

    def row(self) -> list[str]:
        if not self.completed:
            return [self.label, "no (MPI_Abort or crash: no trace)", "-", "-", "-", "-"]
        return [
            self.label,
            "yes",
            "same" if self.same_mpi else "CHANGED",
            f"{100 * self.skipped:.0f}",
            f"{100 * (1 - self.traced / self.full_traced):+.0f}",
            f"{100 * (self.predicted / self.full_predicted - 1):+.1f}",
        ]


def mpi_calls(trace: Path) -> list[list[str]]:
    """Every rank's actions but ``compute``: what the rule must not change."""
    read = read_trace(trace)
    return [
        [line for line in path.read_text().splitlines() if line.split()[1:2] != ["compute"]]
        for path in read.rank_files
    ]


def predicted(run: AppRun, trace: Path, name: str) -> float:
    answer = run.simulate(trace, None, name)
    return float(answer["platforms"][0]["time"])


def trusted_run(run: AppRun, places: list[str], label: str) -> Outcome:
    """Build with ``places`` trusted, trace with the rule and without it, compare."""
    shutil.rmtree(run.root / "trust", ignore_errors=True)  # make would keep old objects
    directory = run.copy("trust")
    executable = directory / run.app.executable
    trust = " ".join(f"--threshold-trust {place}" for place in places)
    prefix = f"{PERFCAST} build --trace --threshold {run.profile} {trust} -- "
    shell("trusted build", run.app.build(prefix, "-O2 -g"), directory, 900, log=run.log("trust"))
    ranks, arguments = run.app.native
    traces = {}
    for mode in ("full", "rule"):
        target = run.root / "traces" / f"trust-{mode}"
        shutil.rmtree(target, ignore_errors=True)
        env = {
            "PERFCAST_TRACE_DIR": str(target),
            "PERFCAST_THRESHOLD": "0" if mode == "full" else "1",
        }
        passed = "-x PERFCAST_TRACE_DIR -x PERFCAST_THRESHOLD"
        command = f"{MPIRUN} -np {ranks} {passed} {executable} {arguments}"
        with contextlib.suppress(StageError):  # an aborted run leaves no trace.json: below
            shell(
                f"{mode} traced run",
                command,
                executable.parent,
                600,
                env=env,
                log=run.log("trust-run"),
            )
        traces[mode] = target
    if not (traces["rule"] / "trace.json").is_file():
        return Outcome(label, completed=False)
    stats = read_threshold_stats(traces["rule"])
    lines = {int(place.rsplit(":", 1)[1]) for place in places}
    mine = [loop for loop in stats if loop.line in lines]
    total = sum(loop.iterations_run + loop.iterations_skipped for loop in mine)
    return Outcome(
        label,
        completed=True,
        same_mpi=mpi_calls(traces["rule"]) == mpi_calls(traces["full"]),
        skipped=sum(loop.iterations_skipped for loop in mine) / total if total else 0.0,
        traced=max(read_trace(traces["rule"]).elapsed),
        full_traced=max(read_trace(traces["full"]).elapsed),
        predicted=predicted(run, traces["rule"], "trust-simulate"),
        full_predicted=predicted(run, traces["full"], "trust-simulate-full"),
    )


def candidates(run: AppRun, per_app: int) -> list[tuple[str, str, float]]:
    """(FILE:LINE, function, its share of time) of the loops trust could take, hottest
    function first."""
    profile = json.loads(run.profile.read_text())
    _, printed = run.built("threshold")
    said = verdicts(printed)
    times = function_times(run)
    total = sum(times.values())
    found = []
    for loop in profile_loops(profile):
        reason = said.get((Path(loop.file).name, loop.line))
        if reason is None or reason in NOT_OVERRIDDEN:
            continue
        share = times.get(function_key(loop.function), 0.0) / total
        found.append((f"{Path(loop.file).name}:{loop.line}", function_key(loop.function), share))
    found.sort(key=lambda item: -item[2])
    return found[:per_app]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--apps", nargs="+", choices=sorted(APPLICATIONS), default=None)
    parser.add_argument("--per-app", type=int, default=8, help="candidate loops per app")
    parser.add_argument("--output", type=Path, help="also write the report to this file")
    args = parser.parse_args()
    names = args.apps or [name for name in APPLICATIONS if name != "minife"]
    platform, clock, _ = machine_setup()
    header = ["loop (function, share of time)", "completed", "MPI calls", "skipped %",
              "traced run saved %", "prediction vs full %"]  # fmt: skip
    lines = [
        "$ python3 benchmarks/threshold_trust.py " + " ".join(sys.argv[1:]),
        "",
        "each candidate loop (refused only for a use of its results) trusted alone, then the "
        "ones that completed with unchanged MPI calls together; traced at the apps matrix's "
        "native point with the rule and without it (PERFCAST_THRESHOLD=0, the same binary); "
        "skipped = the trusted loops' iterations skipped; traced run saved = 1 - the rule's "
        "traced run / the full one; prediction = perfcast simulate on this machine, against the "
        "full trace's",
        "",
    ]
    for name in names:
        run = AppRun(APPLICATIONS[name], platform, clock)
        try:
            found = candidates(run, args.per_app)
            outcomes = [trusted_run(run, [place], f"{place} ({fn[:40]}, {100 * share:.0f} %)")
                        for place, fn, share in found]  # fmt: skip
            good = [place for (place, _, _), o in zip(found, outcomes, strict=True)
                    if o.completed and o.same_mpi]  # fmt: skip
            if len(good) > 1:
                outcomes.append(trusted_run(run, good, f"the {len(good)} above that kept the run"))
        except StageError as failure:
            lines += [f"## {name}: {failure.text}", ""]
            continue
        rows = [header, *(o.row() for o in outcomes)]
        widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
        lines.append(f"## {name} ({len(found)} candidate loops)")
        lines += [
            "  " + " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows
        ]
        lines.append("")
        print(f"  {name}: {len(outcomes)} builds", file=sys.stderr, flush=True)
    text = "\n".join(lines).rstrip() + "\n"
    print(text, end="")
    if args.output is not None:
        args.output.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
