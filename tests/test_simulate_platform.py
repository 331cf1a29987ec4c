"""Target platforms from a few numbers, replayed with the real SimGrid (``smpirun``).

A hand-written time-independent trace (one 100 MB message from rank 0 to rank 1) is
replayed on described platforms: its simulated time is the volume over the bandwidth plus
the latencies, halving a link's bandwidth doubles it, and on two clusters the message
between sites crosses the slow link. Bad descriptions and too-small platforms get errors.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from perfcast import cli
from perfcast.errors import InputError
from perfcast.simulate.platform import PlatformSpec
from perfcast.simulate.replay import replay

BYTES = 100_000_000

needs_simgrid = pytest.mark.skipif(
    shutil.which("smpirun") is None, reason="SimGrid's smpirun is not installed"
)


@pytest.fixture
def ping(tmp_path: Path) -> Path:
    """The index of a two-rank trace: rank 0 sends BYTES bytes (MPI_BYTE, id 6) to rank 1."""
    (tmp_path / "rank0.txt").write_text(f"0 init\n0 send 1 0 {BYTES} 6\n0 finalize\n")
    (tmp_path / "rank1.txt").write_text(f"1 init\n1 recv 0 0 {BYTES} 6\n1 finalize\n")
    index = tmp_path / "trace.txt"
    index.write_text("rank0.txt\nrank1.txt\n")
    return index


@needs_simgrid
@pytest.mark.parametrize("topology", ["flat", "fat-tree", "two-clusters"])
def test_transfer_time_follows_the_link_bandwidth(ping: Path, topology: str) -> None:
    fast = PlatformSpec("fast", nodes=4, bandwidth=1e9, latency=1e-6, topology=topology)
    slow = PlatformSpec("slow", nodes=4, bandwidth=5e8, latency=1e-6, topology=topology)
    t_fast, t_slow = replay(ping, fast, 2).time, replay(ping, slow, 2).time
    assert t_fast == pytest.approx(BYTES / 1e9, rel=0.01)
    assert t_slow / t_fast == pytest.approx(2, rel=0.01)


@needs_simgrid
def test_a_message_between_two_sites_crosses_the_slow_link(ping: Path) -> None:
    """With one node per site the two ranks sit on different clusters."""
    sites = PlatformSpec(
        "sites", nodes=2, bandwidth=1e9, topology="two-clusters", inter_bandwidth=1e8
    )
    assert sites.hosts() == ["site-0-node-0", "site-1-node-0"]
    # the slow link is the bottleneck (SimGrid adds the TCP window and both directions)
    assert BYTES / 1e8 <= replay(ping, sites, 2).time <= 1.1 * BYTES / 1e8


@needs_simgrid
def test_describe_writes_a_platform_smpirun_loads(
    ping: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    output = tmp_path / "cluster.xml"
    argv = ["platform", "describe", "-o", str(output), "--nodes", "8", "--cores", "4"]
    assert cli.main([*argv, "--bandwidth", "2e9", "--topology", "fat-tree"]) == 0
    assert "32 cores (fat-tree)" in capsys.readouterr().out
    xml = output.read_text()
    assert 'topology="FAT_TREE"' in xml and 'core="4"' in xml and 'bw="2000000000.0Bps"' in xml
    spec = PlatformSpec("c", nodes=8, cores=4, bandwidth=2e9, topology="fat-tree")
    assert spec.hosts()[:5] == ["node-0"] * 4 + ["node-1"]
    assert BYTES / 2e9 <= replay(ping, spec, 2).time <= 1.1 * BYTES / 2e9


def test_bad_descriptions_name_the_number(tmp_path: Path) -> None:
    cases: list[tuple[dict[str, Any], str]] = [
        ({"nodes": 0}, "nodes must be a whole number from 1"),
        ({"nodes": 2, "bandwidth": -1.0}, "bandwidth must be a positive finite number"),
        ({"nodes": 2, "latency": float("nan")}, "latency must be a positive finite number"),
        ({"nodes": 1, "topology": "two-clusters"}, "two-clusters needs at least 2 nodes"),
        ({"nodes": 2, "topology": "torus"}, "choose one of flat, fat-tree, two-clusters"),
    ]
    for bad, message in cases:
        with pytest.raises(InputError, match=message):
            PlatformSpec("t", **bad)
    with pytest.raises(InputError, match="use letters, digits"):
        PlatformSpec("a<b", nodes=1)


@needs_simgrid
def test_more_ranks_than_cores_is_refused(ping: Path) -> None:
    with pytest.raises(InputError, match="2 ranks, more than the 1 cores of platform 'tiny'"):
        replay(ping, PlatformSpec("tiny", nodes=1), 2)


def test_describe_refuses_to_overwrite_another_kind_of_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    models = tmp_path / "models.json"
    models.write_text('{"perfcast_models": 1}\n')
    assert cli.main(["platform", "describe", "-o", str(models), "--nodes", "2"]) == 2
    assert "models.json" in capsys.readouterr().err
    assert models.read_text() == '{"perfcast_models": 1}\n'
