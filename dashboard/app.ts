/**
 * The fsbench dashboard: matrices with live progress, agents with their fingerprints, a matrix's
 * charts and report, and a compare view. Hash routes (#/, #/agents, #/matrix/ID, #/compare?..., #/gate?..., #/history?...)
 * so every view has a link. It keeps routing and charts only: the report's and a comparison's
 * tables and notes are documents the coordinator serves (report/results-view.ts,
 * compare/view.ts), rendered by the exporter that renders the HTML report
 * (report/export/html.ts), and the charts are chosen by report/charts.ts as the page chooses
 * them. Everything fetched is parsed before it is shown.
 */
import type { Chart } from 'chart.js';
import { z } from 'zod';
import { ChartInput } from '../contract/charts.js';
import { HistoryPageSchema } from '../contract/history.js';
import type { MachineFingerprint } from '../contract/fingerprint.js';
import { factsLine } from '../compare/machine-facts.js';
import { chartsOf } from '../report/charts.js';
import { historyCharts } from '../report/history-charts.js';
import { Doc } from '../report/export/doc.js';
import { docHtml, preambleHtml } from '../report/export/html.js';
import { formatSize } from '../report/format.js';
import { fromHtml, h } from './dom.js';
import { drawCharts } from './draw.js';

function must<T extends HTMLElement>(id: string, type: new () => T): T {
  const el = document.getElementById(id);
  if (!(el instanceof type)) throw new Error(`the page has no #${id}`);
  return el;
}

const view = must('view', HTMLElement);
const banner = must('banner', HTMLElement);
const tokenInput = must('token', HTMLInputElement);

// ---- what the API answers, as far as the views read it ------------------------------------

/**
 * A fingerprint as the views show it. Only its shown fields are checked: the agent's full
 * schema (contract/fingerprint.ts) holds server-side code the browser does not load.
 */
const Fingerprint = z
  .object({
    cpu: z.object({ model: z.string(), logicalCores: z.number(), l3Bytes: z.number().nullable() }).loose(),
    memoryBytes: z.number(),
    kernel: z.object({ release: z.string(), arch: z.string() }).loose(),
    targetFs: z.string().nullable(),
    container: z.object({ inContainer: z.boolean(), runtime: z.string().nullable().optional() }).loose(),
    inotifyLimits: z.object({ maxQueuedEvents: z.number(), maxUserWatches: z.number(), maxUserInstances: z.number() }).nullable().optional(),
    facts: z.object({}).loose().optional(),
  })
  .loose();
/** factsLine reads every fact; the coordinator stores fingerprints parsed by the full schema, facts defaulted. */
const isFullFingerprint = (f: z.infer<typeof Fingerprint>): f is z.infer<typeof Fingerprint> & MachineFingerprint => f.facts !== undefined;

const Progress = z.object({ stored: z.number(), expected: z.number() }).loose();
const MatrixSummary = z.object({ id: z.string(), name: z.string(), workload: z.string(), state: z.string(), progress: Progress, cells: z.number(), createdAt: z.string() }).loose();
const Matrices = z.object({ matrices: z.array(MatrixSummary) });
// The shapes the coordinator documents (coordinator/routes/openapi-components.ts), as far as the views read them.
const MatrixDetail = MatrixSummary.extend({
  description: z.string().nullable(),
  machines: z.array(z.object({ machine: z.string(), stored: z.number(), expected: z.number().nullable(), ok: z.number(), failed: z.number(), skipped: z.number() }).loose()),
  failures: z.array(z.object({ machine: z.string(), cellId: z.string(), repetition: z.number(), code: z.string().nullable(), message: z.string().nullable() }).loose()),
});
const Agent = z
  .object({
    agentId: z.string(),
    machine: z.string(),
    labels: z.array(z.string()),
    currentRun: z.object({ cellId: z.string().optional() }).loose().nullable(),
    holdsHostLock: z.boolean(),
    runsDone: z.number(),
    lastHeartbeat: z.string(),
    fingerprint: Fingerprint,
  })
  .loose();
