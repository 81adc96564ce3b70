import { describe, expect, it } from 'vitest';
import { FsbenchError } from '../contract/errors.js';
import { cellId, expandMatrix, MAX_CELLS, parseMatrix } from '../contract/matrix.js';
import { parseMatrixText } from '../contract/matrix-text.js';
import { parseDuration, parseSize } from '../contract/units.js';

function expand(input: unknown) {
  return expandMatrix(parseMatrix(input));
}

function refusal(input: unknown): FsbenchError {
  try {
    expand(input);
  } catch (err) {
    if (err instanceof FsbenchError) return err;
    throw err;
  }
  throw new Error('the matrix was accepted');
}

describe('units', () => {
  it('reads binary sizes and durations, refuses ambiguous units', () => {
    expect(parseSize('4KiB')).toEqual({ ok: true, value: 4096 });
    expect(parseSize('8MiB')).toEqual({ ok: true, value: 8 * 1024 * 1024 });
    expect(parseSize(272)).toEqual({ ok: true, value: 272 });
    expect(parseSize('4KB')).toEqual({ ok: false, reason: "has unknown unit 'KB' (use B, KiB, MiB, GiB, TiB)" });
    expect(parseDuration('3s')).toEqual({ ok: true, value: 3000 });
    expect(parseDuration('250ms')).toEqual({ ok: true, value: 250 });
    expect(parseDuration('3 parsecs').ok).toBe(false);
  });
});

describe('matrix expansion', () => {
  it('is the cartesian product with defaults for unlisted parameters', () => {
    const cells = expand({ name: 'm', workload: 'inotify', params: { files: [128, 256], bufferBytes: ['1KiB', '4KiB', '16KiB'] } });
    expect(cells).toHaveLength(6);
    expect(cells.map((c) => [c.params['files'], c.params['bufferBytes']])).toEqual([
      [128, 1024], [128, 4096], [128, 16384], [256, 1024], [256, 4096], [256, 16384],
    ]);
    expect(cells[0]?.params['writers']).toBe(8);
    expect(cells[0]?.params['target']).toBe('tmpfs');
  });

  it('gives the same deterministic id for the same values however they are spelled', () => {
    const [a] = expand({ name: 'a', workload: 'inotify', params: { bufferBytes: '8MiB', duration: '3s' } });
    const [b] = expand({ name: 'b', workload: 'inotify', params: { bufferBytes: 8388608, duration: 3000 } });
    expect(a?.id).toMatch(/^[0-9a-f]{12}$/);
    expect(a?.id).toBe(b?.id);
    expect(a && cellId('inotify', a.params)).toBe(a?.id);
  });

  it('drops excluded cells and adds included ones', () => {
    const cells = expand({
      name: 'm',
      workload: 'inotify',
      params: { backend: ['inotify', 'parcel'], watch: ['files', 'dir'] },
      exclude: [{ backend: 'parcel', watch: 'files' }],
      include: [{ backend: 'fswatch', watch: 'files', mode: 'concurrent' }],
    });
    expect(cells.map((c) => `${String(c.params['backend'])}/${String(c.params['watch'])}`)).toEqual([
      'inotify/files', 'inotify/dir', 'parcel/dir', 'fswatch/files',
    ]);
  });

  it('refuses a buffer smaller than one maximal inotify event, saying why', () => {
    const e = refusal({ name: 'm', workload: 'inotify', params: { bufferBytes: [1024, 128] } });
    expect(e.code).toBe('MATRIX_INVALID');
    expect(e.message).toContain('params.bufferBytes[1]');
    expect(e.message).toContain('bufferBytes = 128');
    expect(e.message).toContain('smaller than 272 B');
    expect(e.message).toContain('EINVAL');
  });

  it('names the parameter, the value and what is allowed for each bad value', () => {
    const e = refusal({
      name: 'm',
      workload: 'inotify',
      params: { writers: [0], bufferBytes: '4KB', duration: '3 weeks', watch: 'everything', buffer: 4096 },
    });
    expect(e.issues.map((i) => i.path)).toEqual(['params.writers[0]', 'params.bufferBytes[0]', 'params.duration[0]', 'params.watch[0]', 'params.buffer']);
    expect(e.message).toContain('writers = 0 is below the minimum 1 (allowed: an integer from 1 to 1024)');
    expect(e.message).toContain("bufferBytes = \"4KB\" has unknown unit 'KB'");
    expect(e.message).toContain('(allowed: a size from 272B to 64MiB)');
    expect(e.message).toContain("watch = \"everything\" is not an allowed value (allowed: one of files, dir)");
    expect(e.message).toContain("unknown parameter 'buffer' for workload inotify (known: backend, writers, files, bufferBytes");
  });

  it('refuses a wrong unit on a duration and values above the range', () => {
    const e = refusal({ name: 'm', workload: 'inotify', params: { duration: '5KiB', bufferBytes: '128MiB' } });
    expect(e.message).toContain("duration = \"5KiB\" has unknown unit 'KiB' (use ms, s, m, min, h)");
    expect(e.message).toContain('bufferBytes = "128MiB" is above the maximum 64MiB');
  });

  it('checks the size before building any cell', () => {
    const values = Array.from({ length: 1000 }, (_, i) => i + 1);
    const e = refusal({ name: 'm', workload: 'inotify', params: { writers: values.slice(0, 1000), files: values.slice(0, 20) } });
    expect(e.code).toBe('MATRIX_TOO_LARGE');
    expect(e.message).toBe(`the matrix expands to 20000 cells (1000 writers x 20 files), more than the limit of ${MAX_CELLS}: list fewer values or split it`);
  });

  it('refuses unknown fields, workloads and repetitions out of range', () => {
    const e = refusal({ name: 'has space', workload: 'nfs', repetitions: 0, params: {}, colour: 'red' });
    expect(e.code).toBe('MATRIX_INVALID');
    const paths = e.issues.map((i) => i.path).sort();
    expect(paths).toEqual(['(matrix)', 'name', 'repetitions', 'workload']);
    expect(e.message).toContain('colour');
  });

  it('reads YAML and says where YAML is broken', () => {
    const m = parseMatrixText('name: y\nworkload: inotify\nparams:\n  bufferBytes: [4KiB, 8MiB]\n', 'm.yaml');
    expect(expandMatrix(m)).toHaveLength(2);
    expect(() => parseMatrixText('name: [unclosed', 'bad.yaml')).toThrow(/bad.yaml is not valid YAML or JSON/);
  });
});
