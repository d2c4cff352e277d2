"""One trainer rank of the GRPO job (``torchrun`` starts one per process; ranks meet over gloo).

Per step ``s``: take step ``s``'s batch, compute group-relative advantages over the whole batch, train
on this rank's share (DDP averages the gradients), save a distributed checkpoint, and publish weight
version ``s`` (each rank its shard of named tensors). A rank that starts where complete checkpoints
exist resumes from the newest: model *and* optimizer state, checked by digest in the ledger, and
publishes that version again (the engines may never have received it).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from datetime import timedelta
from typing import Dict, List, Optional, Protocol

import torch
import torch.distributed as dist
from robustrl_agent import AgentClient
from torch.nn.parallel import DistributedDataParallel

from . import checkpoint
from .config import JobConfig
from .engine import EngineSampler
from .grpo import Sample, group_advantages, grpo_loss, pack, token_logprobs
from .kept_batches import KeptBatches
from .ledger import Ledger
from .model import load_model, load_tokenizer
from .preemption import StepEndStop, prompt_digest, restore_rng, save_rng
from .publish import AgentPublisher, EnginePublisher, ShardWriter
from .reports import reports_for
from .rollouts import greedy_pass_rate, sample_batch

__all__ = ["BatchSource", "EngineBatches", "train_step", "batch_digest", "run_trainer"]

MAX_GRAD_NORM = 1.0


class BatchSource(Protocol):
    def batch(self, step: int) -> List[Sample]: ...

    def excluded(self, step: int) -> List[str]: ...

    def unusable(self, step: int) -> List[str]: ...


class EngineBatches:
    """The local job's batches: rank 0 samples the step from the engine (holding version ``s-1``) and
    sends every rank the same samples."""

    def __init__(self, cfg: JobConfig, sampler: EngineSampler, tokenizer, rank: int) -> None:
        self.cfg, self.sampler, self.tokenizer, self.rank = cfg, sampler, tokenizer, rank

    def excluded(self, step: int) -> List[str]:
        return []  # sampled from the engine holding version s-1: never stale

    def unusable(self, step: int) -> List[str]:
        return []  # sampled here, with their ids: always a sample

    def batch(self, step: int) -> List[Sample]:
        box: List[Optional[List[Sample]]] = [sample_batch(self.cfg, step, self.sampler, self.tokenizer) if self.rank == 0 else None]
        dist.broadcast_object_list(box, src=0)
        assert box[0] is not None
        return box[0]


def batch_digest(samples: List[Sample]) -> str:
    h = hashlib.sha256()
    for s in sorted(samples, key=lambda s: s.id):
        h.update(json.dumps([s.id, list(s.prompt_ids), list(s.response_ids), s.reward]).encode())
    return h.hexdigest()


def train_step(model: torch.nn.Module, optimizer: torch.optim.Optimizer, samples: List[Sample], rank: int, world: int, pad_id: int, clip_eps: float) -> Dict[str, float]:
    """One optimizer step on this rank's share of ``samples`` (every rank is given the whole batch)."""
    rewards = torch.tensor([s.reward for s in samples], dtype=torch.float32)
    advantages = group_advantages(rewards, [s.group for s in samples])
    mine = [i for i in range(len(samples)) if i % world == rank]
    token_total = float(sum(sum(s.loss_mask) if s.loss_mask is not None else len(s.response_ids) for s in samples))
    batch = pack([samples[i] for i in mine], pad_id, advantages[mine])
    logits = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits
    loss = grpo_loss(token_logprobs(logits, batch.input_ids), batch, clip_eps, token_total)
    optimizer.zero_grad(set_to_none=True)
    # DDP averages gradients over ranks; each rank's loss is its tokens' share of the batch's token
    # mean, so scaling by the world size makes the averaged gradient the whole batch's.
    (loss * world).backward()
    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), MAX_GRAD_NORM)
    optimizer.step()
    return {"loss": float(loss.item()), "gradNorm": float(grad_norm), "reward": float(rewards.mean()), "samples": float(len(mine))}


