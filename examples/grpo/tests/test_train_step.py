"""One optimizer step on samples of the base model moves it the way the rewards say."""

from __future__ import annotations

from pathlib import Path

import torch

from robustrl_grpo.grpo import Sample, pack, token_logprobs
from robustrl_grpo.model import load_model, load_tokenizer
from robustrl_grpo.trainer import batch_digest, train_step


def _token_logprobs(model, sample: Sample, pad_id: int) -> list:
    batch = pack([sample], pad_id, torch.zeros(1))
    with torch.no_grad():
        lp = token_logprobs(model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits, batch.input_ids)
    return lp[0, len(sample.prompt_ids) :].tolist()


def _sequence_logprob(model, sample: Sample, pad_id: int) -> float:
    return sum(_token_logprobs(model, sample, pad_id))


def test_a_step_moves_probability_from_unrewarded_to_rewarded_answers(model_dir: Path) -> None:
    tokenizer = load_tokenizer(model_dir)
    model = load_model(model_dir)
    prompt = tokenizer.encode("3+4=", add_special_tokens=False)
    eos = tokenizer.eos_token_id
    right = tokenizer.encode("7", add_special_tokens=False) + [eos]
    wrong = tokenizer.encode("8", add_special_tokens=False) + [eos]
    samples = []
    for index, (answer, reward) in enumerate([(right, 1.0), (wrong, 0.0), (right, 1.0), (wrong, 0.0)]):
        # On-policy: the sampling policy's log-probs are the model's own.
        probe = Sample(prompt, answer, [0.0] * len(answer), reward, "3+4", f"s{index}")
        samples.append(Sample(prompt, answer, _token_logprobs(model, probe, tokenizer.pad_token_id), reward, "3+4", f"s{index}"))
    before = {s.id: _sequence_logprob(model, s, tokenizer.pad_token_id) for s in samples[:2]}
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    stats = train_step(model, optimizer, samples, rank=0, world=1, pad_id=tokenizer.pad_token_id, clip_eps=0.2)
    after = {s.id: _sequence_logprob(model, s, tokenizer.pad_token_id) for s in samples[:2]}
    # What the objective promises is the margin: the rewarded answer gains on the unrewarded one (each
    # alone may move either way, as Adam's first step moves every weight by about the learning rate).
    assert after["s0"] - after["s1"] > before["s0"] - before["s1"] + 0.05
    assert stats["reward"] == 0.5 and stats["samples"] == 4


def test_ranks_split_the_batch_and_together_cover_it() -> None:
    samples = [Sample([1], [2], [-1.0], float(i % 2), f"g{i // 4}", f"s{i}") for i in range(10)]
    shares = [[i for i in range(len(samples)) if i % 3 == rank] for rank in range(3)]
    assert sorted(sum(shares, [])) == list(range(10))
    # The batch digest does not depend on the order samples arrive in.
    assert batch_digest(samples) == batch_digest(list(reversed(samples)))
