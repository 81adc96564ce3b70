/**
 * The semantics workload for real: operations on a private tmpfs, watched by fsbench's native
 * recursive inotify reader, chokidar and @parcel/watcher in their own processes, through `fsbench
 * run` as a user runs it, by a real agent of a real coordinator, and in a Docker sandbox container;
 * a cancelled run and a refused one leave nothing behind. The matching's
 * logic has its own file (semantics-matching.test.ts).
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { expandMatrix, parseMatrix, type Cell } from '../contract/matrix.js';
import { CoordinatorClient } from '../cli/client.js';
import { RunResult } from '../contract/result.js';
import { SEMANTICS_BACKENDS } from '../contract/workloads/semantics/backends.js';
import { OPERATION_KINDS, perKindMetric } from '../contract/workloads/semantics/index.js';
import { collectFingerprint } from '../host/fingerprint.js';
import { Journal } from '../host/journal.js';
import { PACKAGE_ROOT } from '../host/native.js';
import { runCell } from '../runner/run-cell.js';
import { dockerClient, engineReachable } from '../sandbox/engine.js';
import { SandboxRunner } from '../sandbox/runner.js';
import { useCluster } from './helpers/cluster.js';
import { exited, freshCli, mountsUnder, runCli, runOnce, spawnCli, tempDir, waitFor } from './helpers/local.js';

const files = tempDir('fsbench-semantics-');
afterAll(() => {
  files.remove();
});

function cellOf(params: Record<string, unknown>): Cell {
  const [cell] = expandMatrix(parseMatrix({ name: 't', workload: 'semantics', params }));
  if (!cell) throw new Error('no cell');
  return cell;
}

function runsIn(file: string): RunResult[] {
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => RunResult.parse(JSON.parse(l)));
}

function ok(r: RunResult | undefined): Extract<RunResult, { state: 'ok' }> {
  if (r?.state !== 'ok') throw new Error(`run ${r?.state ?? 'missing'}: ${r?.state === 'failed' ? `${r.error.code} ${r.error.message}` : r?.state === 'skipped' ? r.reason : ''}`);
  return r;
}

const metricsOf = (r: RunResult | undefined) => ok(r).metrics;
const missedOf = (r: RunResult | undefined) => z.array(z.object({ kind: z.string(), missing: z.array(z.string()) })).parse(JSON.parse(String(ok(r).info['missedOps'])));

/** What a run may leave in its scratch directory: the journal, nothing of the run. */
function leftovers(scratch: string): string[] {
  return readdirSync(scratch).filter((n) => n.startsWith('fsbench-semantics-'));
}

/** Processes whose command line names `needle` (the run's tree): the watcher while it runs. */
function processesNaming(needle: string): number[] {
  return readdirSync('/proc')
    .filter((n) => /^\d+$/.test(n) && Number(n) !== process.pid)
    .filter((pid) => {
      try {
        return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(needle);
      } catch {
        return false;
      }
    })
    .map(Number);
}

describe('fsbench params', () => {
  it('names every operation kind and every backend of semantics', async () => {
    await freshCli();
    const r = await runCli(['params']);
    expect(r.code, r.stderr).toBe(0);
    const section = r.stdout.slice(r.stdout.indexOf('#### `semantics`'));
    const params = section.slice(0, section.indexOf('\n#### '));
    const row = (name: string) => params.split('\n').find((l) => l.startsWith(`| \`${name}\``)) ?? '';
    expect(OPERATION_KINDS).toHaveLength(15);
    for (const kind of OPERATION_KINDS) expect(row('kinds'), kind).toContain(kind);
    expect(SEMANTICS_BACKENDS.length).toBeGreaterThanOrEqual(4);
    for (const backend of SEMANTICS_BACKENDS) expect(row('backend'), backend).toContain(backend);
  }, 300_000);
});

