"""Run the instrumented program, in as many label batches as there are parameters.

DataFlowSanitizer gives us 8 labels. The first run tracks the parameters we know of
(command-line bindings) and lets the runtime hand the remaining labels to parameters it
meets (``perfcast_register``, ``p`` from ``MPI_Comm_size``); whatever found no label is run
again in further batches. Labels of different parameters propagate independently, so the
union of the batches is the profile of one run with unlimited labels.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from perfcast.errors import InputError, PerfcastError
from perfcast.taint.params import ArgvParameter, runtime_spec, sources_of
from perfcast.taint.records import RunRecords, read_run

LABELS = 8
"""Taint labels per run: DataFlowSanitizer's fast 8-bit labels."""


@dataclass
class BatchRunner:
    """Runs ``command`` (a shell-style string) in ``cwd``; records go below ``out_dir``.

    Args:
        labels: labels per run; lower it only to exercise batching.
        timeout: seconds one run may take.
    """

    command: str
    cwd: Path
    out_dir: Path
    argv_parameters: Sequence[ArgvParameter] = ()
    labels: int = LABELS
    timeout: float | None = None

    def run(self) -> tuple[RunRecords, list[list[str]]]:
        """Run all batches; returns the merged records and the parameters of each batch."""
        pending = list(sources_of(self.argv_parameters))
        done: set[str] = set()
        merged = RunRecords()
        batches: list[list[str]] = []
        first = True
        while first or pending:
            batch, pending = pending[: self.labels], pending[self.labels :]
            records = self._run_once(len(batches), batch, discover=first)
            batches.append(list(records.tracked))
            done |= set(records.tracked)
            merged.merge(records, counts=first)
            pending += sorted(records.untracked - done - set(pending))
            first = False
        if merged.missing:
            bindings = sources_of(self.argv_parameters)
            missing = ", ".join(f"{n} ({bindings.get(n, '?')})" for n in sorted(merged.missing))
            raise InputError(
                f"parameter binding not found in the program's command line: {missing}; "
                f"check the positions/flags against the run command {self.command!r}"
            )
        return merged, batches

    def _run_once(self, number: int, names: list[str], *, discover: bool) -> RunRecords:
        directory = self.out_dir / f"batch{number}"
        directory.mkdir(parents=True, exist_ok=True)
        for old in directory.glob("taint.*.txt"):
            old.unlink()
        env = dict(os.environ)
        env.update(
            PERFCAST_TAINT_OUT=str(directory),
            PERFCAST_TAINT_PARAMS=",".join(names),
            PERFCAST_TAINT_DISCOVER="1" if discover else "0",
            PERFCAST_TAINT_ARGV=runtime_spec(list(self.argv_parameters)),
        )
        try:
            argv = shlex.split(self.command)
        except ValueError as exc:
            raise InputError(f"cannot split the run command {self.command!r}: {exc}") from None
        try:
            result = subprocess.run(
                argv, cwd=self.cwd, env=env, capture_output=True, text=True, timeout=self.timeout
            )
        except FileNotFoundError:
            raise InputError(f"run command not found: {argv[0]!r}") from None
        except subprocess.TimeoutExpired:
            raise PerfcastError(
                f"the taint run did not finish within {self.timeout} s; choose smaller "
                "parameter values for the taint run (the analysis needs one representative run, "
                "not a large one)"
            ) from None
        if result.returncode != 0:
            raise PerfcastError(
                f"the taint run `{self.command}` failed with status {result.returncode}:\n"
                + (result.stderr.strip() or result.stdout.strip())[-3000:]
            )
        return read_run(directory)
