"""``perfcast taint import``: perf-taint's JSON results become a perfcast taint profile that
``perfcast model --taint`` uses.

The perf-taint files here are written by hand in the format its runtime and JSONConverter
write (function indices, per-function instances with call stacks, loop trees with label
sets, references to callee instances), describing this program::

    void init(int n)            { for (i < n) ...; }
    void kernel(int m)          { for (i < m) ...; }
    void solve(int n, int m)    { for (i < n) { kernel(m); }  MPI_Allreduce(...); }
    int main()                  { init(n); solve(n, m); }
"""

from __future__ import annotations

import json
import math
from itertools import product
from pathlib import Path
from typing import Any

import pytest

from perfcast import cli
from perfcast.experiment import write_experiment
from perfcast.experiment.experiment import Experiment
from perfcast.modeling.modelset import ModelSet
from perfcast.taint.perftaint import import_perftaint
from perfcast.taint.profile_model import read_profile, render

NAMES = ["main", "_Z4initi", "_Z6kerneli", "_Z5solveii", "MPI_Allreduce", "atoi"]
MAIN, INIT, KERNEL, SOLVE, ALLREDUCE = range(5)


def run_output() -> dict[str, Any]:
    """What a perf-taint run of the program writes for one rank."""
    return {
        "functions": {
            "main": {
                "file": "app.c",
                "func_idx": MAIN,
                "line": 20,
                "loops": [
                    {
                        "callstacks": [None],
                        "instance": {
                            "0": [{"entry_id": 0, "function_idx": INIT}],
                            "1": [{"entry_id": 0, "function_idx": SOLVE}],
                        },
                    }
                ],
            },
            "_Z4initi": {
                "file": "app.c",
                "func_idx": INIT,
                "line": 3,
                "loops": [
                    {"callstacks": [[MAIN]], "instance": {"0": {"level": 0, "params": [["n"]]}}}
                ],
            },
            "_Z6kerneli": {
                "file": "app.c",
                "func_idx": KERNEL,
                "line": 7,
                "loops": [
                    {
                        "callstacks": [[MAIN, SOLVE]],
                        "instance": {
                            "0": {"level": 0, "params": [["m"]], "branches": {"0": ["m"]}}
                        },
                    }
                ],
            },
            "_Z5solveii": {
                "file": "app.c",
                "func_idx": SOLVE,
                "line": 11,
                "loops": [
                    {
                        "callstacks": [[MAIN]],
                        "instance": {
                            "0": {
                                "level": 0,
                                "params": [["n"]],
                                "loops": {"0": [{"entry_id": 0, "function_idx": KERNEL}]},
                            },
                            "1": [{"entry_id": 0, "function_idx": ALLREDUCE}],
                        },
                    }
                ],
            },
            "MPI_Allreduce": {
                "func_idx": ALLREDUCE,
                "loops": [
                    {
                        "callstacks": [[MAIN, SOLVE]],
                        "instance": {"0": {"level": 0, "params": [["p"]]}},
                    }
                ],
            },
        },
        "functions_demangled_names": [  # spelled unlike c++filt: the import demangles again
            "main",
            "init (int)",
            "kernel (int)",
            "solve (int,int)",
            "MPI_Allreduce",
            "atoi",
        ],
        "functions_mangled_names": NAMES,
        "functions_names": ["main", "init", "kernel", "solve", "MPI_Allreduce", "atoi"],
        "parameters": ["n", "m", "p"],
        "unused_parameters": ["seed"],
        "unimportant_functions": {"atoi": {"func_idx": 5}},
    }


