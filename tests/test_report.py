"""`perfcast report`: one self-contained HTML page, loaded in a real browser.

The browser tests open the page in Debian's headless Chromium and read the DOM after the
page's script ran (``--dump-dom``); every console message and uncaught exception appears on
Chromium's stderr as an ``INFO:CONSOLE`` line, so "no console errors" is checked there. The
page is driven by its URL fragment (``#view=tree&search=solve``), as a user's link would.
"""

from __future__ import annotations

import fnmatch
import json
import shutil
import subprocess
import textwrap
import tomllib
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import quote

import numpy as np
import pytest
from campaign_helpers import build_program, write_spec
from test_simulate_cli import WORK, write_platform, write_trace
from test_taint_modeling import PROGRAM, measurements

from perfcast.cli import main
from perfcast.experiment import read_experiment, write_experiment
from perfcast.modeling import PMNFModeler
from perfcast.modeling.intervals import prediction_interval
from perfcast.report.html import script_safe_json
from perfcast.report.page import ReportInputs, report_data
from perfcast.simulate.platform import PlatformSpec
from perfcast.taint import ArgvParameter, taint_program

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = shutil.which("chromium")
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="needs Debian's chromium (apt-get install chromium)"
)

CRAFTED = "<img src=x onerror=alert(1)>"
CLOSING = "</script><script>alert(1)</script>"
SIZES = (64, 128, 256, 512, 1024)
RANKS = (2, 4, 8, 16)


def _truth(point: tuple[int, int], halo: float = 0.5, new: bool = False) -> dict[str, float]:
    """Exclusive time per call path of a program with known costs: a kernel in size^2, an
    allreduce in log2(p), a halo exchange in size * p^(1/2), and the two crafted names as
    cheap leaves. ``halo`` and ``new`` are the code change of the comparison: the halo
    exchange's exponent of p, and a new phase."""
    p, size = point
    costs = {
        "main": 0.01,
        "main->solve": 0.002,
        "main->solve->kernel": 2e-6 * size**2,
        "main->solve->MPI_Allreduce": 0.003 * np.log2(p),
        "main->solve->halo": 1e-5 * size * p**halo,
        f"main->{CRAFTED}": 0.001,
        f"main->{CLOSING}": 0.001 * size / 64,
    }
    if new:
        costs["main->solve->pack"] = 1e-6 * size
    return costs


def write_text_measurements(
    path: Path, repetitions: int = 3, seed: int = 1, halo: float = 0.5, new: bool = False
) -> Path:
    """An Extra-P text file of the program above, with 2 % multiplicative noise."""
    rng = np.random.default_rng(seed)
    points = [(p, s) for p in RANKS for s in SIZES]
    lines = ["PARAMETER p size", *(f"POINTS ( {p} {s} )" for p, s in points), "METRIC time"]
    for callpath in _truth(points[0], halo, new):
        lines.append(f"REGION {callpath}")
        for point in points:
            value = _truth(point, halo, new)[callpath]
            noisy = value * (1 + 0.02 * rng.standard_normal(repetitions))
            lines.append("DATA " + " ".join(f"{v:.6g}" for v in noisy))
    path.write_text("\n".join(lines) + "\n")
    return path


class Dom(HTMLParser):
    """The elements and text of a dumped DOM."""

    def __init__(self, text: str):
        super().__init__()
        self.elements: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    def tags(self, tag: str, **attributes: str) -> list[dict[str, str | None]]:
        return [
            attrs
            for name, attrs in self.elements
            if name == tag and all(attrs.get(k) == v for k, v in attributes.items())
        ]


def load(page: Path, fragment: str = "") -> tuple[Dom, list[str]]:
    """The DOM of ``page`` after its script ran, and Chromium's console lines."""
    assert CHROMIUM is not None
    done = subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--enable-logging=stderr",
            "--v=0",
            "--virtual-time-budget=5000",
            "--dump-dom",
            page.as_uri() + (f"#{fragment}" if fragment else ""),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    console = [line for line in done.stderr.splitlines() if ":CONSOLE" in line]
    return Dom(done.stdout), console


