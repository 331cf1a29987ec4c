"""Hostile configuration files: only a one-line PerfcastError naming the file may escape.

Valid ``perfcast.toml`` files, taint profiles and model files are mutated (a value replaced
by a hostile one, a key dropped, renamed or added, a table nested deeply, bytes that are not
UTF-8) and fed to the commands that read them: ``perfcast design`` and the argument vectors
``perfcast measure`` would run, ``perfcast design --taint``, ``perfcast build --filter``,
``perfcast model --taint`` and ``perfcast predict``. Every case runs under a time limit, so
a hang fails like a traceback does. The CI profile runs a few thousand cases in well under a
minute; ``-m long`` runs ten times as many.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import math
import re
import tomllib
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from campaign_helpers import STENCIL_WITH_COUNTERS
from fuzz_helpers import crash_site, time_limit
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from perfcast.appspec import load_spec
from perfcast.cli import main
from perfcast.cli.init import STARTER
from perfcast.errors import PerfcastError
from perfcast.experiment.experiment import Experiment
from perfcast.measure.build import read_filter
from perfcast.measure.campaign import make_jobs
from perfcast.measure.design import plan_from_spec
from perfcast.modeling import PMNFModeler
from perfcast.taint.profile_model import FORMAT as PROFILE_FORMAT
from perfcast.taint.profile_model import read_profile
from perfcast.taint.source import TaintSource

CASE_SECONDS = 5.0
"""A case slower than this counts as a hang: valid inputs here take milliseconds."""

CI_CASES = 1000
"""Cases per file kind in CI (three kinds, about 10 s each on one core)."""

LONG_CASES = 10 * CI_CASES

RANGE_SPEC = """\
[app]
name = "ranges"
store = "ranges.sqlite"
[run]
command = "./app --size {size} -n {n} --it={iterations}"
repetitions = 2
timeout = 30
retries = 1
expected_seconds = 0.5
mpirun_args = ["--bind-to", "core"]
[parameters]
p = [1, 2, 4]
size = { start = 64, stop = 256, factor = 2 }
n = { start = 10, stop = 50, step = 10 }
iterations = 20
[design]
kind = "lines"
base = { size = 128 }
extra_points = 2
[metrics]
collect = ["time", "visits"]
[slurm]
mode = "array"
partition = "batch"
max_parallel = 4
"""

SPEC_SEEDS = (
    STARTER,
    STENCIL_WITH_COUNTERS.format(repetitions=2),
    RANGE_SPEC,
)

TAINT_SPEC = """\
[run]
command = "./app {size} {iterations}"
[parameters]
p = [1, 2, 4]
size = [16, 32, 64]
iterations = [10, 20]
"""


def _callpath_entry(terms: list[list[str]], visits: list[list[str]]) -> dict[str, Any]:
    return {
        "params": sorted({n for t in terms for n in t}),
        "dependency": " + ".join("*".join(t) for t in terms) or "1",
        "terms": terms,
        "exclusive_dependency": "1",
        "exclusive_terms": [],
        "loops": [{"line": 7, "kind": "for", "params": ["size"], "executed": True,
                   "constant_bounds": False, "loops": []}],
        "mpi": {},
        "visits": " + ".join("*".join(t) for t in visits) or "1",
        "visits_terms": visits,
    }  # fmt: skip


PROFILE_SEED: dict[str, Any] = {
    "format": PROFILE_FORMAT,
    "parameters": {
        name: {"source": "argv:1", "loops": 1, "functions": 1, "branches": 1, "mpi": []}
        for name in ("p", "size", "iterations")
    },
    "functions": {
        "main": {
            "file": "app.c",
            "line": 3,
            "params": ["iterations", "size"],
            "dependency": "iterations*size",
            "terms": [["iterations", "size"]],
            "exclusive_dependency": "iterations",
            "exclusive_terms": [["iterations"]],
            "loops": [],
            "branches": [
                {"line": 9, "params": ["size"], "in_loop": True, "exits_loops_at": [],
                 "evaluated": 40, "taken": 20, "calls": ["kernel"]}
            ],
            "mpi": {"MPI_Allreduce": {"params": ["p"], "calls": 20}},
            "recursive": False,
            "callpaths": {"main": _callpath_entry([["iterations", "size"]], [])},
        },
        "kernel": {
            "file": "app.c",
            "line": 20,
            "params": ["size"],
            "dependency": "size",
            "terms": [["size"]],
            "exclusive_dependency": "size",
            "exclusive_terms": [["size"]],
            "loops": [],
            "branches": [],
            "mpi": {},
            "recursive": False,
            "callpaths": {"main->kernel": _callpath_entry([["size"]], [["iterations"]])},
        },
        "MPI_Allreduce": {
            "file": None,
            "line": None,
            "library": "mpi",
            "params": ["p"],
            "dependency": "p",
            "terms": [["p"]],
            "loops": [],
            "branches": [],
            "mpi": {},
            "recursive": False,
            "callpaths": {"main->MPI_Allreduce": {"params": ["p"], "dependency": "p",
                                                  "terms": [["p"]], "visits": "iterations",
                                                  "visits_terms": [["iterations"]]}},
        },
    },
    "pruned": ["helper"],
    "constant": [],
    "not_executed": ["fallback"],
    "relevant": ["kernel", "main"],
    "unused_parameters": [],
    "batches": [["p", "size", "iterations"]],
    "processes": 2,
    "warnings": [],
}  # fmt: skip

HOSTILE_NUMBERS: tuple[Any, ...] = (
    math.nan, math.inf, -math.inf, 0, -1, 0.5, 1e308, 10**18, 10**400, 1_000_000_000, 2**63,
)  # fmt: skip
HOSTILE_STRINGS = (
    "",
    "x",
    "\x00",
    "\n",
    "size\n",
    "./app {size:d}",
    "./app {size\n}",
    "./app {size:\n}",
    "./app {size!x}",
    "./app {size!r}",
    "./app {size:>1000000000}",
    "./app {size:{p}}",
    "./app {size[0]}",
    "./app {size.real}",
    "./app '{size}",
    './app "{size}',
    "./app {}",
    "./app {0}",
    "./app {",
    "./app }",
    "./app {p} $(touch pwned) `id` ; rm -rf x",
    "1/0",
    "-1,0,1",
    "nan",
    "perfcast-taint-profile/1",
    "a->b->c",
)
HOSTILE_VALUES: tuple[Any, ...] = (
    *HOSTILE_NUMBERS,
    *HOSTILE_STRINGS,
    True,
    False,
    [],
    {},
    [1, 2, 3],
    [1, 1],
    ["x"],
    [[1]],
    {"start": 1, "stop": 10**12, "step": 1},
    {"start": 1, "stop": 1e300, "factor": 1.0000001},
    {"start": math.nan, "stop": 10, "factor": 2},
    {"start": 1, "stop": 10, "factor": math.nan},
    {"start": 1, "stop": 10, "step": math.inf},
    {"start": 10**400, "stop": 10**401, "factor": 2},
    {"x": {"y": {"z": 1}}},
)
JSON_ONLY_VALUES: tuple[Any, ...] = (None, [[[[[[[[[[[["deep"]]]]]]]]]]]])
HOSTILE_KEYS = (
    "",
    "x",
    "size\n",
    "functions",
    "parameters",
    "terms",
    "p",
    "size",
    "\x00",
    "a b",
    "0",
)


# -- running one case ------------------------------------------------------------------------


class Crash(AssertionError):
    """Anything but a PerfcastError naming the file escaped (or the case hung)."""

    def __init__(self, site: str, detail: str):
        super().__init__(f"{site}: {detail}")
        self.site = site


def run_cli(argv: list[str], named: Path | str) -> str:
    """``perfcast ARGV`` in-process; a failure must be one line that names ``named`` (the
    file at fault, or the option)."""
    out, err = io.StringIO(), io.StringIO()
    try:
        with (
            time_limit(CASE_SECONDS),
            contextlib.redirect_stdout(out),
            contextlib.redirect_stderr(err),
        ):
            status = main(argv)
    except Exception as exc:
        raise Crash(crash_site(exc), "".join(traceback.format_exception(exc))) from exc
    message = err.getvalue().strip()
    if status == 2:
        assert "\n" not in message, f"error over several lines: {message!r}"
        assert str(named) in message, f"error does not name {named}: {message!r}"
    else:
        assert status == 0, (status, message)
    return message


def expect_perfcast_error(call: Callable[[], Any], named: Path | None = None) -> Any:
    """``call()``; only a PerfcastError (naming ``named``, if given) may escape."""
    try:
        with time_limit(CASE_SECONDS):
            return call()
    except PerfcastError as exc:
        if named is not None:
            assert str(named) in str(exc), f"error does not name {named}: {exc}"
        return None
    except Exception as exc:
        raise Crash(crash_site(exc), "".join(traceback.format_exception(exc))) from exc


# -- mutating documents ----------------------------------------------------------------------


ACTIONS = ("replace", "replace", "delete", "add", "rename", "wrap")
"""Edits of a document; replacing a value is the one that finds most."""


def _paths(tree: Any, prefix: tuple = ()) -> Iterator[tuple]:
    """Every position in a document: keys of tables, indices of lists."""
    if isinstance(tree, dict):
        for key, value in tree.items():
            yield (*prefix, key)
            yield from _paths(value, (*prefix, key))
    elif isinstance(tree, list):
        for index, value in enumerate(tree):
            yield (*prefix, index)
            yield from _paths(value, (*prefix, index))


def _parent(tree: Any, path: tuple) -> Any:
    for step in path[:-1]:
        tree = tree[step]
    return tree


@st.composite
def mutated(
    draw: st.DrawFn, seed: Any, values: tuple[Any, ...], focus: dict[tuple, tuple] | None = None
) -> Any:
    """``seed`` (a parsed document) with one to three hostile edits, half of them at one of
    the ``focus`` positions (where most of the checking happens) if the document has it,
    with a value from the hostile values for that position."""
    focus = focus or {}
    tree = copy.deepcopy(seed)
    for _ in range(draw(st.integers(1, 3))):
        paths = list(_paths(tree))
        if not paths:
            break
        focused = [path for path in focus if path in paths]
        if bool(focused) and draw(st.booleans()):
            path = draw(st.sampled_from(focused))
            action = "replace"
            value = copy.deepcopy(draw(st.sampled_from(focus[path])))
        else:
            path = draw(st.sampled_from(paths))
            action = draw(st.sampled_from(ACTIONS))
            value = copy.deepcopy(draw(st.sampled_from(values)))
        parent, last = _parent(tree, path), path[-1]
        if action == "replace":
            parent[last] = value
        elif action == "delete":
            del parent[last]
        elif action == "add" and isinstance(parent, dict):
            parent[draw(st.sampled_from(HOSTILE_KEYS))] = value
        elif action == "add":
            parent.append(value)
        elif action == "rename" and isinstance(parent, dict):
            parent[draw(st.sampled_from(HOSTILE_KEYS))] = parent.pop(last)
        elif action == "wrap":
            parent[last] = [parent[last]] if draw(st.booleans()) else {"x": parent[last]}
    return tree


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return "nan" if math.isnan(value) else repr(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return "{ " + ", ".join(f"{toml_key(k)} = {toml_value(v)}" for k, v in value.items()) + " }"


def toml_key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else json.dumps(key)


def toml_document(data: dict[str, Any]) -> str:
    """TOML text of a parsed document: tables as ``[name]``, anything deeper inline."""
    lines = [f"{toml_key(k)} = {toml_value(v)}" for k, v in data.items() if not isinstance(v, dict)]
    for name, table in data.items():
        if isinstance(table, dict):
            lines.append(f"[{toml_key(name)}]")
            lines += [f"{toml_key(k)} = {toml_value(v)}" for k, v in table.items()]
    return "\n".join(lines) + "\n"


_VALUES = tuple(v for v in HOSTILE_VALUES if not isinstance(v, str))
SPEC_FOCUS: dict[tuple, tuple] = {
    ("run", "command"): HOSTILE_STRINGS,
    ("run", "repetitions"): HOSTILE_NUMBERS,
    ("run", "timeout"): HOSTILE_NUMBERS,
    ("run", "retries"): HOSTILE_NUMBERS,
    ("parameters", "p"): _VALUES,
    ("parameters", "size"): _VALUES,
    ("parameters", "size", "start"): HOSTILE_NUMBERS,
    ("parameters", "size", "stop"): HOSTILE_NUMBERS,
    ("parameters", "size", "step"): HOSTILE_NUMBERS,
    ("parameters", "size", "factor"): HOSTILE_NUMBERS,
    ("parameters", "n", "step"): HOSTILE_NUMBERS,
    ("design", "kind"): ("full", "lines", "cross", "sparse", "x"),
    ("design", "base"): ({"size": 10**400}, {"size": math.nan}, {"x": 1}, [1]),
}


HUGE_INTEGER = "9" * 5000
"""More digits than Python converts to an int (4300): the parsers themselves refuse it."""


@st.composite
def spec_texts(draw: st.DrawFn) -> str:
    seed = tomllib.loads(draw(st.sampled_from(SPEC_SEEDS)))
    text = toml_document(draw(mutated(seed, HOSTILE_VALUES, SPEC_FOCUS)))
    if draw(st.integers(0, 30)) == 0:
        text = re.sub(r"= \d+", "= " + HUGE_INTEGER, text, count=1)
    return text


@st.composite
def json_bytes(draw: st.DrawFn, seed: Any) -> bytes:
    """A mutated JSON document; now and then cut short, nested 10^5 deep or not UTF-8."""
    text = json.dumps(draw(mutated(seed, HOSTILE_VALUES + JSON_ONLY_VALUES)), indent=1)
    damage = draw(st.sampled_from(("none",) * 12 + ("cut", "deep", "latin1", "bom", "huge")))
    if damage == "huge":
        text = re.sub(r": \d+", ": " + HUGE_INTEGER, text, count=1)
    elif damage == "cut":
        text = text[: draw(st.integers(0, len(text)))]
    elif damage == "deep":
        text = text.replace('"format"', '"deep": ' + "[" * 100_000 + "]" * 100_000 + ',"format"')
    elif damage == "latin1":
        return text.replace('"', '"\xe9', 1).encode("latin-1")
    elif damage == "bom":
        return b"\xff\xfe" + text.encode("utf-16-le")
    return text.encode("utf-8")


# -- the cases -------------------------------------------------------------------------------


def spec_case(directory: Path, text: str) -> None:
    """``perfcast design`` on a mutated spec; accepted ones must give measure's argv too."""
    path = directory / "perfcast.toml"
    path.write_text(text, encoding="utf-8")
    run_cli(["design", str(path), "--no-taint"], path)

    def jobs() -> None:
        spec = load_spec(path)
        make_jobs(spec, plan_from_spec(spec, campaign_profile=False), directory, set())

    expect_perfcast_error(jobs, path)


