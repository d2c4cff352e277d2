#!/usr/bin/env node
'use strict';
/**
 * The image's entrypoint: `<image> <service> [args…]` starts one robustrl process by name, in this
 * process — so it is PID 1 and receives SIGTERM itself: every service drains on it (in-flight handlers
 * finish and commit, consumers leave their groups), then exits.
 *
 * The table is the whole list of what the image runs; an unknown name stops with the list.
 */
const { existsSync } = require('node:fs');
const path = require('node:path');

// The app's root: beside this file in the image (/opt/robustrl), two levels up in a checkout.
const ROOT = existsSync(path.join(__dirname, 'services')) ? __dirname : path.join(__dirname, '..', '..');
const PROCESSES = {
  embedded: { main: 'services/embedded/dist/main.js', what: 'the main job on embedded defaults (no servers)' },
  detector: { main: 'services/detector/dist/main.js', what: 'fault detection' },
  controller: { main: 'services/controller/dist/main.js', what: 'recovery decisions and execution, ETTR' },
  'request-manager': { main: 'services/request-manager/dist/main.js', what: 'the trajectory store' },
  'rollout-manager': { main: 'services/rollout-manager/dist/main.js', what: 'rollout pool and the router' },
  'weight-registry': { main: 'services/weight-registry/dist/main.js', what: 'weight versions and pull scheduling' },
  agent: { main: 'services/agent/dist/main.js', what: 'the GPU machine agent (one per machine)' },
  robustrl: { main: 'cli/bin/robustrl.js', what: 'the CLI (tail, job start, identity, simulate)' },
};

function usage() {
  const width = Math.max(...Object.keys(PROCESSES).map((k) => k.length));
  const lines = Object.entries(PROCESSES).map(([name, p]) => `  ${name.padEnd(width)}  ${p.what}`);
  return `usage: <image> <process> [args…]\n\nprocesses:\n${lines.join('\n')}\n`;
}

const [name, ...args] = process.argv.slice(2);
if (!name || name === '--help' || name === '-h' || name === 'help') {
  process.stdout.write(usage());
  process.exit(name ? 0 : 64);
}
const chosen = Object.prototype.hasOwnProperty.call(PROCESSES, name) ? PROCESSES[name] : undefined;
if (!chosen) {
  process.stderr.write(`unknown process '${name}'\n\n${usage()}`);
  process.exit(64);
}
// The process sees its own arguments as if started directly (`node main.js args…`).
process.argv = [process.argv[0], path.join(ROOT, chosen.main), ...args];
require(path.join(ROOT, chosen.main));
