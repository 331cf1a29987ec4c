"""``taint_program``: rewrite, build, run in batches, and build the profile -- one call."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from perfcast.errors import PerfcastError
from perfcast.taint.build import RuntimeBuilder
from perfcast.taint.compile_command import CompileCommand, default_root
from perfcast.taint.instrument import Instrumenter
from perfcast.taint.libdb import MPI_DATABASE, LibraryDatabase
from perfcast.taint.params import ArgvParameter, check_bindings, sources_of
from perfcast.taint.profile import ProfileBuilder
from perfcast.taint.profile_model import TaintProfile, TaintRun
from perfcast.taint.runner import LABELS, BatchRunner
from perfcast.taint.toolchain import find_toolchain


@dataclass
class TaintOptions:
    """Knobs of one taint analysis.

    Attributes:
        root: project directory whose files are instrumented (default: the directory
            holding all sources).
        work_dir: where rewritten sources, the sitemap and raw records go (default: a
            temporary directory, removed afterwards).
        labels: taint labels per run (8; smaller values force batching).
        timeout: seconds a single run may take.
        control_flow: whether stores under parameter-dependent conditions inherit the
            conditions' labels (False: data flow only, to compare with tools that have no
            control-flow taint and to see what control flow adds).
        library_database: the MPI library database (default: ``mpi.json`` beside
            :mod:`perfcast.taint.libdb`; README.md says why its point-to-point routines do
            not depend on ``p`` and how to write another).
    """

    root: Path | None = None
    work_dir: Path | None = None
    labels: int = LABELS
    timeout: float | None = None
    control_flow: bool = True
    library_database: Path | None = None


def taint_program(
    compile_command: Sequence[str],
    run_command: str,
    parameters: Sequence[ArgvParameter] = (),
    *,
    cwd: Path | None = None,
    options: TaintOptions | None = None,
    database: LibraryDatabase | None = None,
) -> TaintProfile:
    """Taint-analyse one program and return its profile.

    ``compile_command`` builds the program as the user would (``["mpicc", "app.c", "-o",
    "app"]``); it is rewritten to build the instrumented program under the same name, which
    ``run_command`` (``"mpirun -np 2 ./app 10 20"``) then runs, once per label batch.
    """
    options = options or TaintOptions()
    cwd = (cwd or Path.cwd()).resolve()
    if database is None:
        database = LibraryDatabase.load(options.library_database or MPI_DATABASE)
    toolchain = find_toolchain()
    command = CompileCommand.parse(compile_command, cwd)
    check_bindings(parameters, run_command, command.output)
    root = (options.root or default_root(command.sources)).resolve()
    temporary = options.work_dir is None
    work = Path(tempfile.mkdtemp(prefix="perfcast-taint-")) if temporary else options.work_dir
    assert work is not None
    work.mkdir(parents=True, exist_ok=True)
    try:
        instrumenter = Instrumenter(
            root, command.parse_flags, database.routines, toolchain.builtin_includes
        )
        rewritten = instrumenter.run(command.sources, work / "src", command.cplusplus)
        rewritten.sitemap.save(work / "sitemap.json")
        runtime = RuntimeBuilder(toolchain, database).parts(
            mpi=command.mpi or bool(rewritten.library_calls),
            cplusplus=command.cplusplus,
            libraries=command.shared_libraries(),
        )
        argv, env = command.instrumented(
            toolchain,
            rewritten.rewritten,
            root,
            rewritten.shadow_root,
            runtime,
            control_flow=options.control_flow,
        )
        result = subprocess.run(
            argv, cwd=cwd, capture_output=True, text=True, env={**os.environ, **env}
        )
        if result.returncode != 0:
            raise PerfcastError(
                "building the instrumented program failed (the rewritten sources are kept in "
                f"{work / 'src'} when --work-dir is given):\n{result.stderr.strip()[-3000:]}"
            )
        runner = BatchRunner(
            run_command,
            cwd,
            work / "records",
            parameters,
            labels=options.labels,
            timeout=options.timeout,
        )
        records, batches = runner.run()
        sources = sources_of(parameters)
        if "MPI_Comm_size" in rewritten.library_calls:
            sources.setdefault(database.implicit_process_parameter, "MPI_Comm_size")
        profile = ProfileBuilder(rewritten.sitemap, records, database).build(batches, sources)
        database_file = options.library_database
        run = TaintRun(
            run_command,
            control_flow=options.control_flow,
            library_database=None if database_file is None else str(database_file),
        )
        outside = [
            f"{source} is outside the project directory {root} (--root): it was built as it "
            "is, without instrumentation, so its functions are not in the profile; give a "
            "--root that holds it to analyse it"
            for source in rewritten.outside
        ]
        return replace(profile, run=run, warnings=(*profile.warnings, *outside))
    finally:
        if temporary:
            shutil.rmtree(work, ignore_errors=True)