_EXPERIMENT = Experiment.from_rows(
    ["p", "size", "iterations"],
    [
        (callpath, "time", (p, size, it), p * size * it * 1e-6 + 1.0)
        for callpath in ("main", "main->kernel", "main->MPI_Allreduce", "main->other")
        for p in (1, 2, 4)
        for size in (16, 32, 64)
        for it in (10, 20)
    ],
)


def profile_case(directory: Path, data: bytes) -> None:
    """A mutated taint profile through design, build --filter and model --taint."""
    spec = directory / "perfcast.toml"
    spec.write_text(TAINT_SPEC, encoding="utf-8")
    profile = directory / "profile.json"
    profile.write_bytes(data)
    run_cli(["design", str(spec), "--taint", str(profile)], profile)
    expect_perfcast_error(lambda: read_filter(profile), profile)
    expect_perfcast_error(
        lambda: TaintSource(read_profile(profile), path=profile).derive(_EXPERIMENT), profile
    )


def _model_seed() -> dict[str, Any]:
    """A model file as ``perfcast model -o`` writes it, fitted to exact data."""
    rows = [
        (callpath, "time", (p, size), scale * p * math.log2(p) + size**1.5 + 3.0)
        for callpath, scale in (("main", 2.0), ("main->solve", 0.5))
        for p in (2, 4, 8, 16, 32)
        for size in (10.0, 20.0, 40.0, 80.0, 160.0)
    ]
    return PMNFModeler().fit(Experiment.from_rows(["p", "size"], rows)).to_json()


