"""The pass-rate summary of a batch, per model, from its result lines."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

Z_95 = 1.959964  # the normal quantile of a 95 % interval


@dataclass
class ModelSummary:
    """One model's runs: how many, how many passed (with a 95 % Wilson interval), errors, tokens, latency."""

    model: str
    runs: int = 0
    passed: int = 0
    failed: int = 0  # runs with no answer (provider error, turn limit)
    pass_rate: float = 0.0
    pass_rate_ci: tuple[float, float] = (0.0, 0.0)
    tool_calls: int = 0
    tool_errors: int = 0
    tool_error_rate: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    latency_p50_ms: int = 0
    latency_p95_ms: int = 0
    replayed: int = 0  # runs answered from a recording (no key for a live run, or --replay)
    diverged: int = 0  # replayed runs that asked something the recording did not
    latencies: list[int] = field(default_factory=list, repr=False)


@dataclass
class BatchSummary:
    """Every model's summary, and the batch's totals."""

    batch_id: str
    total: int  # runs the batch holds
    models: list[ModelSummary]

    @property
    def runs(self) -> int:
        return sum(model.runs for model in self.models)

    @property
    def failed(self) -> int:
        return sum(model.failed for model in self.models)

    @property
    def pass_rate(self) -> float:
        runs = self.runs
        return sum(model.passed for model in self.models) / runs if runs else 0.0

    def to_json(self) -> dict[str, Any]:
        """``{"batch", "total", "runs", "failed", "pass_rate", "models": [...]}`` (``toolrun batch --json``)."""
        models = []
        for model in self.models:
            entry = asdict(model)
            del entry["latencies"]
            entry["pass_rate_ci"] = list(model.pass_rate_ci)
            models.append(entry)
        return {"batch": self.batch_id, "total": self.total, "runs": self.runs, "failed": self.failed,
                "pass_rate": round(self.pass_rate, 4), "models": models}


def summarize(lines: Iterable[dict[str, Any]], *, batch_id: str, total: int) -> BatchSummary:
    """The summary of ``lines`` (one per run), models in the order they first appear."""
    models: dict[str, ModelSummary] = {}
    for line in lines:
        summary = models.setdefault(line["model"], ModelSummary(line["model"]))
        summary.runs += 1
        summary.passed += line["status"] == "ok"
        summary.failed += line["status"] == "failed"
        calls = line.get("tool_calls") or []
        summary.tool_calls += len(calls)
        summary.tool_errors += sum(1 for call in calls if call.get("is_error"))
        usage = line.get("usage") or {}
        summary.input_tokens += int(usage.get("input_tokens", 0))
        summary.output_tokens += int(usage.get("output_tokens", 0))
        summary.latencies.append(int(line.get("duration_ms", 0)))
        summary.replayed += line.get("mode") == "replay"
        summary.diverged += bool(line.get("divergences"))
    for summary in models.values():
        summary.pass_rate = round(summary.passed / summary.runs, 4) if summary.runs else 0.0
        summary.pass_rate_ci = wilson_interval(summary.passed, summary.runs)
        summary.tool_error_rate = round(summary.tool_errors / summary.tool_calls, 4) if summary.tool_calls else 0.0
        summary.latency_p50_ms = percentile(summary.latencies, 50)
        summary.latency_p95_ms = percentile(summary.latencies, 95)
    return BatchSummary(batch_id, total, list(models.values()))


def wilson_interval(successes: int, trials: int, z: float = Z_95) -> tuple[float, float]:
    """The Wilson score interval of a pass rate: honest for few runs and for rates near 0 or 1."""
    if trials == 0:
        return (0.0, 0.0)
    rate = successes / trials
    denominator = 1 + z * z / trials
    centre = (rate + z * z / (2 * trials)) / denominator
    spread = z * math.sqrt(rate * (1 - rate) / trials + z * z / (4 * trials * trials)) / denominator
    return (round(max(0.0, centre - spread), 4), round(min(1.0, centre + spread), 4))


def percentile(values: list[int], q: float) -> int:
    """The ``q``-th percentile (nearest rank) of ``values``; 0 when empty."""
    if not values:
        return 0
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]
