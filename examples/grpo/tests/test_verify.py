"""Recomputing log-probs under the tagged version: right tags pass, a wrong tag is caught."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import torch
import torch.distributed as dist

from robustrl_grpo import checkpoint
from robustrl_grpo.grpo import token_logprobs
from robustrl_grpo.model import load_model
from robustrl_grpo.verify import verify_versions


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _logprobs(model: torch.nn.Module, ids: list) -> list:
    with torch.no_grad():
        t = torch.tensor([ids])
        return token_logprobs(model(input_ids=t, attention_mask=torch.ones_like(t)).logits, t)[0].tolist()


def test_tokens_match_their_version_and_not_the_neighbour(model_dir: Path, tmp_path: Path) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()))
    dist.init_process_group("gloo", rank=0, world_size=1)
    try:
        model = load_model(model_dir)
        optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
        ids = [3, 4, 5, 6, 7, 8, 9, 10]
        t = torch.tensor([ids])
        loss = -token_logprobs(model(input_ids=t, attention_mask=torch.ones_like(t)).logits, t).sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        checkpoint.save(str(tmp_path), 1, model, optimizer, keep=0)
    finally:
        dist.destroy_process_group()

    prompt, response = ids[:4], ids[4:]
    trained = load_model(model_dir)
    trained.load_state_dict(model.state_dict())
    under_1 = _logprobs(trained.eval(), ids)[4:]
    sample = {"trajectoryId": "t-1", "promptTokenIds": prompt, "responseTokenIds": response, "logprobs": under_1, "versions": [1] * 4, "lossMask": [1] * 4}

    right = verify_versions(str(model_dir), str(tmp_path), [sample])
    assert right.tokens == 4 and right.mismatched == [] and right.max_diff < 1e-4
    assert right.neighbour_tokens == 4 and right.discriminating >= 1  # where version 0 would not have passed for 1

    wrong = verify_versions(str(model_dir), str(tmp_path), [{**sample, "versions": [0] * 4}])
    assert len(wrong.mismatched) == 4

    gone = verify_versions(str(model_dir), str(tmp_path), [{**sample, "versions": [2] * 4}])
    assert gone.missing_versions == [2] and gone.tokens == 0
