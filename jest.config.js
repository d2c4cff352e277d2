// Tests run from TypeScript sources (swc, no type-check: `npm test` type-checks first with tsc -b).
// Tiers by file name: `*.spec.ts` unit (no external service), `*.int.spec.ts` integration against the
// real Kafka broker and PostgreSQL server (found via KAFKA_BROKERS / DATABASE_URL, else started by
// deploy/local/ scripts in the global setup).
const { readdirSync, existsSync } = require('node:fs');
const { join } = require('node:path');

// Every workspace package resolves to its TypeScript sources, by the name in its package.json.
const { workspaces } = require('./package.json');
const moduleNameMapper = {};
for (const pattern of workspaces) {
  const dirs = pattern.endsWith('/*') ? readdirSync(join(__dirname, pattern.slice(0, -2))).map((n) => join(pattern.slice(0, -2), n)) : [pattern];
  for (const dir of dirs) {
    const manifest = join(__dirname, dir, 'package.json');
    if (!existsSync(manifest) || !existsSync(join(__dirname, dir, 'src'))) continue;
    const { name } = require(manifest);
    moduleNameMapper[`^${name}$`] = `<rootDir>/${dir}/src`;
    moduleNameMapper[`^${name}/(.*)$`] = `<rootDir>/${dir}/src/$1`;
  }
}
moduleNameMapper['^@robustrl/ucx$'] = '<rootDir>/native/ucx/lib/ucx.ts';

const swc = [
  '@swc/jest',
  {
    jsc: {
      parser: { syntax: 'typescript', decorators: true },
      transform: { legacyDecorator: true, decoratorMetadata: true },
      target: 'es2022',
    },
    module: { type: 'commonjs' },
  },
];

// What the UCX facade sets before loading the addon (native/ucx/lib/ucx.ts, UCX_DEFAULT_ENV), set here
// for the test workers: a test's process.env is a copy that never reaches the C environment UCX reads,
// and UCX's memory hooks left on race with V8's threads (rare segfaults in the GC).
process.env.UCX_MEM_EVENTS ??= 'no';

const common = {
  rootDir: __dirname,
  transform: { '^.+\\.ts$': swc },
  moduleNameMapper,
  testPathIgnorePatterns: ['/node_modules/', '/dist/'],
  // Local servers' state (Kafka, PostgreSQL) is no source: never index it.
  modulePathIgnorePatterns: ['<rootDir>/.local/'],
  testEnvironment: 'node',
};

module.exports = {
  // Integration tests wait on real brokers (group joins, rebalances); unit tests finish far below this.
  testTimeout: 60_000,
  reporters: ['default', '<rootDir>/libs/testing/src/summary-reporter.js'],
  projects: [
    {
      ...common,
      displayName: 'unit',
      testMatch: ['<rootDir>/{libs,domain,native,services,sim,cli,bench,test}/**/*.spec.ts'],
      testPathIgnorePatterns: [...common.testPathIgnorePatterns, '\\.int\\.spec\\.ts$'],
    },
    {
      ...common,
      displayName: 'integration',
      testMatch: ['<rootDir>/{libs,domain,native,services,sim,cli,bench,test}/**/*.int.spec.ts'],
      globalSetup: '<rootDir>/libs/testing/src/global-setup.ts',
      globalTeardown: '<rootDir>/libs/testing/src/global-teardown.ts',
    },
  ],
};