const AgentKey = z.object({ key: z.string(), machine: z.string(), hostId: z.string(), state: z.string(), via: z.string().nullable(), enrolledAt: z.string().nullable(), firstSeen: z.string() }).loose();
const Agents = z.object({ agents: z.array(Agent), keys: z.array(AgentKey).optional() });
/** The report inside a results page: what the charts read, and each machine's fingerprint for its facts line. */
const Results = z.object({ report: ChartInput.extend({ machines: z.array(z.object({ machine: z.string(), fingerprint: Fingerprint.nullable() })) }) });
const Documented = z.object({ document: Doc });
const ProgressEvent = z.object({ state: z.string(), expectedRuns: z.number(), storedRuns: z.number() }).loose();
const ErrorBody = z.object({ error: z.object({ message: z.string() }) });

// ---- what the current view opened ----------------------------------------------------------

/** Charts, event streams and timers of the current view, closed when the view changes. */
let open: { charts: Chart[]; sources: EventSource[]; timers: number[] } = { charts: [], sources: [], timers: [] };

function closeView(): void {
  for (const c of open.charts) c.destroy();
  for (const s of open.sources) s.close();
  for (const t of open.timers) clearInterval(t);
  open = { charts: [], sources: [], timers: [] };
}

/** Replaces the view's content; null stands for "nothing here". */
function show(...nodes: (Node | null)[]): void {
  view.replaceChildren(...nodes.filter((n): n is Node => n !== null));
}

function showError(message: string): void {
  banner.textContent = message;
  banner.hidden = false;
}

const messageOf = (err: unknown) => (err instanceof Error ? err.message : String(err));
const token = () => localStorage.getItem('fsbench.token') ?? '';

async function api<T>(path: string, schema: z.ZodType<T>): Promise<T> {
  const headers: Record<string, string> = token() ? { authorization: `Bearer ${token()}` } : {};
  const res = await fetch(path, { headers });
  if (!res.ok) {
    const body = ErrorBody.safeParse(await res.json().catch(() => null));
    throw new Error(`${path}: ${body.success ? body.data.error.message : `${res.status} ${res.statusText}`}`);
  }
  const parsed = schema.safeParse(await res.json());
  if (!parsed.success) throw new Error(`${path}: an answer the dashboard cannot read: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
  return parsed.data;
}

type ProgressUpdate = z.infer<typeof ProgressEvent>;

/**
 * Live progress: server-sent events when reads are open (EventSource cannot send a token),
 * polling every 2 s when a token is needed.
 */
function watchMatrix(id: string, onProgress: (p: ProgressUpdate) => void): void {
  if (token()) {
    const t = window.setInterval(() => {
      api(`/v1/matrices/${encodeURIComponent(id)}`, MatrixSummary)
        .then((m) => {
          onProgress({ state: m.state, expectedRuns: m.progress.expected, storedRuns: m.progress.stored });
          if (m.state === 'done' || m.state === 'cancelled') clearInterval(t);
        })
        .catch((err: unknown) => {
          showError(messageOf(err));
        });
    }, 2000);
    open.timers.push(t);
    return;
  }
  const source = new EventSource(`/v1/matrices/${encodeURIComponent(id)}/events`);
  const handle = (e: MessageEvent<unknown>) => {
    const p = ProgressEvent.safeParse(typeof e.data === 'string' ? JSON.parse(e.data) : null);
    if (p.success) onProgress(p.data);
  };
  source.addEventListener('progress', handle);
  source.addEventListener('end', (e) => {
    handle(e);
    source.close();
  });
  open.sources.push(source);
}

function progressBar(stored: number, expected: number): HTMLElement {
  const fraction = expected > 0 ? stored / expected : 1;
  return h('span', { class: 'progress' }, h('progress', { max: 1, value: Math.min(1, fraction) }), ` ${stored}/${expected}`);
}

const stateBadge = (state: string) => h('span', { class: `state state-${state}` }, state);
const table = (head: readonly string[], rows: readonly HTMLElement[], cls?: string) =>
  h('table', { class: cls }, h('thead', {}, h('tr', {}, head.map((t) => h('th', {}, t)))), h('tbody', {}, rows));

// ---- matrices ------------------------------------------------------------------------------

async function matricesView(): Promise<void> {
  const [{ matrices }, agents] = await Promise.all([api('/v1/matrices', Matrices), api('/v1/agents', Agents).catch(() => null)]);
  const rows = matrices.map((m) => {
    const progressCell = h('td', {}, progressBar(m.progress.stored, m.progress.expected));
    const stateCell = h('td', {}, stateBadge(m.state));
    if (m.state === 'queued' || m.state === 'running') {
      watchMatrix(m.id, (p) => {
        progressCell.replaceChildren(progressBar(p.storedRuns, p.expectedRuns));
        stateCell.replaceChildren(stateBadge(p.state));
      });
    }
    return h(
      'tr',
      { 'data-matrix': m.id },
      h('td', {}, h('a', { href: `#/matrix/${encodeURIComponent(m.id)}` }, m.name)),
      h('td', {}, m.workload),
      stateCell,
      progressCell,
      h('td', { class: 'num' }, m.cells),
      h('td', {}, new Date(m.createdAt).toLocaleString()),
    );
  });
  show(
    h('h2', {}, 'Matrices'),
    matrices.length === 0
      ? h('p', {}, 'No matrix yet: submit one with `fsbench submit FILE`, or upload local runs with `fsbench upload FILE.jsonl`.')
      : table(['matrix', 'workload', 'state', 'runs', 'cells', 'created'], rows, 'matrices'),
    agents ? agentsSection(agents.agents) : null,
    agents ? keysSection(agents.keys ?? []) : null,
  );
}

