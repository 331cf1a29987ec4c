"""`perfcast model` and `perfcast predict` end to end, through the real entry point."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from perfcast.cli import main
from perfcast.experiment import read_experiment, write_experiment
from perfcast.experiment.experiment import Experiment
from perfcast.modeling import ModelSet, PMNFModeler

EXAMPLE = Path(__file__).parents[1] / "examples" / "data" / "relearn.txt"


def test_model_prints_and_saves_extrap_like_models(tmp_path, capsys):
    out = tmp_path / "models.json"
    assert main(["model", str(EXAMPLE), "--full", "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "Callpath: Initialization" in printed
    assert "Model: " in printed
    data = json.loads(out.read_text())
    assert data["parameters"] == ["p", "n"]
    assert len(data["models"]) == 14
    init = next(m for m in data["models"] if m["callpath"] == "Initialization")
    assert init["metric"] == "time"
    for term in init["terms"]:
        assert set(term) == {"coefficient", "factors"}
        for factor in term["factors"]:
            assert set(factor) == {"parameter", "exponent", "log_exponent"}
            assert factor["parameter"] in ("p", "n")
    assert set(init["statistics"]) >= {"rss", "smape", "adjusted_r2", "cv_error"}


def test_model_file_has_one_model_per_line_and_is_what_style_json_prints(tmp_path, capsys):
    out = tmp_path / "models.json"
    assert main(["model", str(EXAMPLE), "--style", "json", "-o", str(out)]) == 0
    text = out.read_text()
    assert capsys.readouterr().out == text
    saved = ModelSet.load(out)
    model_lines = [line for line in text.splitlines() if line.startswith('    {"callpath": ')]
    assert len(model_lines) == len(saved) == 14
    for line, model in zip(model_lines, saved, strict=True):
        assert json.loads(line.rstrip(",")) == model.to_json()
    assert json.loads(text) == saved.to_json()


@pytest.mark.parametrize("style", ["json", "python", "latex"])
def test_model_styles(style, capsys):
    assert main(["model", str(EXAMPLE), "--style", style, "--callpath", "Initialization"]) == 0
    printed = capsys.readouterr().out
    if style == "json":
        assert json.loads(printed)["models"][0]["callpath"] == "Initialization"
    elif style == "python":
        namespace: dict = {}
        exec(printed, namespace)
        value = namespace["MODELS"][("Initialization", "time")](p=64, n=5000)
        assert value > 0
    else:
        assert printed.startswith(r"\begin{tabular}")


def test_predict_evaluates_saved_models(tmp_path, capsys):
    out = tmp_path / "models.json"
    main(["model", str(EXAMPLE), "-o", str(out)])
    capsys.readouterr()
    assert (
        main(["predict", str(out), "p=64,4096", "n=5000,48000", "--callpath", "Initialization"])
        == 0
    )
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:2] == ["callpath", "metric"]
    assert "p=4096, n=48000" in lines[0]
    values = [float(v) for v in re.findall(r"(\S+) \[", lines[1])]  # "value [low, high]"
    assert len(values) == 2 and values[1] > values[0] > 0


def test_predict_names_unknown_parameters(tmp_path, capsys):
    out = tmp_path / "models.json"
    main(["model", str(EXAMPLE), "-o", str(out)])
    assert main(["predict", str(out), "q=3"]) == 2
    assert "not ['q']" in capsys.readouterr().err
    assert main(["predict", str(out), "p=3"]) == 2
    assert "missing ['n']" in capsys.readouterr().err


def test_malformed_input_is_a_message_not_a_traceback(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_text("PARAMETER p\n\nPOINTS ( 1 ) ( 2 ) ( 3 )\n\nREGION r\nMETRIC time\nDATA 1 2\n")
    result = subprocess.run(
        [sys.executable, "-m", "perfcast", "model", str(bad)], capture_output=True, text=True
    )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert str(bad) in result.stderr


def test_unknown_callpath_selection(capsys):
    assert main(["model", str(EXAMPLE), "--callpath", "nope"]) == 2
    assert "--callpath 'nope' matches no call path" in capsys.readouterr().err


def test_median_estimator_option_reaches_the_modeler(tmp_path):
    # every point: four repetitions at 2 and one outlier at 200
    data = "\n".join("DATA 2 2 2 2 200" for _ in range(5))
    source = tmp_path / "outlier.txt"
    source.write_text(f"PARAMETER x\nPOINTS 1 2 3 4 5\nREGION r\nMETRIC time\n{data}\n")
    constants = {}
    for estimator in ("sample", "harrell-davis", "huber"):
        out = tmp_path / f"{estimator}.json"
        assert main(["model", str(source), "--median-estimator", estimator, "-o", str(out)]) == 0
        (model,) = json.loads(out.read_text())["models"]
        assert model["terms"] == []
        constants[estimator] = model["constant"]
    assert constants["sample"] == pytest.approx(2.0)
    assert constants["huber"] == pytest.approx(2.0)  # the default: the spike gets no weight
    # Harrell-Davis gives the extremes small weights: the outlier moves it, within bounds
    assert 2.0 < constants["harrell-davis"] < 20.0


def test_cli_defaults_are_the_library_workflows(tmp_path):
    """perfcast model prints what a library user gets from the modeling workflow with the
    modeler's defaults (no counters here: no priors, but counts and regimes handled)."""
    from perfcast.effort import EffortModeler
    from perfcast.workflows.model import PriorInputs, choose_priors, fit_models

    out = tmp_path / "models.json"
    assert main(["model", str(EXAMPLE), "-o", str(out)]) == 0
    experiment = read_experiment(EXAMPLE)
    priors, _ = choose_priors(experiment, None, PriorInputs())
    expected = fit_models(experiment, EffortModeler(PMNFModeler()), priors).models
    assert [str(m) for m in ModelSet.load(out)] == [str(m) for m in expected]


def test_effort_counts_from_another_file_in_another_format(tmp_path, capsys):
    """--effort-counts: counters from a second file (any readable format), time from the
    first; the first file's own counters are dropped with a note, --metric applies after."""
    points = [(p, n) for p in (2, 4, 8, 16) for n in (100, 200, 300, 400)]
    light = [("main->kernel", "time", point, 1e-9 * point[1] ** 2) for point in points]
    light += [("main->kernel", "basic_blocks", point, 5.0) for point in points]  # stale
    counted = [("main->kernel", "basic_blocks", pt, pt[1] ** 2 + 3.0 * pt[1]) for pt in points]
    counted += [("main->kernel", "time", point, 3.4e-9 * point[1] ** 2) for point in points]
    write_experiment(Experiment.from_rows(("p", "n"), light), tmp_path / "light.txt")
    write_experiment(Experiment.from_rows(("p", "n"), counted), tmp_path / "counts.json")
    models = tmp_path / "models.json"
    argv = ["model", str(tmp_path / "light.txt"), "--priors", "effort", "-o", str(models)]
    argv += ["--effort-counts", str(tmp_path / "counts.json")]
    assert main([*argv, "--metric", "time", "--metric", "basic_blocks"]) == 0
    captured = capsys.readouterr()
    assert "light.txt: its own counters (basic_blocks) are dropped" in captured.err
    assert "effort (basic_blocks)  " in captured.out
    kernel = ModelSet.load(models)[("main->kernel", "time")]
    assert kernel.prior is not None and kernel.prior.startswith("effort")
    assert kernel.evaluate({"n": 400}) == pytest.approx(1e-9 * 400**2, rel=0.05)
