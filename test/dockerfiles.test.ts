// Static checks of the images' Dockerfiles: no Docker engine is needed, so they run everywhere the
// other tests do. What they can't check (that the packed folder starts) scripts/smoke-images.mjs does.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

const root = join(__dirname, '..');

interface Instruction {
  op: string;
  args: string;
  line: number;
}

interface Stage {
  from: string;
  name?: string;
  instructions: Instruction[];
}

/** Instructions grouped by stage; continuation lines joined, comments and parser directives dropped. */
function parseDockerfile(text: string): Stage[] {
  const stages: Stage[] = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const start = i;
    let line = lines[i];
    if (/^\s*(#|$)/.test(line)) continue;
    while (/\\\s*$/.test(line) && i + 1 < lines.length) {
      i++;
      if (/^\s*#/.test(lines[i])) continue;
      line = line.replace(/\\\s*$/, ' ') + lines[i].trim();
    }
    const m = /^\s*([A-Za-z]+)\s+(.*)$/.exec(line);
    if (!m) throw new Error(`line ${start + 1}: cannot parse ${JSON.stringify(line)}`);
    const op = m[1].toUpperCase();
    const args = m[2].trim();
    if (op === 'FROM') {
      const f = /^(?:--platform=\S+\s+)?(\S+)(?:\s+AS\s+(\S+))?$/i.exec(args);
      if (!f) throw new Error(`line ${start + 1}: cannot parse FROM ${args}`);
      stages.push({ from: f[1], name: f[2]?.toLowerCase(), instructions: [] });
    } else {
      if (!stages.length) throw new Error(`line ${start + 1}: ${op} before FROM`);
      stages[stages.length - 1].instructions.push({ op, args, line: start + 1 });
    }
  }
  return stages;
}

const ops = (stage: Stage, op: string) => stage.instructions.filter((i) => i.op === op);

/** Node's LTS lines are the even majors; 22 and 24 are the ones in support. */
const LTS_SLIM = /^node:(22|24)(\.\d+){0,2}-(bookworm|trixie)-slim(@sha256:[0-9a-f]{64})?$/;

const images = [
  ...readdirSync(join(root, 'services'), { withFileTypes: true })
    .filter((d) => d.isDirectory() && existsSync(join(root, 'services', d.name, 'package.json')))
    .map((d) => ({ name: d.name, dockerfile: `services/${d.name}/Dockerfile` })),
  { name: 'all-in-one', dockerfile: 'packages/all-in-one/Dockerfile' },
];

describe('.dockerignore', () => {
  const ignore = readFileSync(join(root, '.dockerignore'), 'utf8').split('\n').map((l) => l.trim());

  it('keeps host installs, build output, local data, git and credentials out of the build context', () => {
    for (const pattern of ['**/node_modules', '**/dist', '.data', '.git', '**/.env', '**/.npmrc', '**/*.log', '**/coverage']) {
      expect(ignore).toContain(pattern);
    }
  });
});

describe.each(images)('$dockerfile', ({ name, dockerfile }) => {
  const path = join(root, dockerfile);
  const stages = existsSync(path) ? parseDockerfile(readFileSync(path, 'utf8')) : [];
  const runtime = stages[stages.length - 1];
  const build = stages.find((s) => s.name === 'build');

  it('exists', () => {
    expect(existsSync(path)).toBe(true);
  });

  it('is multi-stage: a named build stage and a separate runtime stage', () => {
    expect(stages.length).toBeGreaterThanOrEqual(2);
    expect(build).toBeDefined();
    expect(runtime).not.toBe(build);
    expect(runtime.name).not.toBe('build');
  });

  it('bases every stage on a slim Node LTS image, the same one throughout', () => {
    const stageNames = new Set(stages.map((s) => s.name).filter(Boolean));
    const bases = stages.map((s) => s.from).filter((f) => !stageNames.has(f.toLowerCase()));
    expect(bases.length).toBeGreaterThan(0);
    for (const base of bases) expect(base).toMatch(LTS_SLIM);
    expect(new Set(bases).size).toBe(1);
    expect(runtime.from).toMatch(LTS_SLIM);
  });

  it(`packs its own workspace (${name}) into /out in the build stage`, () => {
    const runs = ops(build!, 'RUN').map((r) => r.args);
    const packs = runs.map((r) => /node scripts\/pack-service\.mjs\s+(\S+)\s+(\S+)/.exec(r)).filter((m): m is RegExpExecArray => m !== null);
    expect(packs).toHaveLength(1);
    expect(packs[0][1]).toBe(name);
    expect(packs[0][2]).toBe('/out');
    const ci = runs.findIndex((r) => /\bnpm ci\b/.test(r));
    const buildStep = runs.findIndex((r) => /\bnpm run build\b|node scripts\/build\.mjs/.test(r));
    const pack = runs.findIndex((r) => /pack-service\.mjs/.test(r));
    expect(ci).toBeGreaterThanOrEqual(0);
    expect(ci).toBeLessThan(buildStep);
    expect(buildStep).toBeLessThan(pack);
  });

  it('copies only the packed folder into the runtime stage', () => {
    expect(ops(runtime, 'ADD')).toHaveLength(0);
    const copies = ops(runtime, 'COPY');
    expect(copies).toHaveLength(1);
    const words = copies[0].args.split(/\s+/);
    expect(words).toContain('--from=build');
    expect(words.filter((w) => !w.startsWith('--'))).toEqual(['/out', '/app']);
  });

  it('runs production code as a non-root user', () => {
    const users = ops(runtime, 'USER');
    expect(users.length).toBeGreaterThan(0);
    const [user, group] = users[users.length - 1].args.split(':');
    expect(['root', '0']).not.toContain(user);
    if (group !== undefined) expect(['root', '0']).not.toContain(group);
    // Nothing may run as root after the switch.
    const last = runtime.instructions.lastIndexOf(users[users.length - 1]);
    expect(runtime.instructions.slice(last).filter((i) => i.op === 'RUN')).toHaveLength(0);
  });

  it('sets NODE_ENV=production, WORKDIR /app, STOPSIGNAL SIGTERM, EXPOSE and CMD node dist/main.js', () => {
    expect(ops(runtime, 'ENV').some((e) => /(^|\s)NODE_ENV=production(\s|$)/.test(e.args))).toBe(true);
    expect(ops(runtime, 'WORKDIR').map((w) => w.args)).toEqual(['/app']);
    expect(ops(runtime, 'STOPSIGNAL').map((s) => s.args)).toEqual(['SIGTERM']);
    expect(ops(runtime, 'EXPOSE').length).toBeGreaterThan(0);
    const cmds = ops(runtime, 'CMD');
    expect(cmds).toHaveLength(1);
    // Exec form, so node is PID 1 and receives SIGTERM itself rather than through a shell.
    expect(JSON.parse(cmds[0].args)).toEqual(['node', 'dist/main.js']);
    expect(ops(runtime, 'ENTRYPOINT')).toHaveLength(0);
  });

  it('runs the scheduler, the senders and the all-in-one with a young generation sized for their batches, and nothing else through NODE_OPTIONS', () => {
    const options = ops(runtime, 'ENV').map((e) => /(?:^|\s)NODE_OPTIONS=(\S+)/.exec(e.args)?.[1]).filter((o): o is string => o !== undefined);
    const expected: Record<string, string[]> = {
      'cascade-scheduler': ['--max-semi-space-size=64'],
      'all-in-one': ['--max-semi-space-size=64'],
      'channel-email': ['--max-semi-space-size=32'],
      'channel-sms': ['--max-semi-space-size=32'],
      'channel-messenger': ['--max-semi-space-size=32'],
    };
    expect(options).toEqual(expected[name] ?? []);
  });

  it('puts no secrets in build args or environment', () => {
    for (const stage of stages) {
      for (const i of [...ops(stage, 'ARG'), ...ops(stage, 'ENV')]) {
        expect(i.args).not.toMatch(/(PASSWORD|SECRET|TOKEN|API_KEY|PRIVATE_KEY|NPM_AUTH|_AUTH)\b/i);
        expect(i.args).not.toMatch(/DATABASE_URL=\S*:\S*@/);
      }
    }
  });
});