MODEL_SEED = _model_seed()


def models_case(directory: Path, data: bytes, point: list[str]) -> None:
    path = directory / "models.json"
    path.write_bytes(data)
    run_cli(["predict", str(path), *point], path)


POINTS = st.sampled_from((["p=4", "size=128"], ["p=4,8", "size=10,20"], ["p=1", "size=1"]))
"""Valid points: the model file is what is fuzzed (bad points: tests/test_fuzz_config's
``test_predict_points``)."""

FUZZ = settings(
    max_examples=CI_CASES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


@pytest.mark.slow
@FUZZ
@given(text=spec_texts())
def test_hostile_specs_give_one_line_errors(scratch, text):
    spec_case(scratch, text)


@pytest.mark.slow
@FUZZ
@given(data=json_bytes(PROFILE_SEED))
def test_hostile_taint_profiles_give_one_line_errors(scratch, data):
    profile_case(scratch, data)


@pytest.mark.slow
@FUZZ
@given(data=json_bytes(MODEL_SEED), point=POINTS)
def test_hostile_model_files_give_one_line_errors(scratch, data, point):
    models_case(scratch, data, point)


@pytest.mark.long
@settings(FUZZ, max_examples=LONG_CASES, derandomize=False)
@given(text=spec_texts())
def test_hostile_specs_long(scratch, text):
    spec_case(scratch, text)


@pytest.mark.long
@settings(FUZZ, max_examples=LONG_CASES, derandomize=False)
@given(data=json_bytes(PROFILE_SEED))
def test_hostile_taint_profiles_long(scratch, data):
    profile_case(scratch, data)


@pytest.mark.long
@settings(FUZZ, max_examples=LONG_CASES, derandomize=False)
@given(data=json_bytes(MODEL_SEED), point=POINTS)
def test_hostile_model_files_long(scratch, data, point):
    models_case(scratch, data, point)


def test_seeds_are_accepted(scratch):
    """The unmutated seeds pass, so the fuzz cases start from inputs that work."""
    for text in SPEC_SEEDS:
        spec_case(scratch, text)
    profile_case(scratch, json.dumps(PROFILE_SEED).encode())
    path = scratch / "models.json"
    path.write_text(json.dumps(MODEL_SEED))
    assert "main->solve" in run_cli_output(["predict", str(path), "p=4", "size=128"])
    printed = run_cli_output(["predict", str(path), "p=4", "size=128"])
    value = re.split(r"\s{2,}", printed.strip().splitlines()[-1])[-1].split()[0]  # "v [lo, hi]"
    assert np.isfinite(float(value))


def run_cli_output(argv: list[str]) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(argv) == 0
    return out.getvalue()


# -- regressions: each case crashed, hung or was silently accepted before ----------------------


def design_error(directory: Path, text: str) -> str:
    """``perfcast design`` on ``text``: the one-line error (status 2), naming the file."""
    path = directory / "perfcast.toml"
    path.write_text(text, encoding="utf-8")
    with time_limit(CASE_SECONDS):
        message = run_cli(["design", str(path), "--no-taint"], path)
    assert message.startswith("perfcast design: error: "), message
    return message


def spec_with(parameters: str = "size = [1, 2]", run: str = 'command = "./app {size}"') -> str:
    return f"[run]\n{run}\n[parameters]\np = [1, 2]\n{parameters}\n"


@pytest.mark.parametrize(
    ("parameters", "words"),
    [
        ("size = { start = nan, stop = 10, factor = 2 }", "size.start: must be a finite number"),
        ("size = { start = 1, stop = 10, factor = nan }", "size.factor: must be a finite number"),
        ("size = { start = 1, stop = inf, step = 1 }", "size.stop: must be a finite number"),
        ("size = { start = 1, stop = 10, step = inf }", "size.step: must be a finite number"),
        ("size = [1, 99999999999999999999]", "is too large: numbers in the spec are at most 2^53"),
        ("size = [1, " + "9" * 5000 + "]", "not a usable number: Exceeds the limit"),
    ],
)
def test_nan_inf_and_huge_numbers_are_refused(tmp_path, parameters, words):
    message = design_error(tmp_path, spec_with(parameters))
    assert f"{tmp_path / 'perfcast.toml'}:5: " in message and words in message, message


@pytest.mark.parametrize(
    ("command", "words"),
    [
        ("./app {size:d}", "{size:d}: write {size} without a format or conversion"),
        ("./app {size!x}", "{size!x}: write {size}"),
        ("./app {size!r}", "{size!r}: write {size}"),
        ("./app {size:>1000000000}", "{size:>1000000000}: write {size}"),
        ("./app '{size}", 'cannot split "./app \'{size}" into words (No closing quotation)'),
        ('./app \\"{size}', "(No closing quotation)"),
        (" ", "the run command is empty; give the program to run"),
        ("./app {size}\\u0000", "contains a NUL character"),
    ],
)
def test_run_templates_are_checked_when_the_spec_is_read(tmp_path, command, words):
    """``design`` refuses what would crash or hang ``measure`` (it expanded them per run)."""
    message = design_error(tmp_path, spec_with(run=f'command = "{command}"'))
    assert f"{tmp_path / 'perfcast.toml'}:2: run.command: " in message and words in message


def test_quoted_templates_give_measure_its_words(tmp_path):
    path = tmp_path / "perfcast.toml"
    path.write_text(spec_with(run="command = \"./app --label '{size} cells' {{literal}}\""))
    spec = load_spec(path)
    jobs = make_jobs(spec, plan_from_spec(spec, campaign_profile=False), tmp_path, set())
    assert {job.argv for job in jobs} == {
        ("./app", "--label", "1 cells", "{literal}"),
        ("./app", "--label", "2 cells", "{literal}"),
    }


@pytest.mark.parametrize(
    "parameters",
    [
        '"size\\n" = [1, 2]',
        '"size;rm" = [1, 2]',
        '"$(touch pwned)" = [1, 2]',
        '"size p" = [1, 2]',
        "value = [1, 2]",
        'size = ["1; rm -rf /", "2"]',
        'size = "$(touch pwned)"',
    ],
)
def test_injection_through_parameter_names_and_values_is_refused(tmp_path, parameters):
    """Names reach commands, tables and file names, values the command line: only
    identifiers and numbers pass (a trailing newline slipped past ``^...$`` before)."""
    message = design_error(tmp_path, spec_with(parameters))
    assert "parameters." in message
    assert not (tmp_path / "pwned").exists()


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        (spec_with(run='command = "./app {size}"\nrepetitions = 1000000000'), 3,
         "run.repetitions: 1000000000 is more than the limit of 1000"),
        (spec_with(run='command = "./app {size}"\nretries = 1000000'), 3,
         "run.retries: 1000000 is more than the limit of 100"),
        (spec_with("size = { start = 1, stop = 10000, step = 1 }\nn = { start = 1, stop = 10000, "
                   'step = 1 }', run='command = "./app {size} {n}"'), 3,
         "parameters: the full design has 200000000 points (2 p x 10000 size x 10000 n), more "
         "than the limit of 100000"),
        (spec_with("size = { start = 1, stop = 1000, step = 1 }\nn = { start = 1, stop = 50, "
                   'step = 1 }', run='command = "./app {size} {n}"'), None,
         "run.repetitions: the full plan has 300000 runs (100000 points x 3 repetitions), more "
         "than the limit of 100000"),
    ],
)  # fmt: skip
def test_plans_are_bounded_before_they_are_listed(tmp_path, text, line, words):
    """A typo'd repetition count or range used to grow ``design`` by 200 MB/s."""
    message = design_error(tmp_path, text)
    where = f"{tmp_path / 'perfcast.toml'}:{line}: " if line else str(tmp_path / "perfcast.toml")
    assert where in message and words in message, message


