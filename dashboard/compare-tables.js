// The compare view's tables, one per metric: medians of both sides, the delta coloured by the
// verdict (grey ~ when not significant), the ratio's 95% interval and the p-value, all as the
// coordinator's compare report states them.
import { formatDelta, formatInterval, formatNumber, formatPercent, formatPValue, formatRatio, h } from './util.js';

const VERDICT_CLASS = { better: 'sig-better', worse: 'sig-worse', changed: 'sig-changed', '~': 'not-sig', 'n/a': 'no-data' };

function deltaCell(r) {
  const text = formatDelta(r.deltaPct);
  const title = r.pValue === null ? 'no test' : `p = ${formatPValue(r.pValue)}${r.significant ? '' : ' (not significant)'}`;
  return h('td', { class: `num delta ${VERDICT_CLASS[r.verdict] ?? ''}`, title, dataset: { verdict: r.verdict } }, r.significant || r.deltaPct === null ? text : `~ ${text}`);
}

function sideCell(s) {
  if (!s) return h('td', { class: 'num' }, 'n/a');
  return h('td', { class: `num${s.noisy ? ' noisy' : ''}`, title: s.noise.join('; ') }, formatNumber(s.median), h('small', {}, ` ${s.cv === null ? '' : `±${formatPercent(s.cv)} `}n=${s.n}`));
}

/** The machine facts that differ between the sides (governor, L3, scratch device ...), above the deltas they may explain. */
export function differingFactsTable(report) {
  const facts = report.differingFacts ?? [];
  if (facts.length === 0) return null;
  return h(
    'section',
    { class: 'differing-facts' },
    h('h3', {}, 'Machine facts that differ', h('small', {}, ' a delta may be theirs')),
    h(
      'table',
      { class: 'compare facts' },
      h('thead', {}, h('tr', {}, ['fact', 'baseline', 'candidate'].map((t) => h('th', {}, t)))),
      h('tbody', {}, facts.map((d) => h('tr', { dataset: { fact: d.fact } }, h('td', {}, d.fact), h('td', {}, d.a ?? 'unknown'), h('td', {}, d.b ?? 'unknown')))),
    ),
  );
}

export function compareTables(report) {
  const byMetric = new Map();
  for (const r of report.rows) {
    const list = byMetric.get(r.metric) ?? [];
    list.push(r);
    byMetric.set(r.metric, list);
  }
  return report.summary.map((s) => {
    const rows = byMetric.get(s.metric) ?? [];
    return h(
      'section',
      { class: 'compare-metric', dataset: { metric: s.metric } },
      h('h3', {}, s.metric, h('small', {}, ` ${s.direction === 'neither' ? '' : `${s.direction} is better`}`)),
      h(
        'table',
        { class: 'compare' },
        h('thead', {}, h('tr', {}, ['cell', 'baseline', 'candidate', 'delta', 'ratio 95% CI', 'p', 'notes'].map((t) => h('th', {}, t)))),
        h(
          'tbody',
          {},
          rows.map((r) =>
            h(
              'tr',
              { dataset: { label: r.label } },
              h('td', {}, r.label),
              sideCell(r.baseline),
              sideCell(r.candidate),
              deltaCell(r),
              h('td', { class: 'num' }, formatInterval(r.ci?.low, r.ci?.high, formatRatio)),
              h('td', { class: 'num' }, formatPValue(r.pValue)),
              h('td', { class: 'warnings' }, r.warnings.map((w) => w.text).join('; ')),
            ),
          ),
        ),
        h('tfoot', {}, h('tr', {}, h('td', {}, 'geomean'), h('td', {}), h('td', {}), h('td', { class: 'num geomean' }, formatDelta(s.geomeanDeltaPct)), h('td', { colspan: 3 }, `${s.significant} of ${s.cells} significant: ${s.better} better, ${s.worse} worse`))),
      ),
    );
  });
}
