// One jest run over every workspace. TypeScript is transpiled by swc; types are checked by `npm run typecheck`.
const services = ['gateway', 'contacts', 'cascade-scheduler', 'channel-email', 'channel-sms', 'channel-messenger', 'webhooks', 'connectors'];

/** @type {import('jest').Config} */
module.exports = {
  testEnvironment: 'node',
  rootDir: __dirname,
  roots: ['<rootDir>/proto', '<rootDir>/packages', '<rootDir>/services', '<rootDir>/test'],
  testMatch: ['**/test/**/*.test.ts'],
  transform: { '^.+\\.ts$': ['@swc/jest', { jsc: { target: 'es2022', parser: { syntax: 'typescript' }, keepClassNames: true }, module: { type: 'commonjs' } }] },
  moduleNameMapper: {
    '^@rrs/proto$': '<rootDir>/proto/src/index.ts',
    [`^@rrs/(${services.join('|')})$`]: '<rootDir>/services/$1/src/index.ts',
    '^@rrs/([a-z-]+)$': '<rootDir>/packages/$1/src/index.ts',
  },
  modulePathIgnorePatterns: ['<rootDir>/.*/dist/', '<rootDir>/.data/'],
  testTimeout: 60_000,
  maxWorkers: 2,
};
