"""The reference job's ledger (``robustrl_reference``): ``<state dir>/ledger.jsonl``, everything a run did,
which the chaos campaign reads to check its invariants."""

import json
import os
import threading
import time
from typing import Any, Dict, List


class Ledger:
    """Append-only JSON lines, flushed and fsync'd per record: what survives a kill -9 is what happened."""

    def __init__(self, state_dir: str) -> None:
        os.makedirs(state_dir, exist_ok=True)
        self.path = os.path.join(state_dir, "ledger.jsonl")
        self._lock = threading.Lock()

    def append(self, kind: str, **fields: Any) -> None:
        line = json.dumps(dict(kind=kind, at=time.time(), pid=os.getpid(), **fields), sort_keys=True)
        with self._lock, open(self.path, "a", encoding="utf-8") as f:
            f.write(line + "\n")
            f.flush()
            os.fsync(f.fileno())

    @staticmethod
    def read(state_dir: str) -> List[Dict[str, Any]]:
        path = os.path.join(state_dir, "ledger.jsonl")
        if not os.path.exists(path):
            return []
        out = []
        with open(path, encoding="utf-8") as f:
            for line in f:
                line = line.strip()
                if line:
                    try:
                        out.append(json.loads(line))
                    except ValueError:
                        pass  # a line cut by a kill -9 mid-write: it did not happen
        return out
