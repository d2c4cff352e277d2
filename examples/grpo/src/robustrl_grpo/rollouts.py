"""One step's batch: every prompt of the step sampled ``group_size`` times, each answer scored.

Seeds are derived from (job seed, step, prompt, sample), so a batch generated twice from the same
weights is the same batch — what lets a faulted run be compared with a fault-free one.
"""

from __future__ import annotations

import hashlib
from typing import List

from .config import JobConfig
from .engine import Completion, EngineSampler
from .grpo import Sample
from .task import Problem, eval_problems, problems_for_step, reward

__all__ = ["sample_seed", "sample_batch", "score", "greedy_pass_rate", "sample_id"]


def sample_seed(seed: int, step: int, prompt: int, sample: int) -> int:
    digest = hashlib.sha256(f"{seed}/{step}/{prompt}/{sample}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


def sample_id(step: int, prompt: int, sample: int) -> str:
    return f"s{step}-p{prompt}-g{sample}"


def score(problem: Problem, completion: Completion, eos_id: int) -> float:
    finished = completion.finish_reason == "stop" and bool(completion.token_ids) and completion.token_ids[-1] == eos_id
    return reward(problem, completion.text, finished)


def sample_batch(cfg: JobConfig, step: int, sampler: EngineSampler, tokenizer) -> List[Sample]:
    problems = problems_for_step(cfg.seed, step, cfg.prompts_per_step, cfg.max_operand)
    requests = []
    for p_index, problem in enumerate(problems):
        prompt_ids = tokenizer.encode(problem.prompt, add_special_tokens=False)
        for g in range(cfg.group_size):
            requests.append(
                {"prompt_ids": prompt_ids, "max_tokens": cfg.max_new_tokens, "temperature": cfg.temperature, "seed": sample_seed(cfg.seed, step, p_index, g)}
            )
    completions = sampler.complete_many(requests)
    samples = []
    for index, completion in enumerate(completions):
        p_index, g = divmod(index, cfg.group_size)
        problem = problems[p_index]
        samples.append(
            Sample(
                prompt_ids=completion.prompt_ids,
                response_ids=completion.token_ids,
                logprobs=completion.logprobs,
                reward=score(problem, completion, tokenizer.eos_token_id),
                group=problem.key,
                id=sample_id(step, p_index, g),
            )
        )
    return samples


def greedy_pass_rate(cfg: JobConfig, sampler: EngineSampler, tokenizer) -> float:
    problems = eval_problems(cfg.max_operand, cfg.eval_prompts, cfg.seed)
    requests = [
        {"prompt_ids": tokenizer.encode(p.prompt, add_special_tokens=False), "max_tokens": cfg.max_new_tokens, "temperature": 0.0, "seed": None}
        for p in problems
    ]
    # Temperature 0 is greedy decoding in vLLM: no seed needed.
    completions = sampler.complete_many(requests)
    scores = [score(p, c, tokenizer.eos_token_id) for p, c in zip(problems, completions)]
    return sum(scores) / len(scores)