// ---- agents --------------------------------------------------------------------------------

/** A fingerprint's kernel facts in one line, as `fsbench agents` prints them; none for an older agent's. */
function factsLineOf(f: z.infer<typeof Fingerprint> | null | undefined): string {
  return f && isFullFingerprint(f) ? factsLine(f) : '';
}

function agentsSection(agents: readonly z.infer<typeof Agent>[]): HTMLElement {
  const rows = agents.map((a) => {
    const f = a.fingerprint;
    const limits = f.inotifyLimits ? `${f.inotifyLimits.maxQueuedEvents} / ${f.inotifyLimits.maxUserWatches} / ${f.inotifyLimits.maxUserInstances}` : 'n/a';
    return h(
      'tr',
      { 'data-agent': a.agentId },
      h('td', {}, a.machine, a.labels.length > 0 ? h('small', {}, ` ${a.labels.join(', ')}`) : null),
      h('td', {}, a.currentRun ? `running ${a.currentRun.cellId ?? ''}` : 'idle', a.holdsHostLock ? ' (host lock)' : ''),
      h('td', { class: 'num' }, a.runsDone),
      h('td', {}, f.cpu.model, h('small', {}, ` ${f.cpu.logicalCores} threads`)),
      h('td', { class: 'num' }, f.cpu.l3Bytes ? formatSize(f.cpu.l3Bytes) : 'n/a'),
      h('td', { class: 'num' }, formatSize(Math.round(f.memoryBytes / 1024 ** 2) * 1024 ** 2)),
      h('td', {}, `${f.kernel.release} ${f.kernel.arch}`),
      h('td', {}, f.targetFs ?? 'n/a', f.container.inContainer ? ` (in ${f.container.runtime ?? 'a container'})` : ''),
      h('td', {}, limits),
      h('td', { class: 'facts' }, factsLineOf(f)),
      h('td', {}, new Date(a.lastHeartbeat).toLocaleTimeString()),
    );
  });
  const head = ['machine', 'doing', 'runs', 'CPU', 'L3', 'memory', 'kernel', 'target fs', 'inotify queue / watches / instances', 'facts', 'heartbeat'];
  return h(
    'section',
    { class: 'agents' },
    h('h2', {}, `Agents (${agents.length})`),
    agents.length === 0 ? h('p', {}, 'No live agent: start one with `fsbench agent`.') : table(head, rows),
  );
}

