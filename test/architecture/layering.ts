import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { join, relative, resolve, sep } from 'node:path';
import * as ts from 'typescript';

/**
 * The dependency rules of the code base (docs/contributors/architecture.md "Layout"): arrows point down —
 *
 *   contracts, domain-kit  ←  domain/*  ←  sim, services/*  ←  services/embedded, cli, libs/harness  ←  bench, test
 *                              libs/* (infrastructure: bus, store, telemetry, service-kit, …) ← services/*
 *
 * Each layer names the workspace packages it may import; `pure` layers may not import the frameworks
 * and clients (NestJS, TypeORM, kafkajs, …) at all, so the domain and the simulator load without them.
 * Spec files are exempt (tests may reach anything); what a package ships is what is checked.
 */
export interface Layer {
  name: string;
  /** Workspace folders (relative to the repository root) in this layer; a trailing `/*` means every folder under it. */
  folders: readonly string[];
  /** Layers whose packages this layer may import (its own included when listed). */
  mayImport: readonly string[];
  /** No framework or client library (FORBIDDEN_IN_PURE_CODE) anywhere in the layer. */
  pure: boolean;
}

/** What pure code must never load: application frameworks, database and broker clients, cluster clients, telemetry SDKs. */
export const FORBIDDEN_IN_PURE_CODE: readonly RegExp[] = [
  /^@nestjs\//,
  /^typeorm/,
  /^kafkajs$/,
  /^@kubernetes\//,
  /^pg$/,
  /^@electric-sql\//,
  /^express$/,
  /^@opentelemetry\/sdk-/,
  /^prom-client$/,
];

export const LAYERS: readonly Layer[] = [
  { name: 'kernel', folders: ['libs/contracts', 'libs/domain-kit'], mayImport: ['kernel'], pure: true },
  { name: 'domain', folders: ['domain/*'], mayImport: ['kernel', 'domain'], pure: true },
  { name: 'native', folders: ['native/*'], mayImport: [], pure: true },
  // The configuration registry (docs/operators/configuration.md): what processes read from their environment.
  // The domain and the simulator read no environment, so they may not import it.
  { name: 'config', folders: ['libs/config'], mayImport: [], pure: true },
  {
    name: 'infrastructure',
    folders: ['libs/bus', 'libs/store', 'libs/telemetry', 'libs/service-kit', 'libs/orchestrator'],
    mayImport: ['kernel', 'config', 'infrastructure'],
    pure: false,
  },
  // Persistence shared by services: the trajectory store is written by the request manager's API and by the
  // router, which records turns in the store itself (docs/router.md "Recording").
  { name: 'stores', folders: ['libs/trajectory-store'], mayImport: ['kernel', 'config', 'domain', 'infrastructure'], pure: false },
  { name: 'simulator', folders: ['sim'], mayImport: ['kernel', 'domain'], pure: true },
  {
    name: 'services',
    folders: ['services/detector', 'services/controller', 'services/request-manager', 'services/rollout-manager', 'services/weight-registry', 'services/agent'],
    mayImport: ['kernel', 'config', 'domain', 'native', 'infrastructure', 'stores'],
    pure: false,
  },
  {
    name: 'composition',
    folders: ['services/embedded', 'cli'],
    mayImport: ['kernel', 'config', 'domain', 'native', 'infrastructure', 'stores', 'simulator', 'services', 'composition'],
    pure: false,
  },
  // What the chaos campaigns, the benches and the end-to-end tests run on (private infrastructure, hosts,
  // fault injection, engines): composes services and the simulator as composition does; no product package imports it.
  {
    name: 'harness',
    folders: ['libs/harness'],
    mayImport: ['kernel', 'config', 'domain', 'native', 'infrastructure', 'stores', 'simulator', 'services', 'harness'],
    pure: false,
  },
  // The benches and the campaigns' commands: entry points and measurements, on the harness.
  {
    name: 'benches',
    folders: ['bench'],
    mayImport: ['kernel', 'config', 'domain', 'native', 'infrastructure', 'stores', 'simulator', 'services', 'composition', 'harness', 'benches'],
    pure: false,
  },
  { name: 'test-support', folders: ['libs/testing'], mayImport: ['kernel', 'config', 'infrastructure', 'test-support'], pure: false },
];