def run_trainer(cfg: JobConfig) -> None:
    rank, world = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
    if not cfg.state_dir or not cfg.model_dir:
        raise SystemExit("trainer: --state-dir and --model-dir are required")
    if (cfg.batches == "engine" or cfg.publish == "engine") and not cfg.engine_url:
        raise SystemExit("trainer: --engine-url is required to sample from or load into the engine itself (--batches engine / --publish engine)")
    # Before the group forms: a SIGTERM while it forms already finds the handler.
    preemption = StepEndStop(cfg.on_sigterm)
    dist.init_process_group("gloo", timeout=timedelta(seconds=600))
    torch.manual_seed(cfg.seed)
    ledger = Ledger(cfg.state_dir)
    tokenizer = load_tokenizer(cfg.model_dir)
    model = load_model(cfg.model_dir)
    model.train()
    ddp = DistributedDataParallel(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr)

    start = checkpoint.latest_complete(cfg.state_dir) or 0
    reports = reports_for(os.environ)
    reports.phase("initializing", start)
    if start:
        checkpoint.load(cfg.state_dir, start, model, optimizer)
        digest = checkpoint.state_digest(model, optimizer)
        # The checkpoint is the step's commit and its ledger line follows it: a rank 0 killed between
        # the two left a committed step the ledger does not show, written now (marked recovered).
        if rank == 0 and not any(r.get("step") == start for r in ledger.records("checkpoint")):
            ledger.append("checkpoint", step=start, digest=digest, recovered=True)
        # Every rank's "resumed" line follows that checkpoint line: a reader of the ledger in order (the
        # campaign's resume invariant) then finds the digest a rank resumed before the rank's line.
        dist.barrier()
        # After a preemption, the RNG state it kept: the resume continues the same stream.
        rng = restore_rng(cfg.state_dir, start, rank)
        ledger.append("resumed", rank=rank, step=start, digest=digest, **({"rng": rng} if rng else {}))
    # Evaluations ask an engine directly, or through robustrl's router (unrecorded: no trajectory headers).
    eval_url = cfg.engine_url or cfg.router_url
    # Through the router, "no engine yet" (503) is waited out; an engine asked directly fails at once.
    sampler = EngineSampler(eval_url, retry_seconds=0.0 if cfg.engine_url else 24 * 3600.0)
    # Where this machine's agent serves weight regions from (it names them relative to that folder).
    writer = ShardWriter(model, rank, world, cfg.bucket_bytes, cfg.state_dir, os.environ.get("ROBUSTRL_WEIGHTS_SHM_DIR") or "/dev/shm")
    publisher = (
        EnginePublisher(writer, cfg.engine_url)
        if cfg.publish == "engine"
        else AgentPublisher(writer, AgentClient(raise_on_error=True), keep=cfg.max_staleness + 1)
    )
    loaded = publisher.publish(start, start)
    # From here the rank does the job's work (the step-0 evaluation, then steps): its state is loaded and
    # published. The line is what a reader of the ledger alone (the campaign's observed ETTR) takes as
    # the rank being up.
    reports.phase("idle", start)
    ledger.append("ready", rank=rank, step=start)
    if rank == 0:
        ledger.append("published", version=start, step=start, shards=world, load=loaded)
        if start == 0 and eval_url:
            ledger.append("eval", step=0, version=0, passRate=greedy_pass_rate(cfg, sampler, tokenizer))
    batches: BatchSource = (
        EngineBatches(cfg, sampler, tokenizer, rank)
        if cfg.batches == "engine"
        else KeptBatches(cfg, cfg.job_id, cfg.request_manager_url, os.environ.get("ROBUSTRL_GRPO_TOKEN") or None)
    )

    last = start
    for step in range(start + 1, cfg.steps + 1):
        last = step
        began = time.monotonic()
        reports.phase("idle", step)  # waiting for the step's batch
        samples = batches.batch(step)
        with reports.training_step(step, f"step-{step}"):
            stats = train_step(ddp, optimizer, samples, rank, world, tokenizer.pad_token_id, cfg.clip_eps)
        ledger.append(
            "trained",
            rank=rank,
            step=step,
            batch=batch_digest(samples),
            prompts=prompt_digest(samples),
            sampleIds=sorted(s.id for s in samples),
            staleIds=batches.excluded(step),
            unusableIds=batches.unusable(step),
            **stats,
        )
        reports.phase("checkpoint", step)
        saving = time.monotonic()
        path = checkpoint.save(cfg.state_dir, step, model, optimizer, keep=cfg.keep_checkpoints)
        if rank == 0:
            ledger.append("checkpoint", step=step, digest=checkpoint.state_digest(model, optimizer))
            # Rank 0 returns from a DCP save after every rank wrote its part: the checkpoint is whole.
            reports.checkpoint_saved(step, path.resolve().as_uri(), int((time.monotonic() - saving) * 1000))
        reports.phase("weight-update", step)
        loaded = publisher.publish(step, step)
        if rank == 0:
            ledger.append("published", version=step, step=step, shards=world, load=loaded)
            line = f"step {step}/{cfg.steps}: reward {stats['reward']:.3f}, loss {stats['loss']:+.4f}"
            if eval_url and (step % cfg.eval_every == 0 or step == cfg.steps):
                # The engines generate the evaluation: meanwhile the rank waits on the rollout side, which
                # ETTR counts as waiting on a dead role when no engine serves (paper §7), not as work.
                reports.phase("idle", step)
                rate = greedy_pass_rate(cfg, sampler, tokenizer)
                ledger.append("eval", step=step, version=step, passRate=rate)
                line += f", greedy pass rate {rate:.2f}"
            print(f"{line} ({time.monotonic() - began:.1f} s)", flush=True)
        if step < cfg.steps and preemption.agreed():
            rng = save_rng(cfg.state_dir, step, rank)
            ledger.append("preempted", rank=rank, step=step, resumeStep=step + 1, rng=rng)
            if rank == 0:
                print(f"preempted after step {step}, saved: run again over {cfg.state_dir} to resume at step {step + 1}", flush=True)
            break
    reports.phase("idle", last)
    dist.barrier()
    # DDP's reducer holds the gloo group; released with the interpreter, its destructor joined a gloo
    # thread that waited for the GIL the finalizer held (a rank hung at exit, seen in about one run in
    # three). Released here, while the group is still registered, and the group destroyed explicitly.
    del ddp
    dist.destroy_process_group()
