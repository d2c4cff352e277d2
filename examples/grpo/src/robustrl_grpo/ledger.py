"""The job's own record: one JSON object per line, appended and fsync'd by whichever process acts.

It is what the job did, written by the job (not by robustrl): steps trained (with the samples they used
and the parameters' digest), checkpoints, published versions, evaluations. A campaign checks robustrl's
claims against it; a person reads it to see the run.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List

__all__ = ["Ledger"]


class Ledger:
    def __init__(self, state_dir: str) -> None:
        self.path = Path(state_dir) / "ledger.jsonl"

    def append(self, kind: str, **fields: Any) -> Dict[str, Any]:
        record = {"kind": kind, "at": time.time(), "pid": os.getpid(), **fields}
        line = (json.dumps(record, sort_keys=True) + "\n").encode()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # O_APPEND: each line lands whole even with several processes appending; fsync: a line a crash
        # would lose was never claimed.
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
            os.fsync(fd)
        finally:
            os.close(fd)
        return record

    def records(self, kind: str = "") -> List[Dict[str, Any]]:
        return [r for r in self._read() if not kind or r.get("kind") == kind]

    def _read(self) -> Iterator[Dict[str, Any]]:
        if not self.path.exists():
            return
        with self.path.open() as handle:
            for line in handle:
                line = line.strip()
                if line:
                    try:
                        yield json.loads(line)
                    except json.JSONDecodeError:
                        # A torn last line of a process killed mid-write: skipped, never half-read.
                        continue