/** Agent keys: enrolled (their reports count) or waiting for `fsbench agents approve`. */
function keysSection(keys: readonly z.infer<typeof AgentKey>[]): HTMLElement {
  const pending = keys.filter((k) => k.state === 'pending').length;
  const rows = keys.map((k) =>
    h(
      'tr',
      { 'data-key': k.key, 'data-state': k.state },
      h('td', {}, k.machine),
      h('td', {}, k.hostId),
      h('td', {}, k.state === 'enrolled' ? `enrolled (${k.via ?? '?'})` : h('strong', {}, 'waiting for approval')),
      h('td', {}, h('code', {}, k.key)),
      h('td', {}, new Date(k.enrolledAt ?? k.firstSeen).toLocaleString()),
    ),
  );
  return h(
    'section',
    { class: 'agent-keys' },
    h('h2', {}, `Agent keys (${keys.length - pending} enrolled, ${pending} waiting)`),
    pending > 0 ? h('p', {}, 'Approve a waiting agent with `fsbench agents approve <machine, host or key>`; its reports are dropped until then.') : null,
    keys.length === 0 ? h('p', {}, 'No agent key yet.') : table(['machine', 'host', 'state', 'key', 'since'], rows),
  );
}

async function agentsView(): Promise<void> {
  const { agents, keys } = await api('/v1/agents', Agents);
  show(agentsSection(agents), keysSection(keys ?? []));
  open.timers.push(
    window.setInterval(() => {
      api('/v1/agents', Agents)
        .then((fresh) => {
          show(agentsSection(fresh.agents), keysSection(fresh.keys ?? []));
        })
        .catch((err: unknown) => {
          showError(messageOf(err));
        });
    }, 5000),
  );
}

// ---- one matrix ----------------------------------------------------------------------------

async function matrixView(id: string): Promise<void> {
  const path = `/v1/matrices/${encodeURIComponent(id)}`;
  // The report comes whole with the first page of runs: ask for the smallest page.
  const [detail, results, { document: doc }] = await Promise.all([api(path, MatrixDetail), api(`${path}/results?limit=1`, Results), api(`${path}/document`, Documented)]);
  const progress = h('span', {}, progressBar(detail.progress.stored, detail.progress.expected));
  const state = h('span', {}, stateBadge(detail.state));
  if (detail.state === 'queued' || detail.state === 'running') {
    watchMatrix(id, (p) => {
      progress.replaceChildren(progressBar(p.storedRuns, p.expectedRuns));
      state.replaceChildren(stateBadge(p.state));
      // New results change the charts and tables: reload the view once the matrix is done.
      if (p.state === 'done') void route();
    });
  }
  const { charts, note } = chartsOf(results.report);
  const fingerprints = new Map(results.report.machines.map((m) => [m.machine, m.fingerprint]));
  const machines = detail.machines.map((m) => {
    const facts = factsLineOf(fingerprints.get(m.machine));
    return h(
      'li',
      { 'data-machine': m.machine },
      `${m.machine}: `,
      progressBar(m.stored, m.expected ?? detail.progress.expected),
      ` (${m.ok} ok, ${m.failed} failed, ${m.skipped} skipped)`,
      facts ? h('small', { class: 'facts' }, ` ${facts}`) : null,
    );
  });
  const failures = detail.failures;
  show(
    h('h2', {}, detail.name, ' ', h('small', {}, `${detail.workload} · ${detail.id}`)),
    h('p', {}, state, ' ', progress, ' · ', h('a', { href: `#/compare?baseline=${encodeURIComponent(id)}` }, 'compare…'), ' · ', h('a', { href: `${path}/results?format=csv` }, 'CSV'), ' · ', h('a', { href: `${path}/report.html` }, 'HTML report')),
    detail.description ? h('p', { class: 'hint' }, detail.description) : null,
    fromHtml(preambleHtml(doc)),
    machines.length > 0 ? h('ul', { class: 'machines' }, machines) : null,
    // The charts first: the notes, the document's first section, explain what they show.
    h('div', { class: 'charts' }, drawCharts(charts, open.charts), note ? h('p', { class: 'hint' }, note) : null),
    fromHtml(docHtml(doc)),
    failures.length > 0 ? h('section', {}, h('h3', {}, 'Failures'), h('ul', {}, failures.map((f) => h('li', {}, `${f.machine} ${f.cellId}#${f.repetition}: ${f.code ?? 'failed'}: ${f.message ?? ''}`)))) : null,
  );
}

