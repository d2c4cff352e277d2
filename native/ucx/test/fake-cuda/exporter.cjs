// A process that holds device allocations and exports them as CUDA IPC handles, as a training or
// inference framework does with its tensors: one JSON request per stdin line, one JSON answer per
// stdout line. Used by the CUDA IPC tests with the stand-in driver (ROBUSTRL_CUDA_DRIVER) and works the
// same on a real GPU.
//   {"op":"alloc","bytes":N,"fill":"<base64 of N bytes>" | "seed":S,"at":K} → {address, handle, offset, allocationBytes}
//       (an allocation of K+N bytes, the N from K on filled; the handle of the allocation, offset K in it)
//   {"op":"digest","address":A,"offset":O,"length":L}               → {sha256}
//   {"op":"copyBench","bytes":N,"iterations":I}                     → {gbPerSecond, via}
//   {"op":"read","address":A,"offset":O,"length":L}                 → {bytes: base64}
//   {"op":"write","address":A,"offset":O,"bytes":"<base64>"}         → {written: true}
//   {"op":"free","address":A}                                       → {freed: true}
'use strict';
const { cuda } = require('../../dist/ucx.js');

const device = Number(process.env.EXPORTER_DEVICE ?? 0);
/** Bytes from a seed (xorshift32), the same for every exporter: what a bucket should hold. */
function seeded(n, seed) {
  const b = Buffer.alloc(n);
  let x = (seed * 2654435761) >>> 0 || 1;
  for (let i = 0; i < n; i += 4) {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    b.writeUInt32LE(x, i <= n - 4 ? i : n - 4);
  }
  return b;
}
cuda.useDevice(device);
require('node:readline')
  .createInterface({ input: process.stdin })
  .on('line', (line) => {
    let out;
    try {
      const req = JSON.parse(line);
      if (req.op === 'alloc') {
        const at = req.at ?? 0;
        const a = cuda.alloc(device, at + req.bytes);
        if (req.fill) cuda.copyFromHost(a + BigInt(at), Buffer.from(req.fill, 'base64'));
        else if (req.seed !== undefined) cuda.copyFromHost(a + BigInt(at), seeded(req.bytes, req.seed));
        const e = cuda.ipcHandle(a + BigInt(at));
        out = { address: String(a), handle: e.handle.toString('base64'), offset: e.offset, allocationBytes: e.allocationBytes };
      } else if (req.op === 'read') {
        const b = Buffer.alloc(req.length);
        cuda.copyToHost(BigInt(req.address) + BigInt(req.offset), b);
        out = { bytes: b.toString('base64') };
      } else if (req.op === 'digest') {
        const b = Buffer.alloc(req.length);
        cuda.copyToHost(BigInt(req.address) + BigInt(req.offset ?? 0), b);
        out = { sha256: require('node:crypto').createHash('sha256').update(b).digest('hex') };
      } else if (req.op === 'copyBench') {
        // Device to device copies of `bytes`, `iterations` times: GB/s copied (the baseline of a pull).
        const src = cuda.alloc(device, req.bytes);
        const dst = cuda.alloc(device, req.bytes);
        cuda.copy(dst, src, req.bytes);
        const t0 = process.hrtime.bigint();
        for (let i = 0; i < req.iterations; i++) cuda.copy(dst, src, req.bytes);
        const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
        cuda.free(src);
        cuda.free(dst);
        out = { gbPerSecond: (req.bytes * req.iterations) / seconds / 1e9, via: 'cuMemcpyDtoD' };
      } else if (req.op === 'write') {
        cuda.copyFromHost(BigInt(req.address) + BigInt(req.offset), Buffer.from(req.bytes, 'base64'));
        out = { written: true };
      } else if (req.op === 'free') {
        cuda.free(BigInt(req.address));
        out = { freed: true };
      } else out = { error: `unknown op ${req.op}` };
    } catch (err) {
      out = { error: `${err.code ?? err.name}: ${err.message}` };
    }
    process.stdout.write(JSON.stringify(out) + '\n');
  });