def test_a_large_grid_measured_in_lines_is_planned(tmp_path, capsys):
    """The grid limit holds for designs that list the grid, not for lines through it."""
    path = tmp_path / "perfcast.toml"
    path.write_text(
        spec_with(
            "size = { start = 1, stop = 1000, step = 1 }\nn = { start = 1, stop = 1000, step = 1 }",
            run='command = "./app {size} {n}"',
        )
        + '[design]\nkind = "lines"\n'
    )
    with time_limit(CASE_SECONDS):
        assert main(["design", str(path), "--no-taint"]) == 0
    assert "2000 points, 6000 runs" in capsys.readouterr().out


def write_profile(directory: Path, change: Callable[[dict[str, Any]], None]) -> Path:
    profile = copy.deepcopy(PROFILE_SEED)
    change(profile)
    path = directory / "profile.json"
    path.write_text(json.dumps(profile))
    return path


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (lambda p: p.pop("functions"), "the profile has no 'functions'"),
        (lambda p: p["functions"]["main"].pop("terms"), 'functions["main"] has no \'terms\''),
        (lambda p: p["functions"]["main"].update(terms="size"),
         'functions["main"].terms must be a list of parameter products'),
        (lambda p: p["functions"]["kernel"]["callpaths"]["main->kernel"].update(terms=[[1]]),
         'functions["kernel"].callpaths["main->kernel"].terms must be a list of parameter'),
        (lambda p: p["functions"]["main"]["branches"][0].update(line="nine"),
         'functions["main"].branches[0].line must be a line number'),
        (lambda p: p.update(relevant="main"), "relevant must be a list of names"),
        (lambda p: p.update(parameters=["p"]), "parameters must be a JSON object"),
    ],
)  # fmt: skip
def test_taint_profiles_with_wrong_shapes_are_refused(tmp_path, change, words):
    profile = write_profile(tmp_path, change)
    spec = tmp_path / "perfcast.toml"
    spec.write_text(TAINT_SPEC)
    message = run_cli(["design", str(spec), "--taint", str(profile)], profile)
    assert words in message and "write the profile again with perfcast taint" in message
    with pytest.raises(PerfcastError, match=re.escape(words)):
        read_filter(profile)


