"""Property-based: ``perfcast synth`` and ``perfcast simulate`` given hostile options end
with their work done or one line ``perfcast CMD: error: ...``, never a traceback, a hang,
NumPy's RuntimeWarning or a file written outside the output named (issue 27's fuzz suites
for the newer surfaces).

A case draws a few options, each with a value from a pool of edges: zero, negative, huge,
beyond 64 bits, non-finite, empty, not a number, non-ASCII, a path that is a file, a
directory, a dangling link or too long; for ``synth`` also expressions (exponents up to
100, coefficients up to 1e300) and communication operations; for ``simulate`` the traces
of a known ring program at 3, 4 and 6 ranks (``tests/test_simulate_synthesis.py``), with
``--synthesize`` or replayed on a small platform. ``python3 tests/test_fuzz_options.py N``
counts distinct crash sites over N cases of each command.
"""

from __future__ import annotations

import re
import shutil
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from perfcast.simulate.platform import PlatformSpec

try:
    from fuzz_helpers import case_settings, census, run_cli
    from test_simulate_synthesis import chain, write_trace
except ImportError:  # run as a script from the repository root
    sys.path.insert(0, str(Path(__file__).parent))
    from fuzz_helpers import case_settings, census, run_cli
    from test_simulate_synthesis import chain, write_trace

CASE_SECONDS = 60.0
NUMBERS = (
    *("0", "-1", "1", "2", "7", "1e3", "1048577", "2e9", str(2**64), "9" * 400, "1.5"),
    *("nan", "inf", "-inf", "", " ", "0x10", "\u00e9", "1e-300", "5e-324", "1e308"),
)
PATHS = ("FILE", "DIR", "DANGLING", "UNDER_FILE", "x" * 300, ".", "", "new")
TERMS = (
    *("n", "p", "n^2", "n^100", "p^(1/1000)", "log2(n)^50", "1e300*n", "5e-324*n", "n*p"),
    *("0*n", "n^n", "2^n", "(n", "n^-1", "3*p*n + n^(5/2)*log2(p)", "\u00e9", ""),
)
SYNTH_OPTIONS = (
    "--count", "--seed", "--kernels", "--computation", "--communication", "--name",
    "--parameters", "--reference", "--smallest", "--communication-share",
)  # fmt: skip


SYNTHESIS_OPTIONS = ("--noise", "--seed", "--steep", "--grid", "--json")
REPLAY_OPTIONS = ("--native", "--timeout", "--json")


OPERATIONS = ("allreduce", "bcast", "barrier", "alltoall", "reduce", "send", "", "allreduce:")


SANE = {
    "--count": "2", "--seed": "5", "--kernels": "3", "--communication-share": "0.5",
    "--native": "2.5", "--timeout": "60", "--reference": "8,1000", "--smallest": "2,100",
    "--parameters": "q,m",
}  # fmt: skip
"""A usual value per option, drawn half the time so that cases reach past the parser."""


def _value(draw: st.DrawFn, option: str) -> str:
    if option in SANE and draw(st.booleans()):
        return SANE[option]
    return draw(st.sampled_from(NUMBERS))


def _output(draw: st.DrawFn) -> str:
    """A new output half the time, so the other options are reached, else a hostile one."""
    return "new" if draw(st.booleans()) else draw(st.sampled_from(PATHS))


@st.composite
def synth_options(draw: st.DrawFn) -> list[str]:
    argv = ["synth", "-o", _output(draw)]
    chosen = draw(st.lists(st.sampled_from(SYNTH_OPTIONS), max_size=4, unique=True))
    for option in chosen:
        if option in ("--computation", "--communication"):
            for _ in range(draw(st.integers(1, 2))):
                value = draw(st.sampled_from(TERMS))
                if option == "--communication":
                    value = f"{draw(st.sampled_from(OPERATIONS))}:{value}"
                argv += [option, value]
        elif option in ("--parameters", "--reference", "--smallest") and draw(st.booleans()):
            argv.append(f"{option}={SANE[option]}")
        elif option in ("--parameters", "--reference", "--smallest"):
            pair = (draw(st.sampled_from(("p", "n", "x", "", "p-1", "\u00e9", *NUMBERS))),) * 2
            argv.append(f"{option}={draw(st.sampled_from([','.join(pair), pair[0]]))}")
        elif option == "--name":
            argv.append(f"--name={draw(st.sampled_from(('b', '', '../up', 'a b', 'x' * 300)))}")
        else:
            argv.append(f"{option}={_value(draw, option)}")
    if "--count" not in chosen and "--kernels" not in chosen:
        argv += ["--kernels", "2"]  # keep a case quick; the bounds are the pool's to test
    return argv


