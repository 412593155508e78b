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
