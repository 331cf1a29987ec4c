"""From Caliper profiles to a ranked table and a plot, the way a notebook would go.

Run it as a script (``python examples/caliper_lulesh.py [CALIPER_DIR] [OUT_DIR]``) or paste
its cells (``# %%``) into Jupyter, where the model set and the model show themselves as
HTML and LaTeX. The data: thicket's LULESH set, Caliper's SPOT channel at 27..343 ranks
with ``problem_size`` 30 per rank (``../shared/data/caliper/mpi_scaling_cali``). Needs the
notebook extra for the plot: ``pip install 'perfcast[notebook]'``.
"""

# %% read the profiles: the Adiak global jobsize is the parameter
import sys
import warnings
from pathlib import Path

from perfcast.experiment import read_experiment
from perfcast.workflows.model import ModelRequest, model_campaign

here = Path(__file__).resolve().parent
profiles = (
    Path(sys.argv[1])
    if len(sys.argv) > 1
    else here.parents[1] / "shared" / "data" / "caliper" / "mpi_scaling_cali"
)
out = Path(sys.argv[2]) if len(sys.argv) > 2 else Path(".")
with warnings.catch_warnings(record=True) as said:
    warnings.simplefilter("always")
    experiment = read_experiment(profiles, parameters="jobsize")
for warning in said:
    print("note:", warning.message)
print(experiment)

# %% model the exclusive time per region as perfcast model does
models = model_campaign(ModelRequest(experiment, metrics=("time",))).models
models  # noqa: B018 - in Jupyter, the last expression shows: a table with LaTeX formulas

# %% rank the regions by their time at 1,372 ranks; say why a model cannot be read there
values = {"jobsize": sorted(set(experiment.coordinates()[:, 0]))}
table = models.to_dataframe({"jobsize": 1372}, values)
ranked = table[table["unfit"] == ""].sort_values("at_target", ascending=False)
print(ranked[["callpath", "model", "at_target", "lower", "upper", "growth"]].head(8).to_string())
print(f"{(table['unfit'] != '').sum()} of {len(table)} models set apart, e.g.:")
print(table[table["unfit"] != ""][["callpath", "unfit"]].head(3).to_string())

# %% plot the costliest region's model with its prediction interval and the measurements
import matplotlib  # noqa: E402 - a notebook imports where it plots

matplotlib.use("Agg")
costliest = models[(ranked.iloc[0]["callpath"], "time")]
axes = costliest.plot("jobsize", experiment=experiment, until=1372)
axes.figure.savefig(out / "caliper_lulesh.png", dpi=100)
print(f"plot: {out / 'caliper_lulesh.png'}")
