// The fsbench dashboard: matrices with live progress, agents with their fingerprints, per-matrix
// charts like seed 000's figures, and a compare view. Plain ES modules reading the coordinator's
// REST API; hash routes (#/, #/agents, #/matrix/ID, #/compare?...) so every view has a link.
import { genericCharts, inotifyBarCharts, inotifySweepCharts, metadataCharts } from './charts.js';
import { compareTables, differingFactsTable } from './compare-tables.js';
import { factsLine } from '/lib/compare/machine-facts.js';
import { formatCv, formatNumber, formatSize, h, headlineMetrics } from './util.js';

const view = document.getElementById('view');
const banner = document.getElementById('banner');
const tokenInput = document.getElementById('token');

/** What the current view opened (charts, event streams, timers), closed when the view changes. */
let open = { charts: [], sources: [], timers: [] };

function closeView() {
  for (const c of open.charts) c.destroy();
  for (const s of open.sources) s.close();
  for (const t of open.timers) clearInterval(t);
  open = { charts: [], sources: [], timers: [] };
}

/** Replaces the view's content; null and false stand for "nothing here". */
function show(...nodes) {
  view.replaceChildren(...nodes.filter((n) => n !== null && n !== undefined && n !== false));
}

function showError(message) {
  banner.textContent = message;
  banner.hidden = false;
}

function token() {
  return localStorage.getItem('fsbench.token') ?? '';
}

tokenInput.value = token();
document.getElementById('token-form').addEventListener('submit', (e) => {
  e.preventDefault();
  localStorage.setItem('fsbench.token', tokenInput.value.trim());
  route();
});

async function api(path) {
  const headers = token() ? { authorization: `Bearer ${token()}` } : {};
  const res = await fetch(path, { headers });
  if (!res.ok) {
    let message = `${res.status} ${res.statusText}`;
    try {
      const body = await res.json();
      if (body?.error?.message) message = body.error.message;
    } catch {
      // Not a JSON error body: the status says enough.
    }
    throw new Error(`${path}: ${message}`);
  }
  return res.json();
}

/**
 * Live progress: server-sent events when reads are open (EventSource cannot send a token),
 * polling every 2 s when a token is needed.
 */
function watchMatrix(id, onProgress) {
  if (token()) {
    const t = setInterval(async () => {
      try {
        const m = await api(`/v1/matrices/${encodeURIComponent(id)}`);
        onProgress({ state: m.state, expectedRuns: m.progress.expected, storedRuns: m.progress.stored, okRuns: m.progress.ok, failedRuns: m.progress.failed });
        if (m.state === 'done' || m.state === 'cancelled') clearInterval(t);
      } catch (err) {
        showError(err.message);
      }
    }, 2000);
    open.timers.push(t);
    return;
  }
  const source = new EventSource(`/v1/matrices/${encodeURIComponent(id)}/events`);
  const handle = (e) => onProgress(JSON.parse(e.data));
  source.addEventListener('progress', handle);
  source.addEventListener('end', (e) => {
    handle(e);
    source.close();
  });
  open.sources.push(source);
}

function progressBar(stored, expected) {
  const fraction = expected > 0 ? stored / expected : 1;
  return h('span', { class: 'progress' }, h('progress', { max: 1, value: Math.min(1, fraction) }), ` ${stored}/${expected}`);
}

function stateBadge(state) {
  return h('span', { class: `state state-${state}` }, state);
}

// ---- matrices -------------------------------------------------------------------------------

async function matricesView() {
  const [{ matrices }, agents] = await Promise.all([api('/v1/matrices'), api('/v1/agents').catch(() => null)]);
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
      { dataset: { matrix: m.id } },
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
      : h('table', { class: 'matrices' }, h('thead', {}, h('tr', {}, ['matrix', 'workload', 'state', 'runs', 'cells', 'created'].map((t) => h('th', {}, t)))), h('tbody', {}, rows)),
    agents ? agentsSection(agents.agents) : null,
    agents ? keysSection(agents.keys ?? []) : null,
  );
}

// ---- agents ---------------------------------------------------------------------------------

/** A fingerprint's kernel facts in one line, as `fsbench agents` prints them; none for an older agent's. */
function factsLineOf(f) {
  return f?.facts ? factsLine(f) : '';
}

