"""``python -m robustrl_grpo <command>``: make-model, engine, trainer, local, agent-loops, verify-versions (examples/grpo/README.md)."""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from pathlib import Path
from typing import List, Optional

from .config import JobConfig


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m robustrl_grpo", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    make = commands.add_parser("make-model", help="write the base model (tokenizer, config, weights) to a folder")
    make.add_argument("directory")
    engine = commands.add_parser("engine", help="run the vLLM engine with robustrl's worker extension (replaces this process)")
    engine.add_argument("--port", type=int, default=int(os.environ.get("ROBUSTRL_GRPO_ENGINE_PORT", "8000")))
    engine.add_argument("--host", default=os.environ.get("ROBUSTRL_GRPO_ENGINE_HOST", "127.0.0.1"))
    for name, help_text in (
        ("trainer", "one trainer rank (under torchrun)"),
        ("local", "the whole job on this machine, without robustrl"),
        ("agent-loops", "every step's samples through robustrl's router, completed with their rewards"),
    ):
        sub = commands.add_parser(name, help=help_text)
        JobConfig.add_arguments(sub)
        if name == "local":
            sub.add_argument("--ranks", type=int, default=2)
    verify = commands.add_parser("verify-versions", help="recompute the log-probs of robustrl's training samples under the versions they are tagged with")
    verify.add_argument("samples", help="a JSON file: a list of training samples (the kept batch's 'sample' objects, each with its trajectoryId)")
    verify.add_argument("--tolerance", type=float, default=None)
    JobConfig.add_arguments(verify)
    engine_args = commands.choices["engine"]
    JobConfig.add_arguments(engine_args)
    args = parser.parse_args(argv)

    if args.command == "make-model":
        from .model import make_base_model

        make_base_model(Path(args.directory))
        return 0
    cfg = JobConfig.resolve(args)
    if args.command == "engine":
        from .engine import engine_command, engine_env

        if not cfg.model_dir:
            parser.error("engine: --model-dir (or ROBUSTRL_GRPO_MODEL_DIR) is required")
        command = engine_command(cfg.model_dir, args.port, args.host)
        os.execvpe(command[0], command, engine_env())
    if args.command == "trainer":
        from .trainer import run_trainer

        code = 0
        try:
            run_trainer(cfg)
        except BaseException:  # noqa: BLE001 - reported, and the exit code says it failed
            traceback.print_exc()
            code = 1
        # Everything the rank did is durable (checkpoints, the ledger's fsync'd lines): leave without the
        # interpreter's teardown, where torch's process-group destructors can deadlock on the GIL — a
        # rank that failed must exit (its supervisor acts on that), not hang.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    if args.command == "verify-versions":
        import json

        from .verify import DEFAULT_TOLERANCE, verify_versions

        if not cfg.model_dir or not cfg.state_dir:
            parser.error("verify-versions: --model-dir and --state-dir are required")
        with open(args.samples) as handle:
            samples = json.load(handle)
        tolerance = DEFAULT_TOLERANCE if args.tolerance is None else args.tolerance
        report = verify_versions(cfg.model_dir, cfg.state_dir, samples, tolerance)
        print(json.dumps({"tolerance": tolerance, **report.as_dict()}))
        return 0 if not report.mismatched and not report.missing_versions else 3
    if args.command == "agent-loops":
        import logging

        from .agent_loops import AgentLoops
        from .model import load_tokenizer

        logging.basicConfig(level=logging.INFO, format="%(asctime)s agent-loops %(levelname)s %(message)s")
        if not cfg.model_dir or not cfg.job_id:
            parser.error("agent-loops: --model-dir (for the tokenizer) and --job-id are required")
        token = os.environ.get("ROBUSTRL_GRPO_TOKEN") or None
        AgentLoops(cfg, cfg.job_id, cfg.router_url, cfg.request_manager_url, load_tokenizer(cfg.model_dir), token).run()
        return 0
    from .local import run_local

    result = run_local(cfg, ranks=args.ranks)
    for step, rate in result["evals"]:  # type: ignore[union-attr]
        print(f"step {step:>3}: greedy pass rate {rate:.2f}")
    # Preempted: EX_TEMPFAIL, "run again" (the state is saved; the next run resumes).
    return 75 if result["preempted"] is not None else 0


if __name__ == "__main__":
    sys.exit(main())