def converted() -> dict[str, Any]:
    """The same run after perf-taint's JSONConverter: composed ``deps`` per call stack."""
    data = run_output()
    deps = {
        "main": ([None], [["n"], ["m", "n"], ["p"]]),
        "_Z4initi": ([[MAIN]], [["n"]]),
        "_Z6kerneli": ([[MAIN, SOLVE]], [["m"]]),
        "_Z5solveii": ([[MAIN]], [["m", "n"], ["p"]]),
        "MPI_Allreduce": ([[MAIN, SOLVE]], [["p"]]),
    }
    for key, (stacks, terms) in deps.items():
        data["functions"][key]["loops"] = [
            {"callstack": stacks, "data": [], "deps": terms, "not_found_params": None}
        ]
    return data


def write(path: Path, data: Any) -> Path:
    path.write_text(json.dumps(data))
    return path


def callpath(profile_path: Path, name: str, path: str) -> tuple[str, str, str]:
    entry = read_profile(profile_path).functions[name].callpaths[path]
    return render(entry.terms), render(entry.exclusive_terms), render(entry.visits)


def test_run_output_becomes_a_profile_with_demangled_names_and_visits(tmp_path: Path) -> None:
    source = write(tmp_path / "app_0.json", run_output())
    out = tmp_path / "profile.json"
    assert cli.main(["taint", "import", str(source), "-o", str(out)]) == 0
    profile = read_profile(out)  # perfcast's own reader accepts it
    assert set(profile.functions) == {
        "main",
        "init(int)",
        "kernel(int)",
        "solve(int, int)",
        "MPI_Allreduce",
    }
    # one call of solve: n iterations of kernel (m each), then an Allreduce (p)
    assert callpath(out, "solve(int, int)", "main->solve(int, int)") == ("m*n + p", "n", "1")
    # kernel runs n times per call of solve: its total is n*m
    kernel = ("m", "m", "n")
    assert callpath(out, "kernel(int)", "main->solve(int, int)->kernel(int)") == kernel
    assert callpath(out, "MPI_Allreduce", "main->solve(int, int)->MPI_Allreduce")[0] == "p"
    assert profile.functions["MPI_Allreduce"].is_library
    assert profile.functions["main"].dependency == "m*n + p"
    assert profile.functions["init(int)"].file == "app.c"
    assert profile.parameters["p"].mpi == ("MPI_Allreduce",)
    assert profile.parameters["n"].loops == 2 and profile.parameters["m"].branches == 1
    assert profile.unused_parameters == ("seed",) and "seed" in profile.parameters
    assert profile.constant == ("atoi",)
    assert profile.relevant == ("main", "init(int)", "kernel(int)", "solve(int, int)")
    assert profile.run is not None
    assert profile.run.command == f"imported from perf-taint {source}"
    assert any(
        "kernel(int): perf-taint counted parameter-dependent branches" in w
        for w in profile.warnings
    )


def test_converter_output_bounds_visits_by_the_caller(tmp_path: Path) -> None:
    profile = import_perftaint(write(tmp_path / "converted.json", converted()))
    kernel = profile.functions["kernel(int)"].callpaths["main->solve(int, int)->kernel(int)"]
    assert render(kernel.terms) == "m"
    # where kernel is called is lost; solve's total (n*m + p) over kernel's m leaves n
    assert render(kernel.total()) == "m*n"
    assert any("visits are bounded through its caller's total" in w for w in profile.warnings)


def measurements() -> Experiment:
    """Times on a contended machine: init slows down with m, which its code never reads."""
    rows = []
    for n, m, repetition in product((10, 20, 40, 80, 160), (1, 2, 4, 8, 16), range(3)):
        jitter = 1 + 0.002 * ((repetition * 7 + n + m) % 5 - 2)
        values = {
            "main->init(int)": 1e-3 * n * (1 + 0.3 * math.log2(m)),
            "main->solve(int, int)->kernel(int)": 1e-4 * n * m,
        }
        for path, value in values.items():
            rows.append((path, "time", [n, m], value * jitter))
    return Experiment.from_rows(["n", "m"], rows)