// ---- compare -------------------------------------------------------------------------------

/**
 * Compare, or with `gate` the regression gate of the same two sides (`fsbench gate`): the gate
 * adds its limit and the choice to leave out disturbed runs, and shows its verdict's document.
 */
async function compareView(params: URLSearchParams, mode: 'compare' | 'gate' = 'compare'): Promise<void> {
  const { matrices } = await api('/v1/matrices', Matrices);
  const field = (label: string, input: HTMLElement) => h('label', {}, label, input);
  const matrixSelect = (name: string, value: string | null) =>
    h(
      'select',
      { name },
      h('option', { value: '' }, name === 'candidate' ? '(same matrix)' : '(choose)'),
      matrices.map((m) => h('option', { value: m.id, selected: m.id === value }, `${m.name} · ${m.id}`)),
    );
  const text = (name: string, placeholder: string) => h('input', { name, value: params.get(name) ?? '', placeholder });
  const form = h(
    'form',
    { class: 'compare-form' },
    field('baseline ', matrixSelect('baseline', params.get('baseline'))),
    field('machine ', text('baselineMachine', 'any')),
    field('candidate ', matrixSelect('candidate', params.get('candidate'))),
    field('machine ', text('candidateMachine', 'any')),
    field('metrics ', text('metric', 'headline metrics')),
    mode === 'gate' ? field('limit ', text('maxRegression', '5%')) : null,
    mode === 'gate'
      ? field('leave out disturbed runs ', h('input', { type: 'checkbox', name: 'excludeFlagged', value: 'true', checked: params.get('excludeFlagged') === 'true' }))
      : null,
    h('button', { type: 'submit' }, mode === 'gate' ? 'Gate' : 'Compare'),
  );
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    const q = new URLSearchParams();
    for (const [k, v] of new FormData(form)) if (typeof v === 'string' && v.trim() !== '') q.set(k, v.trim());
    location.hash = `#/${mode}?${q.toString()}`;
  });
  const out = h('div', { id: `${mode}-result` });
  show(
    h('h2', {}, mode === 'gate' ? 'Gate' : 'Compare'),
    h(
      'p',
      { class: 'hint' },
      mode === 'gate'
        ? 'Does the candidate regress? A cell-metric fails only when it moved its bad way by more than the limit, significantly (Mann-Whitney p < 0.05 and the ratio\'s interval wholly on the bad side); each row says the smallest change its runs could have seen.'
        : 'Two matrices, or one matrix on two machines, cell by cell: medians, delta, a 95% interval for the ratio and a Mann-Whitney p-value. Green and red deltas are significant at 0.05; grey ~ is not.',
    ),
    form,
    out,
  );
  if (!params.get('baseline')) return;
  const q = new URLSearchParams(params);
  q.set('format', 'document');
  const { document: doc } = await api(`/v1/${mode}?${q.toString()}`, Documented);
  // The title carries what was compared and, for the gate, its verdict.
  out.replaceChildren(h('h3', { class: 'doc-title' }, doc.title), fromHtml(preambleHtml(doc)), fromHtml(docHtml(doc)));
}

