"""Whole-job preemption on real processes: every rank told to stop (SIGTERM to torchrun, as a scheduler
reclaiming the job signals it) saves the step in progress and stops; the resumed run trains on exactly
the prompts an uninterrupted run of the same seed trained on, step for step, and retries no step."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List

import pytest

from robustrl_grpo.checkpoint import is_complete, checkpoint_dir
from robustrl_grpo.config import JobConfig
from robustrl_grpo.ledger import Ledger
from robustrl_grpo.local import free_port
from robustrl_grpo.preemption import StepEndStop, rng_path

pytestmark = pytest.mark.engine

STEPS = 4


def _ranks(cfg: JobConfig, log: Path) -> subprocess.Popen:
    command = [
        sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
        "--master-addr", "127.0.0.1", "--master-port", str(free_port()), "-m", "robustrl_grpo", "trainer",
    ]  # fmt: skip
    return subprocess.Popen(command, env={**os.environ, **cfg.to_env(), "OMP_NUM_THREADS": "1"}, stdout=log.open("ab"), stderr=subprocess.STDOUT)


def _prompts_by_step(state_dir: str) -> Dict[int, List[str]]:
    out: Dict[int, List[str]] = {}
    for r in Ledger(state_dir).records("trained"):
        out.setdefault(r["step"], []).append(r["prompts"])
    return out


def test_a_preempted_job_resumes_on_the_prompts_an_uninterrupted_run_trains_on(model_dir: Path, engine, tmp_path: Path) -> None:
    base = dict(
        steps=STEPS, prompts_per_step=8, group_size=4, eval_every=100, eval_prompts=10, seed=7,
        model_dir=str(model_dir), engine_url=engine.url, on_sigterm="finish-step",
    )  # fmt: skip
    uninterrupted = JobConfig(**base, state_dir=str(tmp_path / "uninterrupted"))
    assert _ranks(uninterrupted, tmp_path / "uninterrupted.log").wait(timeout=900) == 0

    preempted = JobConfig(**base, state_dir=str(tmp_path / "preempted"))
    ranks = _ranks(preempted, tmp_path / "preempted.log")
    # The notice comes while step 1 or 2 is in progress: once rank 0 has trained step 1.
    deadline = time.monotonic() + 600
    while not any(r["step"] == 1 for r in Ledger(preempted.state_dir).records("trained")):
        assert ranks.poll() is None and time.monotonic() < deadline, (tmp_path / "preempted.log").read_text()[-3000:]
        time.sleep(0.05)
    ranks.send_signal(signal.SIGTERM)
    ranks.wait(timeout=120)

    stops = Ledger(preempted.state_dir).records("preempted")
    assert sorted(r["rank"] for r in stops) == [0, 1], (tmp_path / "preempted.log").read_text()[-3000:]
    saved = stops[0]["step"]
    assert all(r["step"] == saved and r["resumeStep"] == saved + 1 for r in stops)
    assert 1 <= saved < STEPS
    # The step in progress was finished and saved, and nothing after it begun; each rank's RNG state kept.
    assert is_complete(checkpoint_dir(preempted.state_dir, saved))
    assert max(_prompts_by_step(preempted.state_dir)) == saved
    assert all(rng_path(preempted.state_dir, saved, rank).exists() for rank in (0, 1))

    assert _ranks(preempted, tmp_path / "resumed.log").wait(timeout=900) == 0
    records = Ledger(preempted.state_dir).records()
    resumed = [r for r in records if r["kind"] == "resumed"]
    assert sorted((r["rank"], r["step"]) for r in resumed) == [(0, saved), (1, saved)]
    kept = {r["rank"]: r["rng"] for r in stops}
    assert all(r["rng"] == kept[r["rank"]] for r in resumed)
    # Each step trained once by each rank, and on the prompts the uninterrupted run trained it on.
    by_step = _prompts_by_step(preempted.state_dir)
    expected = _prompts_by_step(uninterrupted.state_dir)
    assert sorted(by_step) == list(range(1, STEPS + 1))
    assert all(len(by_step[s]) == 2 for s in by_step), by_step
    assert by_step == expected
    # Different steps draw different prompts: the comparison could fail.
    assert len({v[0] for v in expected.values()}) == STEPS


def test_without_finish_step_a_sigterm_keeps_its_default() -> None:
    before = signal.getsignal(signal.SIGTERM)
    assert StepEndStop("exit").agreed() is False
    assert signal.getsignal(signal.SIGTERM) == before