def test_imported_profile_is_a_prior_of_perfcast_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = write(tmp_path / "app_0.json", run_output())
    profile = tmp_path / "profile.json"
    assert cli.main(["taint", "import", str(source), "-o", str(profile)]) == 0
    data = tmp_path / "times.json"
    write_experiment(measurements(), data)
    free, restricted = tmp_path / "free.json", tmp_path / "restricted.json"
    assert cli.main(["model", str(data), "-o", str(free)]) == 0
    assert cli.main(["model", str(data), "-o", str(restricted), "--taint", str(profile)]) == 0
    capsys.readouterr()
    black_box = ModelSet.load(free)["main->init(int)", "time"]
    assert "m" in black_box.parameters  # the contention the code cannot explain
    models = ModelSet.load(restricted)
    init = models["main->init(int)", "time"]
    assert init.parameters == ("n",) and init.prior is not None and "taint" in init.prior
    assert set(models["main->solve(int, int)->kernel(int)", "time"].parameters) == {"m", "n"}
    notes = models.notes(("main->init(int)", "time"))
    assert any("depends on m, which the code cannot" in note for note in notes)


def test_a_recursive_reference_is_constant_work_not_a_hang(tmp_path: Path) -> None:
    data = run_output()
    kernel = data["functions"]["_Z6kerneli"]["loops"][0]["instance"]
    kernel["1"] = [{"entry_id": 0, "function_idx": KERNEL}]
    profile = import_perftaint(write(tmp_path / "app_0.json", data))
    assert profile.functions["kernel(int)"].recursive
    assert profile.functions["kernel(int)"].dependency == "m"


def broken(change: str) -> Any:
    """The run's output with one defect (``change`` names it)."""
    data = run_output()
    functions = data["functions"]
    solve = functions["_Z5solveii"]["loops"][0]
    if change == "func_idx text":
        functions["_Z4initi"]["func_idx"] = "1"
    elif change == "func_idx of another":
        functions["_Z4initi"]["func_idx"] = KERNEL
    elif change == "no names":
        del data["functions_mangled_names"]
    elif change == "no loops":
        del functions["_Z4initi"]["loops"]
    elif change == "neither form":
        del solve["instance"]
    elif change == "params text":
        solve["instance"]["0"]["params"] = "n"
    elif change == "stack out of range":
        solve["callstacks"] = [[MAIN, 99]]
    elif change == "dangling reference":
        solve["instance"]["1"][0]["entry_id"] = 5
    elif change == "names a list":
        data["functions"] = [1, 2]
    return data


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ("func_idx text", 'functions["_Z4initi"].func_idx must be a function index'),
        ("func_idx of another", "func_idx must be the index of '_Z4initi'"),
        ("no names", "the file has no 'functions_mangled_names'"),
        ("no loops", "functions[\"_Z4initi\"] has no 'loops'"),
        ("neither form", "loops[0] has neither 'instance'"),
        ("params text", 'instance["0"].params must be a list of label sets'),
        ("stack out of range", "callstacks[0][1] must be an index into functions_mangled_names"),
        ("dangling reference", "refers to instance 5 of function 4 ('MPI_Allreduce')"),
        ("names a list", "functions must be a JSON object"),
    ],
)
def test_malformed_input_is_one_line_naming_file_and_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], change: str, message: str
) -> None:
    source = write(tmp_path / "bad.json", broken(change))
    status = cli.main(["taint", "import", str(source), "-o", str(tmp_path / "out.json")])
    err = capsys.readouterr().err
    assert status == 2
    assert err.count("\n") == 1 and "Traceback" not in err
    assert f"{source}: " in err and message in err
    assert not (tmp_path / "out.json").exists()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "not JSON"),
        (None, "is not a regular file (a directory)"),
        ("[1, 2]", "the file must be a JSON object"),
    ],
)
def test_not_a_perftaint_file_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str | None, message: str
) -> None:
    source = tmp_path / "input"
    if content is None:
        source.mkdir()
    else:
        source.write_text(content)
    status = cli.main(["taint", "import", str(source), "-o", str(tmp_path / "out.json")])
    err = capsys.readouterr().err
    assert status == 2 and err.count("\n") == 1 and message in err and str(source) in err


