"""The job's task: addition with a verifiable reward.

A prompt is ``a+b=`` with ``a`` and ``b`` drawn from ``0..max_operand``; the answer is the decimal sum
followed by the end-of-text token. The reward is 1.0 when the generated text (up to end of text) is
exactly the sum, else 0.0 — no partial credit, so the pass rate is the mean reward.

Prompts for a step are a pure function of (seed, step): every process of the job (agent loops, the
trainer checking its batch, a run repeated for comparison) derives the same ones without talking.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import List

__all__ = ["Problem", "problems_for_step", "eval_problems", "reward", "all_problems"]


@dataclass(frozen=True)
class Problem:
    a: int
    b: int

    @property
    def prompt(self) -> str:
        return f"{self.a}+{self.b}="

    @property
    def answer(self) -> str:
        return str(self.a + self.b)

    @property
    def key(self) -> str:
        return f"{self.a}+{self.b}"


def all_problems(max_operand: int) -> List[Problem]:
    return [Problem(a, b) for a in range(max_operand + 1) for b in range(max_operand + 1)]


def problems_for_step(seed: int, step: int, count: int, max_operand: int) -> List[Problem]:
    """The prompts of training step ``step`` (distinct within a step)."""
    if step < 1:
        raise ValueError(f"step must be >= 1, got {step}")
    pool = all_problems(max_operand)
    if count > len(pool):
        raise ValueError(f"{count} prompts asked for but only {len(pool)} problems exist with max_operand={max_operand}")
    rng = random.Random(f"robustrl-grpo/{seed}/step/{step}")
    return rng.sample(pool, count)


def eval_problems(max_operand: int, count: int, seed: int = 0) -> List[Problem]:
    """A fixed evaluation set (greedy pass rate), the same for every run with the same seed."""
    pool = all_problems(max_operand)
    rng = random.Random(f"robustrl-grpo/{seed}/eval")
    return rng.sample(pool, min(count, len(pool)))


def reward(problem: Problem, generated: str, finished_with_eos: bool) -> float:
    """1.0 for exactly the sum followed by end of text; 0.0 otherwise (a run-on answer fails)."""
    return 1.0 if finished_with_eos and generated.strip() == problem.answer else 0.0