// ---- history -------------------------------------------------------------------------------

async function historyView(params: URLSearchParams): Promise<void> {
  const { matrices } = await api('/v1/matrices', Matrices);
  const names = [...new Set(matrices.map((m) => m.name))].sort();
  const field = (label: string, input: HTMLElement) => h('label', {}, label, input);
  const text = (name: string, placeholder: string) => h('input', { name, value: params.get(name) ?? '', placeholder });
  const form = h(
    'form',
    { class: 'compare-form' },
    field('matrix ', h('select', { name: 'name' }, h('option', { value: '' }, '(choose)'), names.map((n) => h('option', { value: n, selected: n === params.get('name') }, n)))),
    field('metric ', text('metric', 'headline metrics')),
    field('machine ', text('machine', 'any')),
    field('cells ', text('param', 'files=128,writers=4')),
    field('every point ', h('input', { type: 'checkbox', name: 'points', value: 'true', checked: params.get('points') === 'true' })),
    h('button', { type: 'submit' }, 'Show'),
  );
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    const q = new URLSearchParams();
    for (const [k, v] of new FormData(form)) if (typeof v === 'string' && v.trim() !== '') q.set(k, v.trim());
    location.hash = `#/history?${q.toString()}`;
  });
  const out = h('div', { id: 'history-result' });
  show(
    h('h2', {}, 'History'),
    h('p', { class: 'hint' }, "A matrix's results over time, per machine, cell and metric: each point a run of the matrix (its median, the dashed lines its 95% interval), triangles where the level changed (E-divisive means, p < 0.001), hollow squares where the machine or the matrix's annotations changed."),
    form,
    out,
  );
  if (!params.get('name')) return;
  const q = new URLSearchParams(params);
  q.set('format', 'json');
  const page = await api(`/v1/history?${q.toString()}`, HistoryPageSchema);
  q.set('format', 'document');
  const { document: doc } = await api(`/v1/history?${q.toString()}`, Documented);
  out.replaceChildren(h('div', { class: 'charts' }, drawCharts(historyCharts(page), open.charts)), fromHtml(preambleHtml(doc)), fromHtml(docHtml(doc)));
}

// ---- routing -------------------------------------------------------------------------------

async function route(): Promise<void> {
  // Ready again only once this view has loaded (tests and scripts wait on it).
  delete document.body.dataset['ready'];
  closeView();
  banner.hidden = true;
  const hash = location.hash.replace(/^#/, '') || '/';
  const [path = '/', query = ''] = hash.split('?');
  for (const a of document.querySelectorAll<HTMLAnchorElement>('nav a[data-nav]')) {
    const nav = a.dataset['nav'] ?? '';
    a.classList.toggle('active', path.startsWith(`/${nav === 'matrices' ? 'matrix' : nav}`) || (path === '/' && nav === 'matrices'));
  }
  show(h('p', { class: 'loading' }, 'loading…'));
  try {
    if (path === '/' || path === '') await matricesView();
    else if (path === '/agents') await agentsView();
    else if (path.startsWith('/matrix/')) await matrixView(decodeURIComponent(path.slice('/matrix/'.length)));
    else if (path === '/compare') await compareView(new URLSearchParams(query));
    else if (path === '/gate') await compareView(new URLSearchParams(query), 'gate');
    else if (path === '/history') await historyView(new URLSearchParams(query));
    else show(h('p', {}, `No page ${path}.`));
    document.body.dataset['ready'] = path;
  } catch (err) {
    show();
    showError(messageOf(err));
    document.body.dataset['ready'] = 'error';
  }
}

tokenInput.value = token();
must('token-form', HTMLFormElement).addEventListener('submit', (e) => {
  e.preventDefault();
  localStorage.setItem('fsbench.token', tokenInput.value.trim());
  void route();
});
window.addEventListener('hashchange', () => {
  void route();
});
void route();