def page_data(page: Path) -> dict:
    """The JSON document a written report draws from."""
    text = page.read_text()
    start = text.index('id="perfcast-data">') + len('id="perfcast-data">')
    return json.loads(text[start : text.index("</script>", start)])


def write_before_and_after(tmp_path: Path) -> tuple[Path, Path]:
    """Two campaigns of the program, before and after a code change: B is measured with
    other noise, its halo exchange grows as size * p instead of size * p^(1/2), and it has
    a new phase, pack."""
    before = write_text_measurements(tmp_path / "before.txt", seed=1)
    after = write_text_measurements(tmp_path / "after.txt", seed=2, halo=1.0, new=True)
    return before, after


# -- the data and the page, without a browser ------------------------------------------------


def test_inline_json_cannot_end_its_script_element() -> None:
    data = {"name": CLOSING + "<!-- & \u2028"}
    text = script_safe_json(data)
    assert not any(char in text for char in "<>&\u2028")
    assert json.loads(text) == data


def test_report_data_ranks_by_the_models_at_the_target_with_their_intervals(tmp_path) -> None:
    experiment = read_experiment(write_text_measurements(tmp_path / "app.txt"))
    models = PMNFModeler().fit(experiment)
    data = report_data(ReportInputs(models, "app.txt", experiment), target={"p": 64})
    assert data["largest"] == {"p": 16.0, "size": 1024.0}
    assert data["target"] == {"p": 64.0, "size": 4096.0}  # size defaulted to 4x
    paths = [node["path"] for node in data["nodes"]]
    by_path = {paths[r["node"]]: r for r in data["models"]}
    kernel = by_path["main->solve->kernel"]
    costliest = max(data["models"], key=lambda r: r["at_target"])
    assert costliest is kernel
    model = models[("main->solve->kernel", "time")]
    expected = model.evaluate(data["target"])
    assert kernel["at_target"] == pytest.approx(float(expected), rel=1e-3)
    # the inclusive value of solve at the target covers its three callees
    solve = by_path["main->solve"]
    callees = sum(
        by_path[f"main->solve->{name}"]["exclusive_target"]
        for name in ("kernel", "MPI_Allreduce", "halo")
    )
    assert solve["inclusive_target"] == pytest.approx(solve["exclusive_target"] + callees, rel=1e-3)
    # every repetition is kept: 4 x 5 points x 3 repetitions, as [point, value] pairs
    assert len(kernel["observed"]) == 2 * 60
    # the band along size is the interval module's, around the model
    grid = data["axes"]["size"]["grid"]
    lower, upper = kernel["bands"]["size"]
    want_lower, want_upper = prediction_interval(model, {"p": 16.0, "size": np.array(grid)})
    assert lower == pytest.approx(want_lower, rel=1e-3)
    assert upper == pytest.approx(want_upper, rel=1e-3)
    assert all(lo < hi for lo, hi in zip(lower, upper, strict=True))
    assert grid[-1] == 4096.0 and data["axes"]["size"]["log"]


