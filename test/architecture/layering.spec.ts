import { execFileSync } from 'node:child_process';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { checkLayering, FORBIDDEN_IN_PURE_CODE, importsOf, LAYERS } from './layering';
import { scratchTree } from './scratch-tree';

const ROOT = join(__dirname, '..', '..');

describe('layering: dependency arrows point down', () => {
  it('no package imports a layer above it, and pure code loads no framework or client', () => {
    expect(checkLayering(ROOT)).toEqual([]);
  });

  it('every workspace package belongs to a layer', () => {
    const { workspaces } = require(join(ROOT, 'package.json')) as { workspaces: string[] };
    const layered = LAYERS.flatMap((l) => l.folders);
    for (const pattern of workspaces)
      expect({
        pattern,
        layered: layered.some((f) => f === pattern || f.startsWith(`${pattern}/`) || (pattern.endsWith('/*') && f.startsWith(pattern.slice(0, -1)))),
      }).toEqual({ pattern, layered: true });
  });

  it('sees imports, re-exports, requires and dynamic imports', () => {
    const src = "import a from 'a';\nexport * from 'b';\nconst c = require('c');\nvoid import('d');\nimport type { E } from 'e';";
    expect(importsOf(src).sort()).toEqual(['a', 'b', 'c', 'd', 'e']);
  });

  describe('flags what it is there to flag (a scratch tree)', () => {
    let root: string;
    beforeAll(() => {
      root = scratchTree('robustrl-layering-', {
        'libs/contracts/package.json': '{"name":"@x/contracts"}',
        'libs/contracts/src/index.ts': 'export const x = 1;\n',
        'domain/detector/package.json': '{"name":"@x/detector-domain"}',
        'domain/detector/src/index.ts': "import { Injectable } from '@nestjs/common';\nimport { y } from '@x/detector';\nimport { x } from '@x/contracts';\n",
        'domain/detector/src/ok.spec.ts': "import { y } from '@x/detector';\n",
        'services/detector/package.json': '{"name":"@x/detector"}',
        'services/detector/src/index.ts': 'export const y = 2;\n',
        'libs/bus/package.json': '{"name":"@x/bus"}',
        'libs/bus/src/index.ts':
          "import { y } from '@x/detector';\nimport { z } from '../../../services/detector/src/index';\nimport { Kafka } from 'kafkajs';\n",
      });
    });
    afterAll(() => rmSync(root, { recursive: true, force: true }));

    it('a domain module importing NestJS or a service, a lib importing a service or reaching out of its package', () => {
      const rules = checkLayering(root)
        .map((v) => `${v.file}: ${v.specifier}`)
        .sort();
      expect(rules).toEqual([
        'domain/detector/src/index.ts: @nestjs/common',
        'domain/detector/src/index.ts: @x/detector',
        'libs/bus/src/index.ts: ../../../services/detector/src/index',
        'libs/bus/src/index.ts: @x/detector',
      ]);
    });
  });
});

describe('the simulator loads without the services', () => {
  it('requiring the built @robustrl/sim loads no framework or client module', () => {
    const loaded: string[] = JSON.parse(
      execFileSync(process.execPath, ['-e', "require('@robustrl/sim'); process.stdout.write(JSON.stringify(Object.keys(require.cache)))"], {
        cwd: ROOT,
        encoding: 'utf8',
      }),
    );
    const packages = new Set(
      loaded.map((p) => /node_modules[\\/]((?:@[^\\/]+[\\/])?[^\\/]+)/.exec(p)?.[1]?.replace('\\', '/')).filter((p): p is string => !!p),
    );
    expect([...packages].filter((p) => FORBIDDEN_IN_PURE_CODE.some((re) => re.test(p)))).toEqual([]);
    expect([...packages].filter((p) => /^@robustrl\/(detector|controller|rollout-manager|weight-registry|request-manager|agent|embedded)$/.test(p))).toEqual(
      [],
    );
  });
});