def test_import_refuses_run_options_and_overwriting_its_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = write(tmp_path / "app_0.json", run_output())
    assert cli.main(["taint", "import", str(source)]) == 2
    assert "usage: perfcast taint import" in capsys.readouterr().err
    out = str(tmp_path / "p.json")
    assert cli.main(["taint", "--param", "n=argv:1", "import", str(source), "-o", out]) == 2
    assert "--param belongs to a taint run" in capsys.readouterr().err
    assert cli.main(["taint", "import", str(source), "-o", str(source)]) == 2
    assert "is an input of this command" in capsys.readouterr().err
    assert json.loads(source.read_text()) == run_output()


def test_a_chain_of_calls_deeper_than_the_stack_is_an_input_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    depth = 3000  # each function calls the next: composing recurses once per level
    names = [f"f{index}" for index in range(depth)]
    functions = {
        name: {
            "func_idx": index,
            "file": "deep.c",
            "loops": [
                {
                    "callstacks": [None],  # the chain of references is what recurses
                    "instance": {"0": [{"entry_id": 0, "function_idx": index + 1}]}
                    if index + 1 < depth
                    else {"0": {"level": 0, "params": [["n"]]}},
                }
            ],
        }
        for index, name in enumerate(names)
    }
    data = {"functions": functions, "functions_mangled_names": names, "parameters": ["n"]}
    source = write(tmp_path / "deep.json", data)
    status = cli.main(["taint", "import", str(source), "-o", str(tmp_path / "out.json")])
    err = capsys.readouterr().err
    assert status == 2 and err.count("\n") == 1
    assert "loops or calls nested too deeply" in err and str(source) in err


def test_sixteen_loops_of_sixteen_parameters_ten_calls_deep_import_at_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each function calls the next inside each of its 16 loops, each loop bounded by
    another of 16 parameters: the deepest call path runs a sum of thousands of products.
    Such a 15 KB file did not import within a minute (issue 27); the dependency is now
    bounded (``profile_model.MAX_TERMS``) by the one product of its parameters."""
    depth, loops = 10, 16
    parameters = [f"p{k}" for k in range(loops)]
    names = ["main", *(f"f{level}" for level in range(1, depth + 1))]
    functions = {}
    for level, name in enumerate(names):
        tree: dict[str, Any] = {}
        for k in range(loops):
            loop: dict[str, Any] = {"params": [[parameters[(k + level) % loops]]]}
            if level < depth:
                loop["loops"] = {"0": [{"function_idx": level + 1, "entry_id": 0}]}
            tree[str(k)] = loop
        stack = None if level == 0 else list(range(level))
        functions[name] = {
            "func_idx": level,
            "file": "deep.c",
            "line": level + 1,
            "loops": [{"callstacks": [stack], "instance": tree}],
        }
    data = {"functions": functions, "functions_mangled_names": names, "parameters": parameters}
    profile = import_perftaint(write(tmp_path / "deep.json", data))
    deepest = profile.functions[names[-1]].callpaths["->".join(names)]
    # every parameter of a loop around one of its calls stays in how often it runs
    assert set(parameters) <= set(render(deepest.visits).replace(" + ", "*").split("*"))


def test_a_caller_without_an_instance_of_its_own_leaves_its_callees_unbounded(
    tmp_path: Path,
) -> None:
    """JSONConverter's output whose kernel is called from main->solve, and solve listed
    nowhere (a caller without loops, or a damaged file): kernel's visits have no known
    bound, instead of a KeyError on solve's call path (issue 27's perf-taint fuzz suite)."""
    data = converted()
    del data["functions"]["_Z5solveii"]
    profile = import_perftaint(write(tmp_path / "converted.json", data))
    assert set(profile.functions) == {"main", "init(int)", "kernel(int)", "MPI_Allreduce"}
