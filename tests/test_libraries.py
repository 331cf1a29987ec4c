"""Where perfcast leans on a library and where it keeps its own code (issue 14, item 9):
psutil stops runs, argparse parses ``perfcast static``'s sub-commands, one helper lays out
every adaptive text table, and the progress line stays plain off a terminal."""

import io
import os
import signal
import subprocess
import time

import psutil
import pytest

from perfcast import cli
from perfcast.columns import aligned
from perfcast.measure import runner
from perfcast.measure.local import RUN_TOKEN_VARIABLE, kill_session, processes_with_token
from perfcast.measure.runner import Progress

# -- aligned columns ---------------------------------------------------------------------------


def test_columns_are_as_wide_as_their_widest_cell_and_lines_have_no_trailing_spaces():
    lines = aligned([("p", "size", "note"), ("2", "16", ""), ("128", "1024", "x")], right={0, 1})
    assert lines == ["  p  size  note", "  2    16", "128  1024  x"]


def test_cells_are_text_not_markup_and_never_cut():
    """What rich.table does out of the box in a pipe: brackets read as markup, long cells
    cut to 80 columns. Call paths hold both."""
    callpath = "main->solve[tag]->" + "x" * 120
    (line,) = aligned([(callpath, "time")], indent="  ")
    assert line == f"  {callpath}  time"


def test_rows_of_different_lengths_are_refused():
    assert aligned([]) == []
    with pytest.raises(ValueError, match="every row needs 2 cells"):
        aligned([("a", "b"), ("c",)])


# -- progress line -----------------------------------------------------------------------------


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_off_a_terminal_prints_plain_lines_at_most_every_interval():
    log = io.StringIO()
    progress = Progress(3, stream=log)
    for _ in range(3):
        progress.update(done=1)  # within PROGRESS_INTERVAL: only the first one prints
    progress.finish()
    lines = log.getvalue().splitlines()
    assert "\r" not in log.getvalue() and "\x1b" not in log.getvalue()
    assert lines[0].startswith("measure: 1/3 runs, ETA ")
    assert lines[-1].startswith("measure: 3/3 runs, took ")
    assert len(lines) == 2


def test_progress_off_a_terminal_prints_again_after_the_interval(monkeypatch):
    monkeypatch.setattr(runner, "PROGRESS_INTERVAL", 0.0)
    log = io.StringIO()
    progress = Progress(2, stream=log)
    progress.update(done=1, failed=1)
    progress.update(retried=1)
    progress.finish()
    lines = log.getvalue().splitlines()
    assert lines[0].startswith("measure: 1/2 runs, 1 failed, ETA ")
    assert lines[1].startswith("measure: 1/2 runs, 1 failed, 1 retried, ETA ")
    assert len(lines) == 2  # finish() does not repeat the line printed last


def test_progress_on_a_terminal_redraws_one_line_and_ends_it():
    terminal = _Terminal()
    progress = Progress(2, stream=terminal)
    progress.update(done=1)
    progress.update(done=1)
    progress.finish()
    text = terminal.getvalue()
    assert text.count("\r\x1b[K") == 3 and text.count("\n") == 1 and text.endswith("\n")


# -- stopping runs with psutil -----------------------------------------------------------------


def _sleeper(token: str) -> subprocess.Popen:
    """A process in a session of its own with ``token`` in its environment, as mpirun is."""
    environment = dict(os.environ, **{RUN_TOKEN_VARIABLE: token})
    process = subprocess.Popen(["sleep", "60"], env=environment, start_new_session=True)
    # Until exec, the forked child still has this process's environment, without the token.
    deadline = time.monotonic() + 10
    while psutil.Process(process.pid).environ().get(RUN_TOKEN_VARIABLE) != token:
        assert time.monotonic() < deadline, "the sleeper never ran with its token"
        time.sleep(0.01)
    return process


def test_a_run_is_found_by_its_token_and_stopped_by_its_session():
    token = f"test-{os.getpid()}-{time.monotonic_ns()}"
    process = _sleeper(token)
    try:
        assert processes_with_token(token) == [process.pid]
        started = psutil.Process(process.pid).create_time()
        # a session leader that started later owns a recycled session id: left alone
        assert kill_session(process.pid, signal.SIGKILL, since=started + 60) == 0
        assert process.poll() is None
        assert kill_session(process.pid, signal.SIGKILL, since=started) == 1
        assert process.wait(10) == -signal.SIGKILL
        assert processes_with_token(token) == []
    finally:
        process.kill()
        process.wait()


def test_a_zombie_is_not_a_live_process_of_its_session():
    token = f"zombie-{os.getpid()}-{time.monotonic_ns()}"
    process = _sleeper(token)
    try:
        os.kill(process.pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while psutil.Process(process.pid).status() != psutil.STATUS_ZOMBIE:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert processes_with_token(token) == []
        assert kill_session(process.pid, signal.SIGKILL) == 0
    finally:
        process.wait()


# -- perfcast static sub-commands --------------------------------------------------------------

MODEL = """
FUNCTIONS = {"tri": None}
PARAMETERS = {"tri": ["n"]}


def evaluate(function, **parameters):
    n = parameters["n"]
    return {
        "function": function,
        "parameters": parameters,
        "counts": {"int_arith": 1000 * n, "fp_arith": n, "data_movement_load": 2 * n},
        "fp_instructions": n,
        "instructions": 1003 * n,
    }
"""


def test_static_help_lists_its_sub_commands(capsys):
    with pytest.raises(SystemExit) as exited:
        cli.main(["static", "--help"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    assert "\n  build  model SOURCE and its binary" in out
    assert "\n  eval   evaluate one function of a model" in out
    with pytest.raises(SystemExit):
        cli.main(["static", "eval", "--help"])
    assert "usage: perfcast static eval [-h] --function FUNCTION" in capsys.readouterr().out


def test_static_eval_takes_values_after_the_options_and_prints_aligned_counts(tmp_path, capsys):
    model = tmp_path / "model.py"
    model.write_text(MODEL)
    assert cli.main(["static", "eval", str(model), "--function", "tri", "n=3"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "tri(n=3)"
    assert lines[1:] == [
        "  int_arith                    3,000",
        "  fp_arith                         3",
        "  data_movement_load               6",
        "  floating-point instructions      3",
        "  instructions                 3,009",
        "  fp / data movement           0.500",
    ]


def test_static_eval_without_function_is_a_usage_error(tmp_path, capsys):
    model = tmp_path / "model.py"
    model.write_text(MODEL)
    with pytest.raises(SystemExit) as exited:
        cli.main(["static", "eval", str(model), "n=3"])
    assert exited.value.code == 2
    assert "the following arguments are required: --function" in capsys.readouterr().err


@pytest.mark.parametrize("words", [["app.c"], ["build", "app.c"]])
def test_static_build_is_the_default_sub_command(words, tmp_path, monkeypatch, capsys):
    (tmp_path / "app.c").write_text("int main(void) { return 0; }\n")
    monkeypatch.chdir(tmp_path)
    assert cli.main(["static", *words, "--function", "main"]) == 2
    err = capsys.readouterr().err
    assert "missing --binary BINARY" in err and "-o MODEL.py" in err


def test_static_refuses_a_second_source(capsys):
    with pytest.raises(SystemExit) as exited:
        cli.main(["static", "a.c", "b.c", "--binary", "a", "-o", "m.py"])
    assert exited.value.code == 2
    assert "unrecognized arguments: b.c" in capsys.readouterr().err
