"""Distributed checkpoints with two gloo ranks in subprocesses (as torchrun runs them)."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from robustrl_grpo import checkpoint


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _model(seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))


def _rank(rank: int, world: int, port: int, state_dir: str, out: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        model = _model(0)
        ddp = torch.nn.parallel.DistributedDataParallel(model)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
        for _ in range(3):  # optimizer state worth checking (moments, step counts)
            loss = ddp(torch.randn(4, 8)).pow(2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        saved = checkpoint.state_digest(model, optimizer)
        for old in (1, 2):  # older checkpoints: only the newest two are kept below
            checkpoint.save(state_dir, old, model, optimizer, keep=2)
        checkpoint.save(state_dir, 3, model, optimizer, keep=2)
        # A different model and a fresh optimizer, loaded from the checkpoint.
        other = _model(1)
        other_optimizer = torch.optim.AdamW(other.parameters(), lr=1e-2)
        other_ddp = torch.nn.parallel.DistributedDataParallel(other)
        other_ddp(torch.randn(1, 8)).sum().backward()
        other_optimizer.step()
        before = checkpoint.state_digest(other, other_optimizer)
        checkpoint.load(state_dir, 3, other, other_optimizer)
        loaded = checkpoint.state_digest(other, other_optimizer)
        Path(out, f"rank{rank}.json").write_text(json.dumps({"saved": saved, "before": before, "loaded": loaded}))
        # DDP's reducers go before the group, as the trainer does (a gloo destructor at interpreter
        # teardown can deadlock on the GIL).
        del ddp, other_ddp
    finally:
        dist.destroy_process_group()
    os._exit(0)


def test_two_ranks_save_and_load_model_and_optimizer_state(tmp_path: Path) -> None:
    state, out = tmp_path / "state", tmp_path / "out"
    out.mkdir()
    mp.start_processes(_rank, args=(2, _free_port(), str(state), str(out)), nprocs=2, join=True, start_method="spawn")
    results = [json.loads((out / f"rank{r}.json").read_text()) for r in range(2)]
    for result in results:
        assert result["loaded"] == result["saved"]
        assert result["before"]["params"] != result["saved"]["params"]
        assert result["before"]["optimizer"] != result["saved"]["optimizer"]
    # DDP keeps the ranks identical: both digests agree.
    assert results[0]["saved"] == results[1]["saved"]
    assert checkpoint.latest_complete(str(state)) == 3
    assert sorted(p.name for p in (state / "checkpoints").iterdir()) == ["step-000002", "step-000003"]


def test_a_checkpoint_without_its_metadata_is_not_complete(tmp_path: Path) -> None:
    partial = checkpoint.checkpoint_dir(str(tmp_path), 5)
    partial.mkdir(parents=True)
    (partial / "__0_0.distcp").write_bytes(b"half a rank's write")
    assert checkpoint.latest_complete(str(tmp_path)) is None
    done = checkpoint.checkpoint_dir(str(tmp_path), 4)
    done.mkdir(parents=True)
    (done / ".metadata").write_bytes(b"x")
    assert checkpoint.latest_complete(str(tmp_path)) == 4
    with pytest.raises(FileNotFoundError, match="step 5 is not complete"):
        checkpoint.load(str(tmp_path), 5, torch.nn.Linear(1, 1), torch.optim.SGD(torch.nn.Linear(1, 1).parameters(), lr=1))
