"""Announce a job from Python, without the Node CLI (docs/integrators/job-start.md).

    from robustrl.jobs import start_job
    start_job("http://controller:8082", "job-42", trainers=2, rollouts=4, run_id="launch-1")

    python -m robustrl.jobs start --controller http://controller:8082 --job job-42 --trainers 2 --rollouts 4 --run-id launch-1

It posts to the controller's ``POST /v1/jobs/<job>/start``, which publishes ``JobStarted`` as
``robustrl job start`` does: the controller's escalation rules start from it (a fault in the first
iteration restarts the task) and the detector applies its windows to the job. The same ``run_id``
announces once however often a launcher retries. The controller's token, where its API asks for one:
``token=`` or ``ROBUSTRL_CONTROLLER_TOKEN``.
"""

import argparse
import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Dict, Optional, Sequence

__all__ = ["start_job", "JobStartError", "main"]

MODES = ("sync", "semi-sync", "async")
TOKEN_ENV = "ROBUSTRL_CONTROLLER_TOKEN"


class JobStartError(Exception):
    """The controller refused the announcement (``status``, its ``issues``) or could not be reached (``status`` None)."""

    def __init__(self, message: str, status: Optional[int] = None, issues: Optional[list] = None) -> None:
        self.status = status
        self.issues = list(issues or [])
        details = "; ".join("{}: {}".format(i.get("path"), i.get("message")) for i in self.issues if isinstance(i, dict))
        super().__init__("{} ({})".format(message, details) if details else message)


def start_job(
    controller_url: str,
    job_id: str,
    trainers: int,
    rollouts: int = 0,
    mode: str = "semi-sync",
    run_id: Optional[str] = None,
    resumed_from_step: Optional[int] = None,
    detection: Optional[Dict[str, float]] = None,
    token: Optional[str] = None,
    timeout: float = 10.0,
) -> Dict[str, Any]:
    """Announces ``job_id``; returns the controller's answer ``{accepted, eventId, jobId}``.

    ``detection``: the job's windows in seconds (``trainerIdleWindowSeconds``, ``agentSilentWindowSeconds``,
    ``rolloutSilentWindowSeconds``, ``probeTimeoutSeconds``, ``resumeGraceSeconds``). ``run_id`` defaults
    to the job id: one announcement per job unless the launcher names its runs."""
    if not isinstance(controller_url, str) or not controller_url.startswith(("http://", "https://")):
        raise ValueError("controller_url must start with http:// or https://, got {!r}".format(controller_url))
    if not isinstance(job_id, str) or not job_id.strip():
        raise ValueError("job_id must be a non-empty string")
    if mode not in MODES:
        raise ValueError("mode must be one of {}, got {!r}".format(", ".join(MODES), mode))
    body: Dict[str, Any] = {
        "mode": mode,
        "trainerMachines": trainers,
        "rolloutMachines": rollouts,
        "resumedFromStep": resumed_from_step,
        "runId": run_id or job_id,
    }
    if detection:
        body["detection"] = dict(detection)
    secret = token if token is not None else os.environ.get(TOKEN_ENV) or None
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if secret:
        headers["Authorization"] = "Bearer " + secret
    url = "{}/v1/jobs/{}/start".format(controller_url.rstrip("/"), urllib.parse.quote(job_id, safe=""))
    request = urllib.request.Request(url, data=json.dumps(body).encode("utf-8"), headers=headers, method="POST")
    # The controller is the cluster's own service: never route it through an HTTP(S)_PROXY of the environment.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(request, timeout=timeout) as response:
            return json.loads(response.read().decode("utf-8") or "{}")
    except urllib.error.HTTPError as err:
        raw = err.read()
        err.close()
        try:
            answer = json.loads(raw.decode("utf-8"))
        except ValueError:
            answer = {}
        raise JobStartError("the controller refused the job start: HTTP {}: {}".format(err.code, answer.get("error", err.reason)), err.code, answer.get("issues"))
    except (urllib.error.URLError, OSError) as err:
        raise JobStartError("the controller at {} could not be reached: {}".format(controller_url, getattr(err, "reason", err)))


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m robustrl.jobs", description="Announce a job to robustrl's controller.")
    commands = parser.add_subparsers(dest="command", required=True)
    start = commands.add_parser("start", help="announce a job (JobStarted)")
    start.add_argument("--controller", default=os.environ.get("ROBUSTRL_CONTROLLER_URL"), help="the controller's URL (ROBUSTRL_CONTROLLER_URL)")
    start.add_argument("--job", required=True)
    start.add_argument("--trainers", type=int, required=True)
    start.add_argument("--rollouts", type=int, default=0)
    start.add_argument("--mode", choices=MODES, default="semi-sync")
    start.add_argument("--run-id", default=None)
    start.add_argument("--resumed-from-step", type=int, default=None)
    windows = {
        "--trainer-idle-window": "trainerIdleWindowSeconds",
        "--rollout-silent-window": "rolloutSilentWindowSeconds",
        "--agent-silent-window": "agentSilentWindowSeconds",
        "--probe-timeout": "probeTimeoutSeconds",
        "--resume-grace": "resumeGraceSeconds",
    }
    for flag in windows:
        start.add_argument(flag, type=float, default=None, help="seconds")
    args = parser.parse_args(argv)
    if not args.controller:
        parser.error("--controller (or ROBUSTRL_CONTROLLER_URL) is required")
    detection = {field: getattr(args, flag[2:].replace("-", "_")) for flag, field in windows.items()}
    try:
        answer = start_job(
            args.controller,
            args.job,
            trainers=args.trainers,
            rollouts=args.rollouts,
            mode=args.mode,
            run_id=args.run_id,
            resumed_from_step=args.resumed_from_step,
            detection={k: v for k, v in detection.items() if v is not None},
        )
    except (JobStartError, ValueError) as err:
        print("robustrl.jobs: {}".format(err), file=sys.stderr)
        return 1
    print("announced job {} (event {})".format(answer.get("jobId", args.job), answer.get("eventId")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