function agentsSection(agents) {
  const rows = agents.map((a) => {
    const f = a.fingerprint;
    const limits = f.inotifyLimits ? `${f.inotifyLimits.maxQueuedEvents} / ${f.inotifyLimits.maxUserWatches} / ${f.inotifyLimits.maxUserInstances}` : 'n/a';
    return h(
      'tr',
      { dataset: { agent: a.agentId } },
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
    agents.length === 0
      ? h('p', {}, 'No live agent: start one with `fsbench agent`.')
      : h('table', {}, h('thead', {}, h('tr', {}, head.map((t) => h('th', {}, t)))), h('tbody', {}, rows)),
  );
}

/** Agent keys: enrolled (their reports count) or waiting for `fsbench agents approve`. */
function keysSection(keys) {
  const pending = keys.filter((k) => k.state === 'pending').length;
  const rows = keys.map((k) =>
    h(
      'tr',
      { dataset: { key: k.key, state: k.state } },
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
    keys.length === 0
      ? h('p', {}, 'No agent key yet.')
      : h('table', {}, h('thead', {}, h('tr', {}, ['machine', 'host', 'state', 'key', 'since'].map((t) => h('th', {}, t)))), h('tbody', {}, rows)),
  );
}

async function agentsView() {
  const { agents, keys } = await api('/v1/agents');
  show(agentsSection(agents), keysSection(keys ?? []));
  open.timers.push(
    setInterval(async () => {
      try {
        const fresh = await api('/v1/agents');
        show(agentsSection(fresh.agents), keysSection(fresh.keys ?? []));
      } catch (err) {
        showError(err.message);
      }
    }, 5000),
  );
}

// ---- one matrix -----------------------------------------------------------------------------

function chartsFor(report) {
  const ok = report.cells.filter((c) => c.ok > 0);
  if (ok.length === 0) return [h('p', {}, 'No successful run yet.')];
  const workload = ok[0].workload;
  if (workload === 'inotify') {
    if (report.knees.some((k) => k.param === 'bufferBytes')) return inotifySweepCharts(report, open.charts);
    return inotifyBarCharts(ok, open.charts);
  }
  if (workload === 'metadata') return metadataCharts(ok, open.charts);
  return genericCharts(ok, headlineMetrics(report, workload)[0]?.name ?? 'value', open.charts);
}

function kneeTable(report) {
  if (report.knees.length === 0) return null;
  const several = report.machines.length > 1;
  const size = (x) => formatSize(x);
  return h(
    'section',
    {},
    h('h3', {}, 'Knee of the buffer sweep'),
    h('p', { class: 'hint' }, "The smallest read buffer whose median throughput is within 5% of the best, next to the machine's L3 size (seed 000 claims the optimum is about the L3 size)."),
    h(
      'table',
      { class: 'knees' },
      h('thead', {}, h('tr', {}, [...(several ? ['machine'] : []), 'sweep', 'knee', 'best at', 'best', 'L3', 'knee/L3'].map((t) => h('th', {}, t)))),
      h(
        'tbody',
        {},
        report.knees.map((k) =>
          h(
            'tr',
            { dataset: { machine: k.machine } },
            several ? h('td', {}, k.machine) : null,
            h('td', {}, k.label || '(all)'),
            h('td', { class: 'num' }, k.knee ? size(k.knee.x) : 'n/a'),
            h('td', { class: 'num' }, k.knee ? size(k.knee.bestX) : 'n/a'),
            h('td', { class: 'num' }, formatNumber(k.knee?.best)),
            h('td', { class: 'num' }, k.l3Bytes === null ? 'n/a' : formatSize(k.l3Bytes)),
            h('td', { class: 'num' }, formatNumber(k.kneeOverL3)),
          ),
        ),
      ),
    ),
  );
}

/** Every cell with its headline metrics: median, CV, and the report's noise verdict. */
function cellsTable(report) {
  const workload = report.cells[0]?.workload;
  const metrics = workload ? headlineMetrics(report, workload) : [];
  return h(
    'details',
    {},
    h('summary', {}, `Cells (${report.cells.length})`),
    h(
      'table',
      { class: 'cells' },
      h('thead', {}, h('tr', {}, ['cell', 'machine', 'ok/runs', 'spread', ...metrics.map((m) => `${m.name} (${m.unit})`), 'notes'].map((t) => h('th', {}, t)))),
      h(
        'tbody',
        {},
        report.cells.map((c) =>
          h(
            'tr',
            { dataset: { cell: c.cellId, machine: c.machine } },
            h('td', { class: 'label' }, c.label),
            h('td', {}, c.machine),
            h('td', { class: 'num' }, `${c.ok}/${c.runs}`),
            h('td', { class: c.noise.noisy ? 'noisy verdict' : 'verdict', title: c.noise.reasons.join('; ') }, c.ok === 0 ? (c.problem ?? 'no result') : c.noise.noisy ? 'too noisy' : 'ok'),
            metrics.map((m) => {
              const s = c.metrics[m.name];
              return h(
                'td',
                { class: 'num', dataset: { metric: m.name }, title: s ? `n=${s.n} min ${formatNumber(s.min)} max ${formatNumber(s.max)}` : '' },
                h('span', { class: 'median' }, s ? formatNumber(s.median) : 'n/a'),
                s?.cv ? h('small', {}, ` ±${formatCv(s.cv)}`) : null,
              );
            }),
            h('td', { class: 'cell-notes' }, (c.findings ?? []).length > 0 ? h('ul', {}, c.findings.map((n) => h('li', { dataset: { kind: n.kind } }, n.text))) : null),
          ),
        ),
      ),
    ),
  );
}

/** One item per kind of note, summarised over its cells by the report; each cell's own notes are in its row. */
function notesList(report) {
  if (report.notes.length === 0) return null;
  return h(
    'section',
    { class: 'notes-section' },
    h('h3', {}, 'Notes'),
    h('ul', { class: 'notes report-notes' }, report.notes.map((g) => h('li', { class: `note ${g.severity}`, dataset: { kind: g.kind, cells: g.cells.length } }, g.text))),
  );
}

async function matrixView(id) {
  // Only the report is drawn, and it comes whole with the first page: ask for the smallest page of runs.
  const [detail, results] = await Promise.all([api(`/v1/matrices/${encodeURIComponent(id)}`), api(`/v1/matrices/${encodeURIComponent(id)}/results?limit=1`)]);
  const progress = h('span', {}, progressBar(detail.progress.stored, detail.progress.expected));
  const state = h('span', {}, stateBadge(detail.state));
  if (detail.state === 'queued' || detail.state === 'running') {
    watchMatrix(id, (p) => {
      progress.replaceChildren(progressBar(p.storedRuns, p.expectedRuns));
      state.replaceChildren(stateBadge(p.state));
      // New results change the charts: reload the view once the matrix is done.
      if (p.state === 'done') route();
    });
  }
  const report = results.report;
  const panels = chartsFor(report);
  const fingerprints = new Map((report.machines ?? []).map((m) => [m.machine, m.fingerprint]));
  const machines = (detail.machines ?? []).map((m) => {
    const facts = factsLineOf(fingerprints.get(m.machine));
    return h(
      'li',
      { dataset: { machine: m.machine } },
      `${m.machine}: `,
      progressBar(m.stored, m.expected ?? detail.progress.expected),
      ` (${m.ok} ok, ${m.failed} failed, ${m.skipped} skipped)`,
      facts ? h('small', { class: 'facts' }, ` ${facts}`) : null,
    );
  });
  show(
    h('h2', {}, detail.name, ' ', h('small', {}, `${detail.workload} · ${detail.id}`)),
    h('p', {}, state, ' ', progress, ' · ', h('a', { href: `#/compare?baseline=${encodeURIComponent(id)}` }, 'compare…'), ' · ', h('a', { href: `/v1/matrices/${encodeURIComponent(id)}/results?format=csv` }, 'CSV')),
    detail.description ? h('p', { class: 'hint' }, detail.description) : null,
    machines.length > 0 ? h('ul', { class: 'machines' }, machines) : null,
    // The charts first: the notes explain what they show.
    h('div', { class: 'charts' }, panels),
    notesList(report),
    kneeTable(report),
    cellsTable(report),
    (detail.failures ?? []).length > 0
      ? h('section', {}, h('h3', {}, 'Failures'), h('ul', {}, detail.failures.map((f) => h('li', {}, `${f.machine} ${f.cellId}#${f.repetition}: ${f.code}: ${f.message}`))))
      : null,
  );
}

// ---- compare --------------------------------------------------------------------------------

async function compareView(params) {
  const { matrices } = await api('/v1/matrices');
  const field = (name, label, input) => h('label', {}, label, input);
  const matrixSelect = (name, value) =>
    h(
      'select',
      { name },
      h('option', { value: '' }, name === 'candidate' ? '(same matrix)' : '(choose)'),
      matrices.map((m) => h('option', { value: m.id, selected: m.id === value }, `${m.name} · ${m.id}`)),
    );
  const form = h(
    'form',
    { class: 'compare-form' },
    field('baseline', 'baseline ', matrixSelect('baseline', params.get('baseline'))),
    field('baselineMachine', 'machine ', h('input', { name: 'baselineMachine', value: params.get('baselineMachine') ?? '', placeholder: 'any' })),
    field('candidate', 'candidate ', matrixSelect('candidate', params.get('candidate'))),
    field('candidateMachine', 'machine ', h('input', { name: 'candidateMachine', value: params.get('candidateMachine') ?? '', placeholder: 'any' })),
    field('metric', 'metrics ', h('input', { name: 'metric', value: params.get('metric') ?? '', placeholder: 'headline metrics' })),
    h('button', { type: 'submit' }, 'Compare'),
  );
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    const q = new URLSearchParams();
    for (const [k, v] of new FormData(form)) if (typeof v === 'string' && v.trim() !== '') q.set(k, v.trim());
    location.hash = `#/compare?${q}`;
  });
  const out = h('div', { id: 'compare-result' });
  show(h('h2', {}, 'Compare'), h('p', { class: 'hint' }, 'Two matrices, or one matrix on two machines, cell by cell: medians, delta, a 95% interval for the ratio and a Mann-Whitney p-value. Green and red deltas are significant at 0.05; grey ~ is not.'), form, out);
  if (!params.get('baseline')) return;
  const q = new URLSearchParams(params);
  q.set('format', 'json');
  const report = await api(`/v1/compare?${q}`);
  out.replaceChildren(
    ...[
    h('p', {}, `baseline: ${report.baseline.name} (${report.baseline.machines.join(', ')}) · candidate: ${report.candidate.name} (${report.candidate.machines.join(', ')})`),
    differingFactsTable(report),
    ...compareTables(report),
    report.unmatched.baseline.length + report.unmatched.candidate.length > 0
      ? h('p', { class: 'hint' }, `unmatched: ${[...report.unmatched.baseline.map((l) => `${l} (baseline only)`), ...report.unmatched.candidate.map((l) => `${l} (candidate only)`)].join(', ')}`)
      : null,
    report.notes.length > 0 ? h('ul', { class: 'notes' }, report.notes.map((n) => h('li', { class: `note ${n.severity}`, dataset: { kind: n.kind } }, n.text))) : null,
    ].filter((n) => n !== null),
  );
}

// ---- routing --------------------------------------------------------------------------------

async function route() {
  closeView();
  banner.hidden = true;
  const hash = location.hash.replace(/^#/, '') || '/';
  const [path, query] = hash.split('?');
  for (const a of document.querySelectorAll('nav a[data-nav]')) a.classList.toggle('active', path.startsWith(`/${a.dataset.nav === 'matrices' ? 'matrix' : a.dataset.nav}`) || (path === '/' && a.dataset.nav === 'matrices'));
  show(h('p', { class: 'loading' }, 'loading…'));
  try {
    if (path === '/' || path === '') await matricesView();
    else if (path === '/agents') await agentsView();
    else if (path.startsWith('/matrix/')) await matrixView(decodeURIComponent(path.slice('/matrix/'.length)));
    else if (path === '/compare') await compareView(new URLSearchParams(query ?? ''));
    else show(h('p', {}, `No page ${path}.`));
    document.body.dataset.ready = path;
  } catch (err) {
    show();
    showError(err.message);
    document.body.dataset.ready = 'error';
  }
}

window.addEventListener('hashchange', route);
route();
