"""The GRPO objective (group-relative policy optimisation), as a trainer rank computes it.

- Advantages are group-relative: each prompt is sampled ``G`` times, and a sample's advantage is its
  reward minus the group's mean, divided by the group's standard deviation (plus ``eps``). A group whose
  samples all scored the same teaches nothing and gets advantage 0.
- The loss is PPO's clipped surrogate per response token, with the ratio between the policy being
  trained and the policy that sampled (whose per-token log-probs the engine returned):
  ``-min(r·A, clip(r, 1-ε, 1+ε)·A)``, averaged over every response token of the batch (token-level mean,
  so long and short answers weigh by their tokens). No KL term: the reference-model penalty is optional
  in GRPO and this job leaves it out (``kl_coef`` 0 is the common setting for verifiable rewards).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Sequence

import torch

__all__ = ["Sample", "group_advantages", "PackedBatch", "pack", "token_logprobs", "grpo_loss"]


@dataclass(frozen=True)
class Sample:
    """One sampled answer: what a policy-gradient loss needs, as the kept batch hands it back."""

    prompt_ids: Sequence[int]
    response_ids: Sequence[int]
    # The sampling policy's log-prob of each response token.
    logprobs: Sequence[float]
    reward: float
    # Which prompt's group it belongs to (samples of one prompt share a group).
    group: str
    # The sample's identity in the job (its trajectory id under robustrl).
    id: str = ""
    # 1 for tokens the policy sampled, 0 for tokens the environment put between turns (a tool's
    # result); None: every response token was sampled. Where it is 0 the log-prob is not used.
    loss_mask: Optional[Sequence[int]] = None


def group_advantages(rewards: torch.Tensor, groups: Sequence[str], eps: float = 1e-6) -> torch.Tensor:
    """Reward minus its group's mean, over the group's (population) standard deviation plus ``eps``."""
    if rewards.dim() != 1 or rewards.numel() != len(groups):
        raise ValueError(f"one reward per sample expected: {tuple(rewards.shape)} rewards for {len(groups)} samples")
    advantages = torch.zeros_like(rewards)
    by_group: dict = {}
    for index, group in enumerate(groups):
        by_group.setdefault(group, []).append(index)
    for indices in by_group.values():
        members = rewards[indices]
        advantages[indices] = (members - members.mean()) / (members.std(unbiased=False) + eps)
    return advantages


@dataclass
class PackedBatch:
    """Samples as right-padded tensors: ``input_ids`` is prompt + response, ``loss_mask`` marks the
    response tokens (the ones the loss is over), ``old_logprobs`` sits at those same positions."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    loss_mask: torch.Tensor
    old_logprobs: torch.Tensor
    advantages: torch.Tensor


def pack(samples: List[Sample], pad_id: int, advantages: torch.Tensor) -> PackedBatch:
    width = max(len(s.prompt_ids) + len(s.response_ids) for s in samples)
    n = len(samples)
    input_ids = torch.full((n, width), pad_id, dtype=torch.long)
    attention = torch.zeros((n, width), dtype=torch.long)
    loss_mask = torch.zeros((n, width), dtype=torch.float32)
    old = torch.zeros((n, width), dtype=torch.float32)
    for row, sample in enumerate(samples):
        if len(sample.logprobs) != len(sample.response_ids):
            raise ValueError(f"sample {row}: {len(sample.logprobs)} log-probs for {len(sample.response_ids)} response tokens")
        mask = list(sample.loss_mask) if sample.loss_mask is not None else [1] * len(sample.response_ids)
        if len(mask) != len(sample.response_ids):
            raise ValueError(f"sample {row}: a loss mask of {len(mask)} for {len(sample.response_ids)} response tokens")
        p, r = len(sample.prompt_ids), len(sample.response_ids)
        input_ids[row, : p + r] = torch.tensor(list(sample.prompt_ids) + list(sample.response_ids), dtype=torch.long)
        attention[row, : p + r] = 1
        loss_mask[row, p : p + r] = torch.tensor(mask, dtype=torch.float32)
        old[row, p : p + r] = torch.tensor([lp if m and lp is not None else 0.0 for lp, m in zip(sample.logprobs, mask)], dtype=torch.float32)
    return PackedBatch(input_ids, attention, loss_mask, old, advantages)


def token_logprobs(logits: torch.Tensor, input_ids: torch.Tensor) -> torch.Tensor:
    """Log-prob of each token given the ones before it, at the token's own position (position 0: 0)."""
    logp = torch.log_softmax(logits[:, :-1, :].float(), dim=-1)
    picked = logp.gather(-1, input_ids[:, 1:].unsqueeze(-1)).squeeze(-1)
    return torch.cat([torch.zeros_like(picked[:, :1]), picked], dim=1)


def grpo_loss(new_logprobs: torch.Tensor, batch: PackedBatch, clip_eps: float, token_total: float) -> torch.Tensor:
    """The clipped surrogate summed over this batch's response tokens, divided by ``token_total`` (every
    rank's response tokens together, so ranks' gradients average into the whole batch's token mean)."""
    ratio = torch.exp(new_logprobs - batch.old_logprobs)
    advantages = batch.advantages.unsqueeze(1)
    surrogate = torch.minimum(ratio * advantages, torch.clamp(ratio, 1.0 - clip_eps, 1.0 + clip_eps) * advantages)
    return -(surrogate * batch.loss_mask).sum() / max(token_total, 1.0)