describe('fsbench run, on tmpfs at a gentle pace', () => {
  const scratch = path.join(files.dir, 'run');
  const out = path.join(files.dir, 'runs.jsonl');
  const perKind = 5;
  let runs: RunResult[] = [];
  const of = (backend: string) => runs.find((r) => r.params['backend'] === backend);

  it('runs a matrix over inotify, inotifywait, chokidar and @parcel/watcher, and leaves no mount, file or process behind', async () => {
    await freshCli();
    const matrix = path.join(files.dir, 'matrix.json');
    const params = { backend: ['inotify', 'inotifywait', 'chokidar', 'parcel'], perKind, pace: 100, settle: '1s', target: 'tmpfs', seed: 3 };
    writeFileSync(matrix, JSON.stringify({ name: 'semantics-test', workload: 'semantics', warmup: 0, repetitions: 1, params }));
    const r = await runCli(['run', matrix, '-o', out, '--scratch', scratch, '--no-progress']);
    expect(r.code, r.stderr).toBe(0);
    runs = runsIn(out);
    expect(runs.map((x) => x.params['backend']).sort()).toEqual(['chokidar', 'inotify', 'inotifywait', 'parcel']);
    expect(mountsUnder(scratch)).toEqual([]);
    expect(leftovers(scratch)).toEqual([]);
    expect(processesNaming(scratch)).toEqual([]);
  }, 300_000);

  it('raw inotify reports every operation of every kind, with no overflow', () => {
    const m = metricsOf(of('inotify'));
    expect(m['operations']).toBe(OPERATION_KINDS.length * perKind);
    expect(m['recall']).toBe(1);
    expect(m['missed']).toBe(0);
    expect(m['overflows']).toBe(0);
    expect(m['deafAfter']).toBe(0);
    expect(m['wrongKind']).toBe(0);
    for (const kind of OPERATION_KINDS) expect(m[perKindMetric('recall', kind)], kind).toBe(1);
    expect(missedOf(of('inotify'))).toEqual([]);
  });

  it('inotifywait reports each file\'s creation, change and rename with its own kind (a rename\'s halves unpaired, the new name a rename)', () => {
    const m = metricsOf(of('inotifywait'));
    for (const kind of ['create', 'modify', 'delete', 'rename-within', 'rename-across'] as const) expect(m[perKindMetric('recall', kind)], kind).toBe(1);
    expect(m['wrongKind']).toBe(0);
  });

  it('chokidar and @parcel/watcher report each rename as a deletion and a creation, never as a rename', () => {
    for (const backend of ['chokidar', 'parcel']) {
      const m = metricsOf(of(backend));
      for (const kind of ['rename-within', 'rename-across'] as const) {
        expect(m[perKindMetric('recall', kind)], `${backend} ${kind}`).toBe(0);
        // unlink of the old name and add of the new one: two wrong-kind events per rename.
        expect(m[perKindMetric('wrong_kind', kind)], `${backend} ${kind}`).toBe(2 * perKind);
      }
      expect(missedOf(of(backend)).filter((x) => x.kind === 'rename-within')).toHaveLength(perKind);
    }
  });

  it('says so in the report, in words: each library reported 0 of the renames as renames, and the missed operations are counted per kind', async () => {
    const r = await runCli(['report', out, '--format', 'json']);
    expect(r.code, r.stderr).toBe(0);
    const report = z.object({ cells: z.array(z.object({ params: z.record(z.string(), z.unknown()), notes: z.array(z.string()) })) }).parse(JSON.parse(r.stdout));
    const notesOf = (backend: string) => report.cells.find((c) => c.params['backend'] === backend)?.notes.join('\n') ?? '';
    for (const backend of ['chokidar', 'parcel']) {
      expect(notesOf(backend)).toContain(`${backend} reported 0 of ${perKind} renames within a directory as renames: it gives 2 events of other kinds for each`);
      expect(notesOf(backend)).toMatch(new RegExp(`${backend} did not report with the right kind: [^\\n]*renames across directories ${perKind} of ${perKind}`));
    }
    // The raw reader reported everything: no note says otherwise of it.
    expect(report.cells.some((c) => c.params['backend'] === 'inotify')).toBe(true);
    expect(notesOf('inotify')).not.toMatch(/inotify (reported \d+ of|did not report|went deaf)/);
  });
});