export interface Violation {
  file: string;
  specifier: string;
  rule: string;
}

interface Workspace {
  dir: string;
  name: string;
  layer: Layer;
}

function workspacesOf(root: string, layers: readonly Layer[]): Workspace[] {
  const out: Workspace[] = [];
  for (const layer of layers) {
    for (const folder of layer.folders) {
      const parent = folder.endsWith('/*') ? folder.slice(0, -2) : null;
      const dirs = parent === null ? [folder] : existsSync(join(root, parent)) ? readdirSync(join(root, parent)).map((d) => join(parent, d)) : [];
      for (const dir of dirs) {
        let manifest: { name?: string };
        try {
          manifest = JSON.parse(readFileSync(join(root, dir, 'package.json'), 'utf8'));
        } catch {
          continue;
        }
        if (manifest.name) out.push({ dir, name: manifest.name, layer });
      }
    }
  }
  return out;
}

function sourceFiles(dir: string): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(dir)) {
    // spec-support/: helpers only specs import (the tsconfigs leave them out of the build), like the specs themselves.
    if (entry === 'node_modules' || entry === 'dist' || entry === 'build' || entry === 'spec-support') continue;
    const path = join(dir, entry);
    if (statSync(path).isDirectory()) out.push(...sourceFiles(path));
    else if (/\.(ts|js|mjs|cjs)$/.test(entry) && !/\.spec\.ts$|\.test\.mjs$|\.d\.ts$/.test(entry)) out.push(path);
  }
  return out;
}

/** The module specifiers a file imports, re-exports or requires (TypeScript's own pre-processor, no type-check). */
export function importsOf(source: string): string[] {
  return ts.preProcessFile(source, true, true).importedFiles.map((f) => f.fileName);
}

const packageOf = (specifier: string) => (specifier.startsWith('@') ? specifier.split('/').slice(0, 2).join('/') : specifier.split('/')[0]);
const isBuiltin = (specifier: string) => specifier.startsWith('node:') || builtinModules.includes(packageOf(specifier));

/** Every import in the shipped code of every workspace package that breaks a rule. */
export function checkLayering(root: string, layers: readonly Layer[] = LAYERS): Violation[] {
  const workspaces = workspacesOf(root, layers);
  const byName = new Map(workspaces.map((w) => [w.name, w]));
  const violations: Violation[] = [];
  for (const ws of workspaces) {
    const packageDir = resolve(root, ws.dir);
    for (const file of sourceFiles(packageDir)) {
      const rel = relative(root, file);
      for (const specifier of importsOf(readFileSync(file, 'utf8'))) {
        if (specifier.startsWith('.')) {
          // A relative import that leaves the package reaches around the package graph.
          const target = resolve(file, '..', specifier);
          if (!target.startsWith(packageDir + sep))
            violations.push({ file: rel, specifier, rule: `relative import out of ${ws.name}: import the package by name` });
          continue;
        }
        if (isBuiltin(specifier)) continue;
        const target = byName.get(packageOf(specifier));
        if (target) {
          if (target.name !== ws.name && !ws.layer.mayImport.includes(target.layer.name)) {
            violations.push({ file: rel, specifier, rule: `${ws.layer.name} (${ws.name}) may not import ${target.layer.name} (${target.name})` });
          }
          continue;
        }
        if (packageOf(specifier).startsWith('@robustrl/')) {
          violations.push({ file: rel, specifier, rule: `${specifier} is not a package of a known layer` });
          continue;
        }
        if (ws.layer.pure && FORBIDDEN_IN_PURE_CODE.some((re) => re.test(specifier))) {
          violations.push({ file: rel, specifier, rule: `${ws.layer.name} code must not load ${packageOf(specifier)}` });
        }
      }
    }
  }
  return violations;
}
