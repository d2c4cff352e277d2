// Tests run from TypeScript sources (swc, no type-check: `npm test` type-checks first with tsc -b).
// Tiers by file name: `*.spec.ts` unit (no external service), `*.int.spec.ts` integration against the
// real Kafka broker and PostgreSQL server (found via KAFKA_BROKERS / DATABASE_URL, else started by
// deploy/local/ scripts in the global setup).
const { readdirSync, existsSync } = require('node:fs');
const { join } = require('node:path');

const moduleNameMapper = {};
for (const root of ['libs', 'services']) {
  for (const name of readdirSync(join(__dirname, root))) {
    if (existsSync(join(__dirname, root, name, 'src'))) moduleNameMapper[`^@robustrl/${name}$`] = `<rootDir>/${root}/${name}/src`;
  }
}
moduleNameMapper['^@robustrl/cli$'] = '<rootDir>/cli/src';
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

const common = {
  rootDir: __dirname,
  transform: { '^.+\\.ts$': swc },
  moduleNameMapper,
  testPathIgnorePatterns: ['/node_modules/', '/dist/'],
  testEnvironment: 'node',
};

module.exports = {
  // Integration tests wait on real brokers (group joins, rebalances); unit tests finish far below this.
  testTimeout: 60_000,
  reporters: ['default', '<rootDir>/test/support/summary-reporter.js'],
  projects: [
    {
      ...common,
      displayName: 'unit',
      testMatch: ['<rootDir>/{libs,native,services,cli,test}/**/*.spec.ts'],
      testPathIgnorePatterns: [...common.testPathIgnorePatterns, '\\.int\\.spec\\.ts$'],
    },
    {
      ...common,
      displayName: 'integration',
      testMatch: ['<rootDir>/{libs,native,services,cli,test}/**/*.int.spec.ts'],
      globalSetup: '<rootDir>/test/support/global-setup.ts',
      globalTeardown: '<rootDir>/test/support/global-teardown.ts',
    },
  ],
};
