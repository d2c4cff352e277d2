"""The whole job on real processes: a vLLM engine and two torchrun ranks over gloo, then a resume."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from robustrl_grpo.config import JobConfig
from robustrl_grpo.ledger import Ledger
from robustrl_grpo.local import run_local

pytestmark = pytest.mark.engine


def test_the_job_trains_checkpoints_publishes_and_resumes_where_it_stopped(model_dir: Path, tmp_path: Path) -> None:
    cfg = JobConfig(steps=3, prompts_per_step=8, group_size=4, eval_every=3, eval_prompts=20, state_dir=str(tmp_path / "job"), model_dir=str(model_dir))
    run_local(cfg, ranks=2, log=lambda _: None)
    ledger = Ledger(cfg.state_dir)
    trained = ledger.records("trained")
    assert sorted((r["step"], r["rank"]) for r in trained) == [(s, r) for s in (1, 2, 3) for r in (0, 1)]
    # Both ranks trained every step on the same batch, each on its own half.
    for step in (1, 2, 3):
        rows = [r for r in trained if r["step"] == step]
        assert rows[0]["batch"] == rows[1]["batch"] and len(rows[0]["sampleIds"]) == 32
        assert sum(r["samples"] for r in rows) == 32
    assert [r["version"] for r in ledger.records("published")] == [0, 1, 2, 3]
    assert all(r["load"]["workers"][0]["tensors"] > 0 for r in ledger.records("published"))

    # Rank 0 killed between step 3's save and its ledger line: the line is missing, the checkpoint whole.
    saved_at_3 = next(r["digest"] for r in ledger.records("checkpoint") if r["step"] == 3)
    kept = [r for r in ledger.records() if not (r["kind"] == "checkpoint" and r["step"] == 3)]
    ledger.path.write_text("".join(json.dumps(r) + "\n" for r in kept))

    # A second run over the same state continues from step 3's checkpoint: model and optimizer state
    # equal what was saved, by digest, on both ranks; the missing line is written (marked recovered)
    # before either rank's "resumed" line, so a reader in order finds what each rank resumed.
    run_local(JobConfig(**{**cfg.__dict__, "steps": 5}), ranks=2, log=lambda _: None)
    records = Ledger(cfg.state_dir).records()
    resumed = [i for i, r in enumerate(records) if r["kind"] == "resumed"]
    recovered = [i for i, r in enumerate(records) if r["kind"] == "checkpoint" and r["step"] == 3]
    assert sorted(records[i]["rank"] for i in resumed) == [0, 1]
    assert len(recovered) == 1 and records[recovered[0]].get("recovered") is True and recovered[0] < min(resumed)
    assert all(records[i]["step"] == 3 and records[i]["digest"] == saved_at_3 for i in resumed + recovered)
    steps = sorted({r["step"] for r in Ledger(cfg.state_dir).records("trained")})
    assert steps == [1, 2, 3, 4, 5]
    assert [r["version"] for r in Ledger(cfg.state_dir).records("published")] == [0, 1, 2, 3, 3, 4, 5]
