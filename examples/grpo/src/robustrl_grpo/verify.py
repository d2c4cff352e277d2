"""Was every answer produced by the version it is tagged with? Recomputed on the trainer's side.

A training sample from robustrl carries, per generated token, the log-prob the engine reported and the
weight version the engine says produced it. Here each tagged token's log-prob is computed again with
that version's weights — version 0 is the base model, version ``s`` the checkpoint of step ``s`` (the
job keeps every one with ``keep_checkpoints=0``) — and compared. vLLM on CPU and transformers, both in
float32, agreed to within 2e-6 on this model (measured by the campaigns); a token tagged with the wrong
version differs by far more (one optimizer step moves many of these log-probs by 1e-2 to 1e-1). Not
every token tells versions apart — one the model is sure of has a log-prob near 0 under both — so the
report counts the tokens that do: those whose log-prob under the *neighbouring* version differs from the
tagged one's by more than twice the tolerance, where a wrong tag could not have passed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional

import torch

from . import checkpoint
from .grpo import token_logprobs
from .model import load_model

__all__ = ["DEFAULT_TOLERANCE", "VersionReport", "load_version", "verify_versions"]

# Largest |recomputed - reported| log-prob a token may show and still count as produced by its version.
DEFAULT_TOLERANCE = 1e-3


def load_version(model_dir: str, state_dir: str, version: int) -> Optional[torch.nn.Module]:
    """Version ``version``'s policy: the base model, or the model state of checkpoint ``step-<version>``
    (read without a process group); None when that checkpoint is gone or incomplete."""
    model = load_model(Path(model_dir))
    model.eval()
    if version == 0:
        return model
    path = checkpoint.checkpoint_dir(state_dir, version)
    if not checkpoint.is_complete(path):
        return None
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.default_planner import DefaultLoadPlanner

    state = {"model": model.state_dict()}
    dcp.load(state, storage_reader=dcp.FileSystemReader(str(path)), planner=DefaultLoadPlanner(allow_partial_load=True), no_dist=True)
    model.load_state_dict(state["model"])
    return model


@dataclass
class VersionReport:
    samples: int = 0
    tokens: int = 0
    max_diff: float = 0.0
    mean_diff: float = 0.0
    # Tokens beyond the tolerance under their tagged version, as "<sample id>@<index>: diff".
    mismatched: List[str] = field(default_factory=list)
    # Versions tagged but not recomputable (their checkpoint is gone).
    missing_versions: List[int] = field(default_factory=list)
    # Tokens recomputed under the version before (or after) the tagged one too, and of those the ones
    # whose log-prob there is more than twice the tolerance from the tagged version's: a wrong tag
    # would have shown on them.
    neighbour_tokens: int = 0
    discriminating: int = 0

    def as_dict(self) -> Dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def _logprobs(model: torch.nn.Module, ids: List[int]) -> List[float]:
    with torch.no_grad():
        input_ids = torch.tensor([ids], dtype=torch.long)
        logits = model(input_ids=input_ids, attention_mask=torch.ones_like(input_ids)).logits
        return token_logprobs(logits, input_ids)[0].tolist()


def verify_versions(model_dir: str, state_dir: str, samples: Iterable[Dict[str, Any]], tolerance: float = DEFAULT_TOLERANCE) -> VersionReport:
    """``samples`` as robustrl's kept batch gives them (``trajectoryId`` with ``promptTokenIds``,
    ``responseTokenIds``, ``logprobs``, ``versions``, ``lossMask``)."""
    report = VersionReport()
    models: Dict[int, Optional[torch.nn.Module]] = {}

    def model_of(version: int) -> Optional[torch.nn.Module]:
        if version not in models:
            models[version] = load_version(model_dir, state_dir, version)
        return models[version]

    total_diff = 0.0
    for sample in samples:
        report.samples += 1
        prompt, response = list(sample["promptTokenIds"]), list(sample["responseTokenIds"])
        ids = prompt + response
        tagged = [(i, int(v), float(lp)) for i, (v, lp, m) in enumerate(zip(sample["versions"], sample["logprobs"], sample["lossMask"])) if m and v is not None and lp is not None]
        for version in sorted({v for _, v, _ in tagged}):
            model = model_of(version)
            if model is None:
                if version not in report.missing_versions:
                    report.missing_versions.append(version)
                continue
            recomputed = _logprobs(model, ids)
            neighbour = model_of(version - 1) if version > 0 else model_of(version + 1)
            other = _logprobs(neighbour, ids) if neighbour is not None else None
            at = len(prompt)
            for i, v, reported in tagged:
                if v != version:
                    continue
                diff = abs(recomputed[at + i] - reported)
                report.tokens += 1
                total_diff += diff
                report.max_diff = max(report.max_diff, diff)
                if diff > tolerance:
                    report.mismatched.append(f"{sample.get('trajectoryId', '?')}@{i}: {diff:.4f} under version {version}")
                if other is not None:
                    report.neighbour_tokens += 1
                    report.discriminating += abs(other[at + i] - recomputed[at + i]) > 2 * tolerance
    report.mean_diff = total_diff / report.tokens if report.tokens else 0.0
    return report
