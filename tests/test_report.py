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
import tomllib
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import quote

import numpy as np
import pytest
from campaign_helpers import build_program, write_spec

from perfcast.cli import main
from perfcast.experiment import read_experiment
from perfcast.modeling import PMNFModeler
from perfcast.modeling.intervals import prediction_interval
from perfcast.report.html import script_safe_json
from perfcast.report.page import ReportInputs, report_data

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = shutil.which("chromium")
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="needs Debian's chromium (apt-get install chromium)"
)

CRAFTED = "<img src=x onerror=alert(1)>"
CLOSING = "</script><script>alert(1)</script>"
SIZES = (64, 128, 256, 512, 1024)
RANKS = (2, 4, 8, 16)


def _truth(point: tuple[int, int]) -> dict[str, float]:
    """Exclusive time per call path of a program with known costs: a kernel in size^2, an
    allreduce in log2(p), a halo exchange in size * p^(1/2), and the two crafted names as
    cheap leaves."""
    p, size = point
    return {
        "main": 0.01,
        "main->solve": 0.002,
        "main->solve->kernel": 2e-6 * size**2,
        "main->solve->MPI_Allreduce": 0.003 * np.log2(p),
        "main->solve->halo": 1e-5 * size * np.sqrt(p),
        f"main->{CRAFTED}": 0.001,
        f"main->{CLOSING}": 0.001 * size / 64,
    }


def write_text_measurements(path: Path, repetitions: int = 3, seed: int = 1) -> Path:
    """An Extra-P text file of the program above, with 2 % multiplicative noise."""
    rng = np.random.default_rng(seed)
    points = [(p, s) for p in RANKS for s in SIZES]
    lines = ["PARAMETER p size", *(f"POINTS ( {p} {s} )" for p, s in points), "METRIC time"]
    for callpath in _truth(points[0]):
        lines.append(f"REGION {callpath}")
        for point in points:
            value = _truth(point)[callpath]
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
