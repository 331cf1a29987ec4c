"""What a campaign store says about the campaign itself, for the report's campaign view.

A model is only as good as the runs behind it, and the store keeps every one: the design
(its perfcast.toml), what each run cost, and why a run failed. The report shows these
beside the models so that a reader who sees a poor fit can see at once whether the point
that would fix it failed, timed out or was never planned.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from perfcast.measure.store import OK, open_store

STDERR_SHOWN = 600
"""Characters of a failed run's stderr tail the report keeps: the end of the message."""


@dataclass(frozen=True)
class FailedRun:
    key: str
    reason: str | None
    exit_code: int | None
    attempts: int
    stderr_tail: str


@dataclass(frozen=True)
class CampaignFacts:
    """The design and cost of a campaign, and its failures."""

    name: str
    store: str
    parameters: list[str]
    spec_text: str | None
    points: int
    runs_ok: int
    runs_failed: int
    retried_attempts: int
    seconds: float
    """Wall-clock seconds of all stored runs together."""
    rank_seconds: float
    """Seconds times ranks: what the runs cost on a machine billed per core."""
    backends: list[str]
    failed: list[FailedRun]
    retried: list[tuple[str, int, str | None]]
    """Failed attempts that a later attempt replaced: (key, attempt, reason)."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def campaign_facts(store_path: Path) -> CampaignFacts:
    """The facts of the store at ``store_path`` (refused as any store read is refused when
    it is damaged or no store)."""
    with open_store(store_path) as store:
        info = store.info()
        runs = store.runs()
        retried = store.attempts()
    ok = [run for run in runs if run.status == OK]
    seconds = [run.seconds or 0.0 for run in runs]
    return CampaignFacts(
        name=info.name,
        store=str(store_path),
        parameters=info.parameters,
        spec_text=info.spec_text,
        points=len({tuple(sorted(run.point.items())) for run in runs}),
        runs_ok=len(ok),
        runs_failed=len(runs) - len(ok),
        retried_attempts=len(retried),
        seconds=sum(seconds),
        rank_seconds=sum(s * (run.ranks or 1) for s, run in zip(seconds, runs, strict=True)),
        backends=sorted({run.backend or "local" for run in runs}),
        failed=[
            FailedRun(
                run.key, run.reason, run.exit_code, run.attempts, run.stderr_tail[-STDERR_SHOWN:]
            )
            for run in runs
            if run.status != OK
        ],
        retried=retried,
    )
