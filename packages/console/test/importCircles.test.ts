import { join } from 'node:path';
import madge from 'madge';

const root = join(__dirname, '..');

// Pages import their widgets from src/widgets.tsx, never from App.tsx (which imports every page), so the
// console's hand-written modules form no import circle; madge reads the same tsconfig the typecheck uses.
describe('the console modules', () => {
  it('import one another without a circle', async () => {
    const graph = await madge(join(root, 'src'), { fileExtensions: ['ts', 'tsx'], tsConfig: join(root, 'tsconfig.json') });
    expect(Object.keys(graph.obj()).length).toBeGreaterThan(40);
    expect(graph.circular()).toEqual([]);
  });
});

// The same for every service and package (issue 28): the four type-only pairs (bus memory/consumer,
// scheduler botLinks/reviewForm, recipientStore/outbox/finishEvent, gateway systemEmails/memberRoutes) are
// untied by naming the shared type where the importer can take it without a circle.
describe('the hand-written modules of every service and package', () => {
  it('import one another without a circle', async () => {
    const repo = join(root, '..', '..');
    const graph = await madge(['services', 'packages', 'proto/src'].map((dir) => join(repo, dir)), {
      fileExtensions: ['ts', 'tsx'],
      excludeRegExp: [/\/dist\//, /\/gen\//, /\/generated\//, /node_modules/, /\.d\.ts$/],
      tsConfig: join(repo, 'tsconfig.base.json'),
    });
    expect(Object.keys(graph.obj()).length).toBeGreaterThan(400);
    expect(graph.circular()).toEqual([]);
  }, 180_000);
});
