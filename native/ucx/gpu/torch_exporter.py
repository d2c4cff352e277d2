"""A framework's process on a GPU machine: holds PyTorch CUDA tensors and exports them to robustrl's
agent as CUDA IPC handles with clients/python/robustrl_weights.py — the same line protocol as
native/ucx/test/fake-cuda/exporter.cjs (one JSON request per stdin line, one JSON answer per line):

  {"op":"alloc","bytes":N,"seed":S,"at":K}     -> {address, handle, offset, allocationBytes}
        a uint8 tensor of K+N bytes filled from S (on the GPU); the handle names its bytes from K on
  {"op":"digest","address":A,"offset":O,"length":L} -> {sha256}   (of those bytes, copied to the host)
  {"op":"read","address":A,"offset":O,"length":L}   -> {bytes: base64}
  {"op":"write","address":A,"offset":O,"bytes":b64} -> {written: true}
  {"op":"free","address":A}                          -> {freed: true}
  {"op":"copyBench","bytes":N,"iterations":I}        -> {gbPerSecond, via}  (torch copy_, device to device)

Used by native/ucx/gpu/check.sh (via bench/dist/gpu-pull.js). Needs PyTorch with CUDA.
"""

import base64
import hashlib
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "clients", "python"))

import torch  # noqa: E402

import robustrl_weights  # noqa: E402

device = int(os.environ.get("EXPORTER_DEVICE", "0"))
torch.cuda.set_device(device)
held = {}


def answer(req):
    op = req.get("op")
    if op == "alloc":
        at = int(req.get("at", 0))
        t = torch.empty(at + int(req["bytes"]), dtype=torch.uint8, device="cuda:{}".format(device))
        g = torch.Generator(device=t.device)
        g.manual_seed(int(req.get("seed", 0)))
        t.random_(0, 256, generator=g)
        view = t[at:]
        held[t.data_ptr()] = t
        e = robustrl_weights.export_tensor(view)
        return {"address": str(t.data_ptr()), "handle": e["handle"], "offset": e["offset"], "allocationBytes": t.numel(), "device": e["device"]}
    if op in ("digest", "read", "write"):
        t = held[int(req["address"])]
        offset = int(req.get("offset", 0))
        if op == "write":
            data = torch.frombuffer(bytearray(base64.b64decode(req["bytes"])), dtype=torch.uint8)
            t[offset : offset + data.numel()].copy_(data.to(t.device))
            torch.cuda.synchronize()
            return {"written": True}
        host = t[offset : offset + int(req["length"])].cpu().numpy().tobytes()
        if op == "digest":
            return {"sha256": hashlib.sha256(host).hexdigest()}
        return {"bytes": base64.b64encode(host).decode("ascii")}
    if op == "free":
        held.pop(int(req["address"]), None)
        torch.cuda.empty_cache()
        return {"freed": True}
    if op == "copyBench":
        n, iterations = int(req["bytes"]), int(req["iterations"])
        src = torch.empty(n, dtype=torch.uint8, device="cuda:{}".format(device))
        dst = torch.empty_like(src)
        dst.copy_(src)
        torch.cuda.synchronize()
        started = time.perf_counter()
        for _ in range(iterations):
            dst.copy_(src)
        torch.cuda.synchronize()
        seconds = time.perf_counter() - started
        return {"gbPerSecond": n * iterations / seconds / 1e9, "via": "torch copy_"}
    return {"error": "unknown op {}".format(op)}


for line in sys.stdin:
    try:
        out = answer(json.loads(line))
    except Exception as exc:  # noqa: BLE001 - the harness reports it
        out = {"error": "{}: {}".format(type(exc).__name__, exc)}
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()
