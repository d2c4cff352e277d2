#!/usr/bin/env node
// `npm install` hook of @robustrl/ucx: builds the addon with node-gyp against the *installed* Node headers
// (no header download), against UCX when pkg-config finds it. It never fails the install: without UCX, or
// if the real build fails, it builds the stub, which loads and reports `available: false` with the reason;
// the agent then refuses weight work with that message. `deploy/local/ucx.sh install` installs Debian's
// UCX and rebuilds. ROBUSTRL_UCX_PREFIX builds against another UCX (a CUDA-enabled wheel: ucx-config.sh).
'use strict';
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const root = path.join(__dirname, '..');
const say = (msg) => process.stderr.write(`[@robustrl/ucx] ${msg}\n`);

/** The Node installation prefix that holds include/node/node_api.h (e.g. /usr or ~/.nvm/versions/node/vX). */
function nodeHeadersDir() {
  const candidates = [process.env.npm_config_nodedir, path.resolve(path.dirname(process.execPath), '..')].filter(Boolean);
  return candidates.find((dir) => fs.existsSync(path.join(dir, 'include', 'node', 'node_api.h'))) ?? null;
}

function nodeGyp(nodedir, extraEnv) {
  let script;
  try {
    script = require.resolve('node-gyp/bin/node-gyp.js');
  } catch {
    return { ok: false, why: 'node-gyp is not installed' };
  }
  const r = spawnSync(process.execPath, [script, 'rebuild', `--nodedir=${nodedir}`], {
    cwd: root,
    stdio: ['ignore', 'pipe', 'pipe'],
    encoding: 'utf8',
    env: { ...process.env, ...extraEnv },
  });
  const log = `${r.stdout ?? ''}${r.stderr ?? ''}`;
  return r.status === 0 ? { ok: true, log } : { ok: false, why: `node-gyp exited with ${r.status ?? r.signal}`, log };
}

function main() {
  if (process.env.ROBUSTRL_UCX_SKIP_BUILD === '1') return say('ROBUSTRL_UCX_SKIP_BUILD=1: not building the addon');
  const nodedir = nodeHeadersDir();
  if (!nodedir) {
    return say(`no Node headers next to ${process.execPath} (include/node/node_api.h): addon not built; weight transfer unavailable`);
  }
  const config = (what) => spawnSync('sh', [path.join(__dirname, 'ucx-config.sh'), what], { encoding: 'utf8' }).stdout.trim();
  const prefix = process.env.ROBUSTRL_UCX_PREFIX;
  const hasUcx = config('have') === '1';
  if (!hasUcx)
    say(
      prefix
        ? `no UCX in ROBUSTRL_UCX_PREFIX=${prefix} (expected lib/pkgconfig/ucx.pc there); building the stub`
        : 'UCX not found by pkg-config (install it: bash deploy/local/ucx.sh install); building the stub',
    );
  const real = nodeGyp(nodedir, {});
  const against = `UCX ${config('version')}${prefix ? ` from ${prefix}` : ''}`;
  if (real.ok) return say(hasUcx ? `built build/Release/ucx.node against ${against}` : 'built the stub (UCX unavailable)');
  say(`the addon build failed (${real.why}); building the stub instead. Build log:\n${real.log ?? ''}`);
  const stub = nodeGyp(nodedir, { ROBUSTRL_UCX_STUB: '1' });
  if (!stub.ok) say(`the stub build failed too (${stub.why}): the facade will report the addon unloadable.\n${stub.log ?? ''}`);
}

main();