@pytest.mark.parametrize(
    ("content", "words"),
    [
        ('{"format": "perfcast-taint-profile/1", "x": "\xe9"}'.encode("latin-1"),
         "not a taint profile: not UTF-8 text (byte 0xe9)"),
        (b'{"format": "perfcast-taint-profile/1", "x": ' + b"[" * 100_000 + b"]" * 100_000
         + b"}", "nested too deeply"),
        (b'{"format": "perfcast-taint-profile/1", "x": ' + b"9" * 5000 + b"}",
         "Exceeds the limit (4300 digits)"),
    ],
)  # fmt: skip
def test_taint_profiles_that_are_not_json_text_are_refused(tmp_path, content, words):
    profile = tmp_path / "profile.json"
    profile.write_bytes(content)
    spec = tmp_path / "perfcast.toml"
    spec.write_text(TAINT_SPEC)
    assert words in run_cli(["design", str(spec), "--taint", str(profile)], profile)


def write_models(directory: Path, change: Callable[[dict[str, Any]], None]) -> Path:
    models = copy.deepcopy(MODEL_SEED)
    change(models)
    path = directory / "models.json"
    path.write_text(json.dumps(models))
    return path


def first_factor(models: dict[str, Any]) -> dict[str, Any]:
    return next(m for m in models["models"] if m["terms"])["terms"][0]["factors"][0]


