"""Prior sources are registered once (perfcast.priors.registry): the --priors words, the
precedence of conflicting structures and the default choice all follow the table."""

from pathlib import Path

import pytest

from perfcast.errors import InputError, PerfcastError
from perfcast.experiment.experiment import Experiment
from perfcast.modeling.prior import DerivedPriors, Prior
from perfcast.priors import PriorInputs, SourceEntry, precedence, registry, sources
from perfcast.workflows.model import choose_priors, prior_choices, prior_sources


def experiment(metrics: tuple[str, ...] = ("time",)) -> Experiment:
    rows = [("main", m, (p,), float(p)) for m in metrics for p in (1, 2, 4, 8, 16)]
    return Experiment.from_rows(["p"], rows)


def test_the_table_orders_the_sources_and_the_choices():
    assert precedence() == ("effort", "static", "taint")
    assert prior_choices() == ("effort", "static", "taint", "none")


def test_the_sources_spell_their_names_as_registered():
    from perfcast.taint.priors import SOURCE as TAINT

    assert TAINT == registry.TAINT
    pytest.importorskip("islpy", reason="could not import islpy: the static extra")
    from perfcast.static.prior import SOURCE as STATIC

    assert STATIC == registry.STATIC


def test_inputs_imply_their_source_and_counters_choose_effort_unasked(tmp_path):
    profile = tmp_path / "app.taint.json"
    names, notes = choose_priors(experiment(("time", "basic_blocks")), None, PriorInputs(profile))
    assert names == ("effort", "taint")
    assert notes[0].startswith("priors: effort, from the input's exact basic_blocks counts")
    assert notes[1].startswith(f"priors: taint, from {profile}")
    assert choose_priors(experiment(), None, PriorInputs()) == ((), [])
    with pytest.raises(InputError, match="--priors static needs its input: add --static MODELFILE"):
        choose_priors(experiment(), ("static",), PriorInputs())


class _Constant:
    """A source that says every call path is constant (a plug-in a user might write)."""

    name = "constant"

    def derive(self, experiment: Experiment) -> DerivedPriors:
        priors = {(c, "time"): Prior.constant(self.name) for c in experiment.callpaths}
        return DerivedPriors(self.name, priors)


def test_a_registered_source_is_a_choice_with_its_precedence_and_builder(monkeypatch):
    monkeypatch.setattr(registry, "_SOURCES", list(sources()))  # registered for this test
    entry = SourceEntry(
        "constant",
        None,
        lambda inputs: None,
        lambda experiment, inputs: "priors: constant, for the test",
        lambda inputs, effort: _Constant(),
    )
    registry.register(entry, before="taint")
    assert precedence() == ("effort", "static", "constant", "taint")
    assert "constant" in prior_choices()
    names, notes = choose_priors(experiment(), None, PriorInputs())
    assert names == ("constant",) and notes == ["priors: constant, for the test"]
    from perfcast.effort import EffortModeler

    (built,) = prior_sources(names, PriorInputs(), EffortModeler())
    assert built.derive(experiment()).priors[("main", "time")].source == "constant"
    with pytest.raises(PerfcastError, match="registered twice"):
        registry.register(entry)
    with pytest.raises(PerfcastError, match="'nowhere' is not registered"):
        registry.register(
            SourceEntry("other", None, entry.given, entry.unasked, entry.build), before="nowhere"
        )


def test_the_model_command_takes_a_registered_source(monkeypatch, capsys):
    from perfcast.cli import main

    monkeypatch.setattr(registry, "_SOURCES", list(sources()))
    registry.register(
        SourceEntry(
            "constant",
            None,
            lambda inputs: None,
            lambda experiment, inputs: None,
            lambda inputs, effort: _Constant(),
        )
    )
    text = Path(__file__).parents[1] / "examples" / "data" / "relearn.txt"
    assert main(["model", str(text), "--priors", "constant", "--style", "text"]) == 0
    assert "Model: " in capsys.readouterr().out
    with pytest.raises(SystemExit):  # a usage error, as argparse reports them
        main(["model", str(text), "--priors", "nonsense"])
    assert (
        "from effort, static, taint, constant, comma-separated, or none" in capsys.readouterr().err
    )