describe('what a run leaves behind', () => {
  it('a cancelled run stops its watcher and removes its tree, for the native reader and a Node child alike', async () => {
    const backends = ['inotify', 'inotifywait', 'chokidar', 'parcel'];
    for (const backend of backends) {
      const scratch = path.join(files.dir, `cancel-${backend}`);
      mkdirSync(scratch);
      const abort = new AbortController();
      // A minute of operations: cancelled long before it ends.
      const run = runOnce(cellOf({ backend, perKind: 200, pace: 50 }), scratch, abort.signal);
      let root = '';
      try {
        await waitFor(
          () => {
            const dir = leftovers(scratch)[0];
            root = dir === undefined ? '' : path.join(scratch, dir);
            // Markers come once the watcher runs (a `mount` naming the tree comes and goes before).
            const d0 = path.join(root, 'watched', 'd0');
            return root !== '' && existsSync(d0) && readdirSync(d0).some((n) => n.startsWith('.fsbench-marker-')) && processesNaming(root).length > 0;
          },
          60_000,
          `${backend} to watch the tree`,
        );
        expect(mountsUnder(scratch)).toHaveLength(1);
      } finally {
        abort.abort();
      }
      const r = await run;
      expect(r.state, backend).toBe('failed');
      if (r.state === 'failed') expect(r.error.code).toBe('CANCELLED');
      expect(processesNaming(root), backend).toEqual([]);
      expect(mountsUnder(scratch), backend).toEqual([]);
      expect(leftovers(scratch), backend).toEqual([]);
    }
  }, 180_000);

  it('a cell needing more watches than the host allows is refused before anything exists', async () => {
    const scratch = path.join(files.dir, 'refused');
    const matrix = path.join(files.dir, 'deep.json');
    writeFileSync(matrix, JSON.stringify({ name: 'deep', workload: 'semantics', warmup: 0, repetitions: 1, params: { kinds: 'mkdir-p', perKind: 100 } }));
    const out = path.join(files.dir, 'refused.jsonl');
    const child = spawnCli(['run', matrix, '-o', out, '--scratch', scratch, '--no-progress', '--max-watches', '100']);
    const r = await exited(child);
    expect(r.code).not.toBe(0);
    const [run] = runsIn(out);
    expect(run?.state).toBe('failed');
    if (run?.state === 'failed') {
      expect(run.error.code).toBe('LIMIT_NOT_ALLOWED');
      expect(run.error.message).toMatch(/^the script makes up to 406 directories, each an inotify watch, above the 100 this host allows/);
    }
    expect(mountsUnder(scratch)).toEqual([]);
    expect(leftovers(scratch)).toEqual([]);
  }, 60_000);

  it('a fanotify cell of the same tree is not held to that cap: its one filesystem mark is no inotify watch', async () => {
    const scratch = path.join(files.dir, 'fanotify-deep');
    const matrix = path.join(files.dir, 'deep-fanotify.json');
    writeFileSync(matrix, JSON.stringify({ name: 'deep', workload: 'semantics', warmup: 0, repetitions: 1, params: { backend: 'fanotify', kinds: 'mkdir-p', perKind: 100 } }));
    const out = path.join(files.dir, 'fanotify-deep.jsonl');
    const r = await exited(spawnCli(['run', matrix, '-o', out, '--scratch', scratch, '--no-progress', '--max-watches', '100']));
    expect(r.code).toBe(0);
    const [run] = runsIn(out);
    expect(run?.state).toBe('ok');
    if (run?.state === 'ok') expect(run.metrics[perKindMetric('recall', 'mkdir-p')]).toBe(1);
  }, 60_000);

  it('a cell without kinds is skipped, not failed', async () => {
    const r = await runOnce(cellOf({ kinds: 'none' }), path.join(files.dir, 'skip'));
    expect(r.state).toBe('skipped');
    if (r.state === 'skipped') expect(r.reason).toBe('kinds is empty: name at least one kind of operation');
  });
});