def test_report_assets_are_package_data() -> None:
    """The page's script and style must travel in the wheel (perfcast demo writes a report
    from an installed wheel): pyproject's package-data must name them."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["package-data"]
    assets = REPO / "src" / "perfcast" / "report" / "assets"
    for asset in assets.iterdir():
        name = f"assets/{asset.name}"
        wanted = [*patterns.get("perfcast.report", []), *patterns.get("*", [])]
        assert any(fnmatch.fnmatch(name, pattern) for pattern in wanted), name


def test_cli_refuses_to_write_over_a_file_that_is_no_report(tmp_path, capsys) -> None:
    measurements = write_text_measurements(tmp_path / "app.txt")
    notes = tmp_path / "notes.html"
    notes.write_text("<p>my notes</p>")
    assert main(["report", str(measurements), "-o", str(notes)]) == 2
    error = capsys.readouterr().err
    assert "notes.html" in error and "is not a perfcast report" in error
    assert len(error.strip().splitlines()) == 1
    assert notes.read_text() == "<p>my notes</p>"


def test_cli_reports_a_model_file_alone_and_replaces_its_own_report(tmp_path, capsys) -> None:
    measurements = write_text_measurements(tmp_path / "app.txt")
    models = tmp_path / "models.json"
    assert main(["model", str(measurements), "-o", str(models)]) == 0
    page = tmp_path / "report.html"
    for _ in range(2):  # the second run replaces the first report
        assert main(["report", str(models), "-o", str(page), "--at", "p=64"]) == 0
    out = capsys.readouterr().out
    assert f"wrote {page}" in out and "7 call paths" in out
    text = page.read_text()
    assert "http://" not in text.replace("http://www.w3.org/2000/svg", "")
    assert "https://" not in text
    assert "default-src 'none'" in text  # the browser refuses any fetch the page might try


def test_cli_refuses_models_of_other_parameters(tmp_path, capsys) -> None:
    measurements = write_text_measurements(tmp_path / "app.txt")
    other = tmp_path / "other.txt"
    other.write_text("PARAMETER n\nPOINTS 1 2 3 4 5\nREGION main\nMETRIC time\n")
    other.write_text(other.read_text() + "".join(f"DATA {v}\n" for v in (1, 2, 3, 4, 5)))
    models = tmp_path / "models.json"
    assert main(["model", str(other), "-o", str(models)]) == 0
    capsys.readouterr()
    code = main(
        ["report", str(measurements), "--models", str(models), "-o", str(tmp_path / "r.html")]
    )
    assert code == 2
    error = capsys.readouterr().err
    assert "models.json" in error and "models over n" in error


# -- in the browser ------------------------------------------------------------------------


@pytest.mark.slow
@needs_chromium
def test_page_in_chromium_tree_search_plot_and_crafted_names_as_text(tmp_path, capsys) -> None:
    measurements = write_text_measurements(tmp_path / "app.txt")
    page = tmp_path / "report.html"
    assert main(["report", str(measurements), "-o", str(page)]) == 0
    capsys.readouterr()

    summary, console = load(page)
    assert console == []
    assert summary.tags("body", **{"data-ready": "true"})
    ranked = summary.tags("table", **{"data-ranking": "cost"})
    assert ranked
    # the hot spot is chosen at once: its plots are drawn, one per parameter, with a band
    assert len(summary.tags("svg", **{"data-parameter": "size"})) == 1
    assert summary.tags("path", **{"class": "model"})
    assert summary.tags("path", **{"class": "band"})
    assert summary.tags("circle", **{"class": "repetition"})

    collapsed, console = load(page, "view=tree")
    assert console == []
    rows = [a for a in collapsed.tags("tr") if "data-node" in a]
    assert len(rows) == 1 + 3  # main and its three callees: the tree opens at its roots

    halo = quote("main->solve->halo", safe="")
    expanded, console = load(page, f"view=tree&expand=all&path={halo}")
    assert console == []
    rows = [a for a in expanded.tags("tr") if "data-node" in a]
    assert len(rows) == 7  # every node
    assert len(expanded.tags("svg", **{"class": "plot heat"})) == 1  # a model of p and size
    assert len(expanded.tags("rect")) > 20 * 20  # its cells

    found, console = load(page, "search=allreduce&path=main-%3Esolve-%3EMPI_Allreduce")
    assert console == []
    rows = [a for a in found.tags("tr") if "data-node" in a]
    assert len(rows) == 3  # the match with its two callers
    text = "".join(found.text)
    assert "1 call path(s) match" in text
    assert "MPI_Allreduce" in text and "log2(p)" in text  # its model, beside the plots

    chosen = quote(f"main->{CRAFTED}", safe="")
    crafted, console = load(page, f"view=tree&expand=all&search=alert&path={chosen}")
    assert console == []
    assert crafted.tags("img") == []
    scripts = crafted.tags("script")
    assert len(scripts) == 2  # the data and the page's own script, nothing injected
    assert f"main->{CRAFTED}" in "".join(crafted.text)  # the chosen call path's full name
    titles = {attrs.get("title") for _, attrs in crafted.elements}
    assert f"main->{CLOSING}" in titles  # the full name on hover


@pytest.mark.slow
@needs_chromium
@pytest.mark.skipif(shutil.which("mpicc") is None, reason="needs Open MPI")
def test_report_of_a_real_campaign_shows_its_failed_runs(tmp_path, capsys) -> None:
    """A measured campaign in which n=3 aborts: the failures and their reason are in the
    campaign view, and the runs that succeeded are plotted against their model."""
    build_program(tmp_path)
    spec = write_spec(
        tmp_path,
        """
        [app]
        name = "prog"
        [run]
        command = "./prog {n} 3"
        repetitions = 1
        timeout = 20
        [parameters]
        p = 1
        n = [1, 2, 3, 4, 6, 8]
        """,
    )
    assert main(["measure", str(spec)]) == 1  # the failed runs make the exit status
    store = tmp_path / "prog.sqlite"
    page = tmp_path / "report.html"
    assert main(["report", str(store), "-o", str(page)]) == 0
    capsys.readouterr()
    campaign, console = load(page, "view=campaign")
    assert console == []
    text = "".join(campaign.text)
    assert "5 ok, 1 failed" in text
    failed = [row for row in text.split("\n") if "n=3" in row]
    assert failed, text
    assert campaign.tags("path", **{"class": "model"})
    assert len(campaign.tags("circle", **{"class": "repetition"})) == 5  # every run that ran


# -- comparison, simulation results, taint ---------------------------------------------------


def test_comparison_names_the_changed_call_path_and_the_rest_within_noise(tmp_path, capsys) -> None:
    before, after = write_before_and_after(tmp_path)
    page = tmp_path / "diff.html"
    assert main(["report", str(before), str(after), "-o", str(page), "--at", "p=64"]) == 0
    out = capsys.readouterr().out.splitlines()
    listed = page_data(page)["comparison"]["rows"]
    rows = {row["callpath"]: row for row in listed}
    halo = rows["main->solve->halo"]
    assert halo["verdict"] == "costs more" and halo["model_changed"]
    assert halo["ratio"] == pytest.approx(8, rel=0.05)  # p^(1/2) more at p=64
    kernel = rows["main->solve->kernel"]
    assert kernel["verdict"] == "within noise" and not kernel["model_changed"]
    # other noise: the fits differ, but each value lies in the other's interval
    assert kernel["value_before"] != kernel["value_after"]
    low, high = kernel["interval_before"]
    assert low <= kernel["value_after"] <= high
    low, high = kernel["interval_after"]
    assert low <= kernel["value_before"] <= high
    assert rows["main->solve->pack"]["verdict"] == "only in B"
    assert rows["main->solve->pack"]["before"] is None
    unchanged = sorted(path for path, row in rows.items() if not row["changed"])
    assert unchanged == sorted(set(_truth((2, 64))) - {"main->solve->halo"})
    assert listed[0]["callpath"] == "main->solve->halo"  # the largest change first
    # a few lines on stdout say the same
    assert out[0].startswith("A = ") and "p=64, size=4096" in out[0]
    assert out[1].strip() == "1 changed model, 1 costs more, 6 within noise, 1 only in B"
    assert "main->solve->halo" in out[2] and out[2].split()[0] == "x" + format(halo["ratio"], ".3g")
    assert "main->solve->pack" in out[3] and "only in B" in out[3]


def test_comparison_level_sets_the_bands_and_the_false_discovery_rate(tmp_path, capsys) -> None:
    before, after = write_before_and_after(tmp_path)
    page = tmp_path / "diff.html"
    argv = ["report", str(before), str(after), "-o", str(page), "--at", "p=64", "--level", "0.99"]
    assert main(argv) == 0
    out = capsys.readouterr().out.splitlines()
    # 7 call paths in both: the comparisons the rate is controlled over; pack is in B only
    rule = "changed: Benjamini-Hochberg at q = 0.01 over 7 comparisons"
    assert rule in out[0]
    data = page_data(page)
    assert data["level"] == 0.99 and data["comparison"]["rule"] == rule
    rows = {row["callpath"]: row for row in data["comparison"]["rows"]}
    assert rows["main->solve->halo"]["verdict"] == "costs more"
    assert rows["main->solve->halo"]["p_value"] < 1e-10
    assert rows["main->solve->kernel"]["p_value"] > 0.01
    assert rows["main->solve->pack"]["p_value"] is None
    # the bands are the 99 % prediction intervals: wider than the 95 % ones
    wide = rows["main->solve->kernel"]["interval_after"]
    assert main(["report", str(before), str(after), "-o", str(page), "--at", "p=64"]) == 0
    capsys.readouterr()
    narrow = {r["callpath"]: r for r in page_data(page)["comparison"]["rows"]}
    low, high = narrow["main->solve->kernel"]["interval_after"]
    assert wide[0] < low and high < wide[1]


@pytest.mark.parametrize("level", ["0", "1", "-0.5", "1.5", "nan", "high"])
def test_comparison_refuses_a_level_that_is_no_probability(tmp_path, capsys, level) -> None:
    before, after = write_before_and_after(tmp_path)
    page = tmp_path / "diff.html"
    with pytest.raises(SystemExit) as exit_:
        main(["report", str(before), str(after), "-o", str(page), "--level", level])
    assert exit_.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert "--level" in error and repr(level) in error and "between 0 and 1" in error
    assert not page.exists()


def test_comparison_refuses_campaigns_of_other_parameters(tmp_path, capsys) -> None:
    measurements_ = write_text_measurements(tmp_path / "app.txt")
    other = tmp_path / "other.txt"
    other.write_text(
        "PARAMETER n\nPOINTS 1 2 3 4 5\nREGION main\nMETRIC time\n"
        + "".join(f"DATA {v}\n" for v in (1, 2, 3, 4, 5))
    )
    code = main(["report", str(other), str(measurements_), "-o", str(tmp_path / "r.html")])
    assert code == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1
    assert "other.txt" in error and "models over n" in error


SIMULATED = {
    "trace": "perfcast-trace",
    "ranks": 2,
    "trace_seconds": 1.0,
    "platforms": [{"name": "a", "time": 1.0, "compute": 0.5, "communication": 0.5}],
}


def _with(platform: dict, **top: object) -> str:
    return json.dumps({**SIMULATED, "platforms": [platform], **top})


@pytest.mark.parametrize(
    ("content", "named"),
    [
        (
            _with({"name": "a", "time": "fast", "compute": 1, "communication": 0}),
            "run.platforms[0].time must be a number >= 0",
        ),
        (
            "[" + _with({"name": "a", "time": 1, "communication": 0}) + "]",
            "runs[0].platforms[0] has no 'compute'",
        ),
        (
            _with({"name": "a", "time": 1, "compute": 1, "communication": float("inf")}),
            "run.platforms[0].communication must be a finite number",
        ),
        (json.dumps({**SIMULATED, "platforms": []}), "run.platforms must be a non-empty list"),
        (json.dumps({**SIMULATED, "slowdown": -1}), "run.slowdown must be a number > 0"),
        (json.dumps(SIMULATED) + "\n[1]", "runs[1] must be a JSON object"),
        ('{"platforms": ', "not JSON"),
    ],
)
def test_bad_simulation_input_exits_2_naming_the_key(tmp_path, capsys, content, named) -> None:
    measurements_ = write_text_measurements(tmp_path / "app.txt")
    results = tmp_path / "simulated.json"
    results.write_text(content)
    page = tmp_path / "r.html"
    code = main(["report", str(measurements_), "--simulation", str(results), "-o", str(page)])
    assert code == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1
    assert str(results) in error
    assert named in error
    assert not page.exists()


@pytest.mark.slow
@needs_chromium
@pytest.mark.skipif(shutil.which("smpirun") is None, reason="needs SimGrid's smpirun")
def test_page_in_chromium_comparison_and_simulation_views(tmp_path, capsys) -> None:
    trace = write_trace(tmp_path / "trace", WORK, [2.0, 1.5])
    base = write_platform(tmp_path, PlatformSpec("base", nodes=2))
    double = write_platform(tmp_path, PlatformSpec("double", nodes=1, cores=2, speed=2e9))
    argv = ["simulate", str(trace), "--platform", str(base), "--platform", str(double)]
    assert main([*argv, "--json", "--native", "4"]) == 0
    results = tmp_path / "simulated.json"
    results.write_text(capsys.readouterr().out * 2)  # two runs, as `>> FILE` collects them
    before, after = write_before_and_after(tmp_path)
    page = tmp_path / "diff.html"
    argv = ["report", str(before), str(after), "--simulation", str(results), "-o", str(page)]
    assert main(argv) == 0
    capsys.readouterr()

    diff, console = load(page, "view=diff")
    assert console == []
    verdicts = {a["data-path"]: a["data-verdict"] for a in diff.tags("tr") if "data-verdict" in a}
    assert verdicts["main->solve->halo"] == "costs more"
    assert verdicts["main->solve->kernel"] == "within noise"
    assert verdicts["main->solve->pack"] == "only in B"
    # the largest change is drawn at once: both models along each parameter with bands
    assert len(diff.tags("svg", **{"class": "plot compare"})) == 2
    assert len(diff.tags("path", **{"class": "model before"})) == 2
    assert len(diff.tags("path", **{"class": "model after"})) == 2
    assert len(diff.tags("path", **{"class": "band after"})) == 2
    assert "main->solve->halo [time]" in "".join(diff.text)

    added, console = load(page, "pair=main-%3Esolve-%3Epack")
    assert console == []
    assert "no model: not measured there" in "".join(added.text)
    assert added.tags("path", **{"class": "model before"}) == []
    assert len(added.tags("path", **{"class": "model after"})) == 2

    simulated, console = load(page, "view=simulation")
    assert console == []
    text = "".join(simulated.text)
    assert text.count("2 rank(s)") == 2
    assert len(simulated.tags("rect", **{"class": "compute"})) == 4  # 2 runs x 2 platforms
    assert len(simulated.tags("rect", **{"class": "communication"})) == 4
    assert len(simulated.tags("line", **{"class": "native"})) == 2
    assert "measured 4 s" in text  # --native recovered from the slowdown
    compute = [float(a["width"] or 0) for a in simulated.tags("rect", **{"class": "compute"})]
    assert compute[0] == pytest.approx(2 * compute[1], rel=0.01)  # twice the speed


@pytest.mark.slow
def test_taint_report_shows_each_prior_its_findings_and_the_black_box_model(
    tmp_path, capsys
) -> None:
    """The program and contended measurements of test_taint_modeling: the report fits them
    as perfcast model --taint does, and beside each model shows its prior, the findings and
    the black-box model the prior overruled."""
    (tmp_path / "app.c").write_text(textwrap.dedent(PROGRAM))
    parameters = [ArgvParameter.parse("n=argv:1"), ArgvParameter.parse("t=argv:2")]
    profile = taint_program(["cc", "app.c", "-o", "app"], "./app 10 3", parameters, cwd=tmp_path)
    profile.save(tmp_path / "profile.json")
    times = tmp_path / "times.json"
    write_experiment(measurements(), times)
    page = tmp_path / "report.html"
    argv = ["report", str(times), "--taint", str(tmp_path / "profile.json"), "-o", str(page)]
    assert main(argv) == 0
    assert "unknown to the taint profile" in capsys.readouterr().err
    data = page_data(page)
    by_path = {data["nodes"][r["node"]]["path"]: r for r in data["models"]}
    setup = by_path["main->setup()"]
    assert setup["prior"] == setup["taint"]["prior"] == "taint: constant"
    assert "log2(t)" in setup["alternative"]["formula"]  # contention, which the prior rules out
    assert setup["alternative"]["smape"] < setup["stats"]["smape"]
    assert {"contention", "prior-conflict"} <= {f["kind"] for f in setup["findings"]}
    compute = by_path["main->compute(int)"]
    assert compute["taint"]["functions"] == [["compute", "n"]]
    assert compute["taint"]["matched"] == "by call path"
    assert "t" not in compute["formula"] and "t)" in compute["alternative"]["formula"]
    assert [f["kind"] for f in by_path["main->choose(int)"]["findings"]] == ["algorithm-switch"]
    untouched = by_path["main->log_progress"]
    assert untouched["taint"] is None and untouched["alternative"] is None

    models = tmp_path / "models.json"
    assert main(["model", str(times), "-o", str(models)]) == 0
    capsys.readouterr()
    argv = ["report", str(models), "--taint", str(tmp_path / "profile.json"), "-o", str(page)]
    assert main(argv) == 2
    error = capsys.readouterr().err.strip()
    assert "models.json" in error and "--taint fits measurements" in error
