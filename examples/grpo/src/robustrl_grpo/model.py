"""The job's model: a small Qwen2-shaped causal LM built locally, then given a short supervised warm-up.

RL post-training starts from a model that already follows the task's format and is right some of the
time; a random-weight model would almost never earn a reward, so GRPO (which learns from the spread of
rewards within a group) would have nothing to learn from. ``make_base_model`` plays the pre-training
step: a hundred-odd supervised steps, leaving a base model that writes a number and stops, right on
some samples and wrong on others. Everything is seeded: the same seed makes
the same bytes.
"""

from __future__ import annotations

import json
import random
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import List

import torch

from .task import Problem, all_problems
from .vocab import EOS, build_tokenizer

__all__ = ["ModelShape", "make_base_model", "load_model", "load_tokenizer"]


@dataclass(frozen=True)
class ModelShape:
    hidden: int = 128
    layers: int = 2
    heads: int = 4
    kv_heads: int = 2
    intermediate: int = 256
    max_positions: int = 64


@dataclass(frozen=True)
class WarmUp:
    """The supervised warm-up that makes the base model."""

    seed: int = 0
    max_operand: int = 9
    # Share of the problems the warm-up sees (the rest the base model has to get right by itself).
    seen_fraction: float = 1.0
    # Few enough steps that the base model is right on some samples and wrong on others (measured:
    # greedy pass rate about 0.6, sampled about 0.3), which is where GRPO has something to learn.
    steps: int = 120
    batch: int = 32
    lr: float = 3e-3


def _config(tokenizer, shape: ModelShape):
    from transformers import Qwen2Config

    return Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=shape.hidden,
        num_hidden_layers=shape.layers,
        num_attention_heads=shape.heads,
        num_key_value_heads=shape.kv_heads,
        intermediate_size=shape.intermediate,
        max_position_embeddings=shape.max_positions,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        torch_dtype="float32",
    )


def _sequences(tokenizer, problems: List[Problem]) -> List[List[int]]:
    return [tokenizer.encode(p.prompt + p.answer, add_special_tokens=False) + [tokenizer.eos_token_id] for p in problems]


def make_base_model(directory: Path, shape: ModelShape = ModelShape(), warm_up: WarmUp = WarmUp(), log=print) -> Path:
    """Writes tokenizer, config and weights (safetensors) to ``directory``; returns it."""
    from transformers import Qwen2ForCausalLM

    torch.manual_seed(warm_up.seed)
    rng = random.Random(warm_up.seed)
    tokenizer = build_tokenizer()
    model = Qwen2ForCausalLM(_config(tokenizer, shape))
    problems = all_problems(warm_up.max_operand)
    rng.shuffle(problems)
    seen = problems[: max(1, int(len(problems) * warm_up.seen_fraction))]
    sequences = _sequences(tokenizer, seen)
    optimizer = torch.optim.AdamW(model.parameters(), lr=warm_up.lr)
    model.train()
    for step in range(warm_up.steps):
        rows = [sequences[rng.randrange(len(sequences))] for _ in range(warm_up.batch)]
        width = max(len(r) for r in rows)
        ids = torch.full((len(rows), width), tokenizer.pad_token_id, dtype=torch.long)
        labels = torch.full((len(rows), width), -100, dtype=torch.long)
        for i, row in enumerate(rows):
            ids[i, : len(row)] = torch.tensor(row)
            prompt_len = row.index(tokenizer.convert_tokens_to_ids("=")) + 1
            labels[i, prompt_len : len(row)] = torch.tensor(row[prompt_len:])
        loss = model(input_ids=ids, attention_mask=(ids != tokenizer.pad_token_id).long(), labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if (step + 1) % 100 == 0:
            log(f"warm-up step {step + 1}/{warm_up.steps}: loss {loss.item():.3f}")
    model.eval()
    directory.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(directory), safe_serialization=True)
    tokenizer.save_pretrained(str(directory))
    (directory / "robustrl-grpo.json").write_text(
        json.dumps({"shape": asdict(shape), "warmUp": asdict(warm_up), "eos": EOS}, indent=2) + "\n"
    )
    return directory


def load_tokenizer(directory: Path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(directory))


def load_model(directory: Path):
    from transformers import Qwen2ForCausalLM

    return Qwen2ForCausalLM.from_pretrained(str(directory), dtype=torch.float32)