describe('through the coordinator, with a real agent', () => {
  const cluster = useCluster('semantics');
  it('runs a semantics matrix on an agent and serves its per-kind results', async () => {
    await freshCli();
    const coordinator = await cluster.coordinator();
    await cluster.agent(coordinator.prefix, 'semantics-host', 'semantics-machine');
    const client = new CoordinatorClient(coordinator.url);
    const matrix = { name: 'semantics-agent', workload: 'semantics', repetitions: 1, warmup: 0, params: { backend: ['inotify', 'inotifywait', 'chokidar', 'parcel'], perKind: 3 } };
    const { id } = z.object({ id: z.string() }).parse(await client.json('POST', '/v1/matrices', matrix));
    for (const end = Date.now() + 120_000; ; ) {
      const m = z.object({ state: z.string() }).loose().parse(await client.json('GET', `/v1/matrices/${id}`));
      if (m.state === 'done') break;
      if (Date.now() > end) throw new Error(`matrix ${id} is still ${m.state}`);
      await new Promise((r) => setTimeout(r, 200));
    }
    const Stored = z.object({ state: z.literal('ok'), machine: z.string(), params: z.record(z.string(), z.unknown()), metrics: z.record(z.string(), z.number().nullable()) }).loose();
    const results = z.object({ runs: z.array(Stored) }).loose().parse(await client.json('GET', `/v1/matrices/${id}/results`));
    expect(results.runs.map((r) => r.params['backend']).sort()).toEqual(['chokidar', 'inotify', 'inotifywait', 'parcel']);
    for (const run of results.runs) {
      expect(run.machine).toBe('semantics-machine');
      expect(run.metrics['operations']).toBe(OPERATION_KINDS.length * 3);
    }
    const inotify = results.runs.find((r) => r.params['backend'] === 'inotify');
    expect(inotify?.metrics['recall']).toBe(1);
    expect(inotify?.metrics['recall_rename_across']).toBe(1);
    expect(results.runs.find((r) => r.params['backend'] === 'chokidar')?.metrics['recall_rename_across']).toBe(0);
    expect(results.runs.find((r) => r.params['backend'] === 'inotifywait')?.metrics['recall_rename_across']).toBe(1);
    expect(results.runs.find((r) => r.params['backend'] === 'parcel')?.metrics['recall_create']).toBe(1);
  }, 180_000);
});

describe('in a sandbox container', () => {
  const IMAGE = 'fsbench-test:sandbox';
  const docker = dockerClient();
  const scratch = tempDir('fsbench-semantics-sandbox-');
  let journal: Journal;
  let sandbox: SandboxRunner;

  beforeAll(async () => {
    if (!(await engineReachable(docker))) throw new Error('the sandbox test needs a running Docker engine: `npm test` starts one (scripts/prepare-host.sh)');
    execFileSync('docker', ['build', '-q', '-f', 'docker/Dockerfile', '-t', IMAGE, '.'], { cwd: PACKAGE_ROOT, stdio: ['ignore', 'ignore', 'inherit'] });
    journal = await Journal.open(path.join(scratch.dir, 'journal'));
    sandbox = await SandboxRunner.connect({ docker, image: IMAGE });
  }, 900_000);

  afterAll(async () => {
    await journal.close();
    scratch.remove();
  });

  it('matches every operation on the container\'s own storage, with the native reader, inotifywait from the image and the Node libraries', async () => {
    const fingerprint = await collectFingerprint();
    const ctx = { scratchDir: scratch.dir, journal, signal: new AbortController().signal, log: () => undefined, sandbox };
    const backends = ['inotify', 'inotifywait', 'chokidar', 'parcel'];
    for (const backend of backends) {
      const cell = cellOf({ backend, perKind: 2, target: 'scratch', 'container.storage': 'overlay' });
      const r = ok(await runCell({ matrix: 't', cell, repetition: 0, fingerprint }, ctx));
      expect(r.params['container.storage']).toBe('overlay');
      expect(r.fingerprint.targetFs).toBe('overlay');
      expect(r.metrics['operations']).toBe(OPERATION_KINDS.length * 2);
      expect(r.metrics[perKindMetric('recall', 'create')], backend).toBe(1);
      if (backend === 'inotify') expect(r.metrics['recall']).toBe(1);
    }
    const tmpfs = await runCell({ matrix: 't', cell: cellOf({ target: 'tmpfs', 'container.storage': 'overlay' }), repetition: 0, fingerprint }, ctx);
    expect(tmpfs.state).toBe('skipped');
  }, 300_000);
});