@st.composite
def simulate_options(draw: st.DrawFn) -> list[str]:
    if draw(st.booleans()):
        argv = [
            "simulate",
            "T3",
            "T4",
            "T6",
            "--synthesize",
            draw(st.sampled_from(("16", "16", "3", *NUMBERS))),
            "-o",
        ]
        argv.append(_output(draw))
        chosen = draw(st.lists(st.sampled_from(SYNTHESIS_OPTIONS), max_size=3, unique=True))
    else:
        argv = ["simulate", draw(st.sampled_from(("T4", "FILE", "DIR", "DANGLING", "")))]
        chosen = draw(st.lists(st.sampled_from(REPLAY_OPTIONS), max_size=3, unique=True))
        argv += ["--platform", draw(st.sampled_from(("PLATFORM", "PLATFORM", "FILE", "DIR", "")))]
    for option in chosen:
        if option == "--json":
            argv.append(option)
        elif option == "--noise":
            argv.append(f"--noise={draw(st.sampled_from(('mean', 'resample', 'correlated', '')))}")
        elif option == "--steep":
            argv.append(f"--steep={draw(st.sampled_from(('bound', 'keep', 'refuse', 'x')))}")
        elif option == "--grid":
            grids = ("4x4", "2x2x4", "0x4", "dims_create", "cube", "4x", "x", "1e9x1e9")
            argv.append(f"--grid={draw(st.sampled_from(grids + NUMBERS))}")
        else:
            argv.append(f"{option}={_value(draw, option)}")
    return argv


def _resolve(argv: list[str], directory: Path) -> list[str]:
    """The placeholders of a drawn command line made into real paths under ``directory``:
    traces, a platform, a file, a directory, a dangling link, a path under a file."""
    (directory / "file").write_text("not what the option wants\n")
    (directory / "dir").mkdir()
    (directory / "dangling").symlink_to(directory / "gone" / "x")
    (directory / "foreign.dat").write_bytes(b"the user's own data\x00\xff\n")
    places = {
        "FOREIGN": directory / "foreign.dat",
        "FILE": directory / "file",
        "DIR": directory / "dir",
        "DANGLING": directory / "dangling",
        "UNDER_FILE": directory / "file" / "out",
        "new": directory / "new",
        "PLATFORM": directory / "platform.xml",
    }
    for p in (3, 4, 6):
        places[f"T{p}"] = write_trace(directory / f"t{p}", p, chain)
    (directory / "platform.xml").write_text(PlatformSpec("small", nodes=8, cores=1).to_xml())
    return [str(places[a]) if a in places else a for a in argv]


def _snapshot(directory: Path) -> dict[Path, bytes]:
    """Every file under ``directory`` outside the outputs a command may write, by content."""
    return {
        path: path.read_bytes()
        for path in directory.rglob("*")
        if path.is_file()
        and not path.is_symlink()
        and "new" not in path.relative_to(directory).parts
    }


def run_case(argv: list[str], directory: Path) -> str:
    """``perfcast ARGV`` in-process: 'done' or 'refused' (one line, status 2); a traceback,
    a RuntimeWarning or a hang escapes to the caller, a changed input fails here."""
    if directory.exists():
        shutil.rmtree(directory)
    directory.mkdir(parents=True)
    argv = _resolve(argv, directory)
    before = _snapshot(directory)
    status, said = run_cli(argv, CASE_SECONDS, directory)
    changed = [p for p, data in before.items() if not p.is_file() or p.read_bytes() != data]
    assert not changed, f"{argv} changed {changed}"
    if status == 0:
        return "done"
    assert status == 2, f"{argv} exited {status}: {said}"
    # argparse names a verb too: "perfcast platform describe: error: "
    assert re.search(rf"perfcast {argv[0]}( [a-z]+)?: error: ", said), said
    return "refused"


WORKDIR = tempfile.TemporaryDirectory(prefix="perfcast-fuzz-options-")


@pytest.mark.slow
@case_settings(60)
@given(synth_options())
def test_hostile_synth_options_are_one_line_errors(argv: list[str]) -> None:
    run_case(argv, Path(WORKDIR.name) / "case")


@pytest.mark.slow
@case_settings(40)
@given(simulate_options())
def test_hostile_simulate_options_are_one_line_errors(argv: list[str]) -> None:
    run_case(argv, Path(WORKDIR.name) / "case")


@pytest.mark.long
@case_settings(1000)
@given(st.one_of(synth_options(), simulate_options()))
def test_hostile_options_long(argv: list[str]) -> None:
    run_case(argv, Path(WORKDIR.name) / "case")


if __name__ == "__main__":
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    for strategy in (synth_options(), simulate_options()):
        census(strategy, lambda argv: run_case(argv, Path(WORKDIR.name) / "case"), count)