def first_term(models: dict[str, Any]) -> dict[str, Any]:
    return next(m for m in models["models"] if m["terms"])["terms"][0]


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (lambda m: m.pop("parameters"), "the model file has no 'parameters'"),
        (lambda m: m.update(parameters=["p", "p"]), "parameters must be a list of distinct"),
        (lambda m: m.update(parameters=["p", "size", "\n"]), "names, each one line"),
        (lambda m: first_factor(m).update(parameter="q"),
         ".factors[0].parameter must be one of the file's parameters ['p', 'size']"),
        (lambda m: first_term(m).update(coefficient="2.5"), ".coefficient must be a number"),
        (lambda m: first_term(m).update(coefficient=math.nan), ".coefficient must be a finite"),
        (lambda m: first_factor(m).update(exponent="1/0"), ".exponent must be a fraction"),
        (lambda m: first_factor(m).update(exponent="inf"), ".exponent must be a fraction"),
        (lambda m: first_factor(m).update(exponent=1e300), ".exponent must be at most 64"),
        (lambda m: first_factor(m).update(log_exponent=-1), ".log_exponent must be a whole"),
        (lambda m: m["models"][0].update(constant=None), "models[0].constant must be a number"),
        (lambda m: m["models"][0].update(callpath=["main"]), "models[0].callpath must be a str"),
        (lambda m: m.update(models={}), "models must be a list"),
    ],
)  # fmt: skip
def test_model_files_with_wrong_content_are_refused(tmp_path, change, words):
    path = write_models(tmp_path, change)
    message = run_cli(["predict", str(path), "p=4", "size=128"], path)
    assert words in message, message


