"""The trainer's batches under robustrl: step ``s``'s samples, as the request manager keeps them.

A rank waits until every sample of batch ``step-<s>`` completed (the agent loops generate it through
the router, possibly across engine faults), then takes the completed batch within the staleness bound:
each trajectory as a training sample — prompt and response ids, the sampling engine's log-probs, the
loss mask, the reward and the job's metadata — exactly what was generated, nothing re-tokenised. A
restarted trainer takes the same batch again (the paper's "keep the batch", §5.1).

A sample the router served within its bound (its version at most ``max_staleness`` behind the newest
then) can be further behind by the time its step trains: the request manager leaves it out, and the
step trains on the rest (semi-synchronous RL's rule, paper §2); ``excluded`` names what was left out.

A trajectory the request manager has no training sample for (a turn recorded as text only, ids that do
not add up: its ``reason``) cannot be trained exactly. It is left out too, with a warning naming it, and
``unusable`` names it: failing the step instead would fail it again on every restart, since a restarted
trainer takes the same batch.
"""

from __future__ import annotations

import logging
import urllib.parse
from typing import Any, Dict, List, Optional, Tuple

from .config import JobConfig
from .grpo import Sample
from .http_json import HttpError, request_json, retrying

__all__ = ["KeptBatches", "samples_of", "unusable_of"]

logger = logging.getLogger("robustrl_grpo.kept_batches")


def unusable_of(batch: Dict[str, Any]) -> List[Tuple[str, str]]:
    """The trajectories of a completed batch with no training sample, each with the request manager's reason."""
    return [(str(e.get("trajectoryId")), str(e.get("reason"))) for e in batch.get("samples", []) if e.get("sample") is None]


def samples_of(batch: Dict[str, Any]) -> List[Sample]:
    """Training samples from a completed batch: the trajectories that have one (``unusable_of`` names the rest)."""
    out: List[Sample] = []
    for entry in batch.get("samples", []):
        sample = entry.get("sample")
        if sample is None:
            continue
        metadata = sample.get("metadata") or {}
        out.append(
            Sample(
                prompt_ids=sample["promptTokenIds"],
                response_ids=sample["responseTokenIds"],
                logprobs=sample["logprobs"],
                reward=float(sample["reward"]) if sample.get("reward") is not None else 0.0,
                group=str(metadata.get("group", entry["trajectoryId"])),
                id=entry["trajectoryId"],
                loss_mask=sample["lossMask"],
            )
        )
    return out


class KeptBatches:
    def __init__(self, cfg: JobConfig, job_id: str, request_manager_url: str, token: Optional[str] = None) -> None:
        self.cfg, self.job_id = cfg, job_id
        self.store = request_manager_url.rstrip("/")
        self.auth = {"authorization": f"Bearer {token}"} if token else {}
        self._excluded: Dict[int, List[str]] = {}
        self._unusable: Dict[int, List[str]] = {}

    @property
    def expected(self) -> int:
        return self.cfg.prompts_per_step * self.cfg.group_size

    def batch(self, step: int) -> List[Sample]:
        base = f"{self.store}/v1/jobs/{urllib.parse.quote(self.job_id, safe='')}/batches/step-{step}"

        def complete() -> Optional[bool]:
            status, progress, _ = request_json("GET", base, headers=self.auth, timeout=10)
            if status >= 500:
                raise HttpError(status, f"request manager answered {status}")
            return True if status == 200 and (progress or {}).get("completed", 0) >= self.expected else None

        retrying(f"batch step-{step}", complete, 24 * 3600)
        query = f"{base}/completed?currentWeightVersion={step - 1}&maxStaleness={self.cfg.max_staleness}"

        def fetch() -> Optional[Dict[str, Any]]:
            status, batch, _ = request_json("GET", query, headers=self.auth, timeout=60)
            if status >= 500:
                raise HttpError(status, f"request manager answered {status}")
            if status != 200:
                raise HttpError(status, f"request manager refused batch step-{step}: {status} {batch}")
            return batch

        batch = retrying(f"fetch batch step-{step}", fetch)
        samples = samples_of(batch)
        self._excluded[step] = sorted(str(s["trajectoryId"]) for s in batch.get("stale", []))
        unusable = unusable_of(batch)
        for trajectory_id, reason in unusable:
            logger.warning("batch step-%s: trajectory %s left out, it has no training sample: %s", step, trajectory_id, reason)
        self._unusable[step] = sorted(t for t, _ in unusable)
        if not samples:
            raise RuntimeError(
                f"batch step-{step}: none of its {self.expected} samples is within the staleness bound ({self.cfg.max_staleness})"
                f" and usable ({len(unusable)} without a training sample)"
            )
        if len(samples) + len(self._excluded[step]) + len(unusable) < self.expected:
            raise RuntimeError(
                f"batch step-{step}: {len(samples)} samples, {len(self._excluded[step])} stale ones"
                f" and {len(unusable)} without a training sample of {self.expected}"
            )
        return samples

    def excluded(self, step: int) -> List[str]:
        """Completed samples of ``step`` left out as beyond the staleness bound when it was fetched."""
        return self._excluded.get(step, [])

    def unusable(self, step: int) -> List[str]:
        """Completed samples of ``step`` left out because the request manager has no training sample for them."""
        return self._unusable.get(step, [])
