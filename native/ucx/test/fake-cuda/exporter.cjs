// A process that holds device allocations and exports them as CUDA IPC handles, as a training or
// inference framework does with its tensors: one JSON request per stdin line, one JSON answer per
// stdout line. Used by the CUDA IPC tests with the stand-in driver (ROBUSTRL_CUDA_DRIVER) and works the
// same on a real GPU.
//   {"op":"alloc","bytes":N,"fill":"<base64 of N bytes>","at":K} → {address, handle, offset, allocationBytes}
//       (the handle of the allocation, offset K in it)
//   {"op":"read","address":A,"offset":O,"length":L}                 → {bytes: base64}
//   {"op":"write","address":A,"offset":O,"bytes":"<base64>"}         → {written: true}
//   {"op":"free","address":A}                                       → {freed: true}
'use strict';
const { cuda } = require('../../dist/ucx.js');

const device = Number(process.env.EXPORTER_DEVICE ?? 0);
cuda.useDevice(device);
require('node:readline')
  .createInterface({ input: process.stdin })
  .on('line', (line) => {
    let out;
    try {
      const req = JSON.parse(line);
      if (req.op === 'alloc') {
        const a = cuda.alloc(device, req.bytes);
        if (req.fill) cuda.copyFromHost(a, Buffer.from(req.fill, 'base64'));
        const e = cuda.ipcHandle(a + BigInt(req.at ?? 0));
        out = { address: String(a), handle: e.handle.toString('base64'), offset: e.offset, allocationBytes: e.allocationBytes };
      } else if (req.op === 'read') {
        const b = Buffer.alloc(req.length);
        cuda.copyToHost(BigInt(req.address) + BigInt(req.offset), b);
        out = { bytes: b.toString('base64') };
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