def test_model_files_that_are_not_utf8_are_refused(tmp_path):
    path = tmp_path / "models.json"
    path.write_bytes(json.dumps(MODEL_SEED).replace('"p"', '"\xe9"', 1).encode("latin-1"))
    assert "not UTF-8 text" in run_cli(["predict", str(path), "p=4", "size=128"], path)


@pytest.fixture(scope="module")
def measurements(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A one-parameter Extra-P text file whose time falls as 1/p (strong scaling)."""
    path = tmp_path_factory.mktemp("cli") / "strong.txt"
    ps = (2, 4, 8, 16, 32, 64)
    path.write_text(
        "PARAMETER p\nPOINTS " + " ".join(f"( {p} )" for p in ps) + "\nREGION solve\n"
        "METRIC time\n" + "".join(f"DATA {1000 / p + 2} {1000 / p + 2}\n" for p in ps)
    )
    return path


@pytest.mark.parametrize("spelling", [["--exponents", "-1,0,1"], ["--exponents=-1,0,1"]])
def test_negative_exponents_work_in_both_spellings(measurements, spelling):
    out = run_cli_output(["model", str(measurements), *spelling, "--style", "json"])
    factors = json.loads(out)["models"][0]["terms"][0]["factors"]
    assert factors == [{"parameter": "p", "exponent": "-1", "log_exponent": 0}]


@pytest.mark.parametrize(
    ("arguments", "words"),
    [
        (["--terms", "50"], "--terms 50: 12565671261 combinations of the 59 shapes per "
         "parameter, more than the limit of 50000"),
        (["--terms", "0"], "--terms must be at least 1, not 0"),
        (["--candidates", "0"], "--candidates must be at least 1, not 0"),
        (["--exponents", "1e400"], "a 401-digit number is beyond the largest usable exponent"),
        (["--exponents", "0,1,17"], "17 is beyond the largest usable exponent 16"),
        (["--log-exponents", "99999999999"], "99999999999 is beyond the largest usable"),
        (["--log-exponents", "x"], "--log-exponents: cannot parse exponent list 'x'"),
        (["--exponents", "1/0"], "--exponents: cannot parse exponent list '1/0'"),
        (["--significance", "nan"], "--significance must be from 0 to below 1, not nan"),
    ],
)  # fmt: skip
def test_search_options_are_checked_before_fitting(measurements, arguments, words):
    """``--terms 50`` hung (10^10 combinations); the others crashed or fitted garbage."""
    message = run_cli(["model", str(measurements), *arguments], arguments[0])
    assert message.startswith("perfcast model: error: ") and words in message, message


@pytest.mark.parametrize(
    ("arguments", "words"),
    [
        (["measure", "--parallel", "0"], "argument --parallel: must be 1 or more, not 0"),
        (["taint", "--timeout", "nan", "-o", "x.json", "--run", "./a", "--", "cc", "a.c"],
         "argument --timeout: must be a finite number of seconds > 0, not nan"),
    ],
)  # fmt: skip
def test_numeric_options_are_refused_by_the_parser(capsys, arguments, words):
    """``--parallel 0`` started no run and waited forever; a nan timeout passed every check."""
    with pytest.raises(SystemExit) as exit_:
        main(arguments)
    assert exit_.value.code == 2 and words in capsys.readouterr().err
