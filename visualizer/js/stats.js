// Per-rank totals: work, bytes, peak memory and time per rank as bars, each with its imbalance (max / mean).
'use strict';
(function(ns) {
const W = 590, H = 236, M = {
  left: 74,
  right: 12,
  top: 12,
  bottom: 22
};

const imbalance = (xs) => {
  const mean = xs.reduce((s, x) => s + x, 0) / xs.length;
  return mean > 0 ? Math.max(...xs) / mean : 1;
};

// series: [{label, color, values: [per rank]}]; stacked or side by side.
function barChart(parent, id, title, series, fmt, stacked, balanceOf, balanceText, ticks) {
  const box = ns.html('div', {class: 'chart', 'data-chart': id}, parent);
  const C = series[0].values.length;
  const totals = [...Array(C).keys()].map(
      (r) => (stacked ? series.reduce((s, x) => s + x.values[r], 0) : Math.max(...series.map((x) => x.values[r]))));
  const tallest = Math.max(...totals, 1e-12);
  // The axis ends on a tick at or above the tallest bar: one more step when the round ticks stop below it.
  const tks = ticks ? ticks(tallest, 4) : ns.ticks(0, tallest, 4);
  if (tks.length > 1 && tks[tks.length - 1] < tallest)
    tks.push(+(tks[tks.length - 1] + (tks[1] - tks[0])).toPrecision(12));
  const top = Math.max(tks[tks.length - 1], tallest);
  const svg = ns.svg('svg', {width: W, height: H, 'data-bars': C, 'data-axis-top': top}, box);
  ns.svg('text', {x: M.left, y: 10, class: 'title'}, svg, title);
  const plotH = H - M.top - M.bottom - 8, plotW = W - M.left - M.right;
  const y = (v) => M.top + 8 + plotH - (v / top) * plotH;
  const axis = ns.svg('g', {class: 'axis'}, svg);
  for (const t of tks) {
    ns.svg('line', {x1: M.left, x2: W - M.right, y1: y(t), y2: y(t)}, axis);
    ns.svg('text', {x: M.left - 6, y: y(t) + 4, 'text-anchor': 'end'}, axis, fmt(t));
  }
  const band = plotW / C, bw = Math.min(54, band * 0.7);
  for (let r = 0; r < C; ++r) {
    const cx = M.left + band * r + band / 2;
    let base = 0;
    series.forEach((s, k) => {
      const v = s.values[r];
      const x0 = stacked ? cx - bw / 2 : cx - bw / 2 + (k * bw) / series.length;
      const w = stacked ? bw : bw / series.length;
      const y1 = y(stacked ? base + v : v), y0 = y(stacked ? base : 0);
      const el = ns.svg(
          'rect', {
            x: x0,
            y: y1,
            width: Math.max(0, w - 1),
            height: Math.max(0, y0 - y1),
            fill: s.color,
            class: 'bar',
            'data-rank': r,
            'data-series': s.label,
            'data-value': v
          },
          svg);
      ns.hover(el, () => ['rank ' + r, [[s.label, fmt(v)]]]);
      if (stacked) base += v;
    });
    ns.svg('text', {x: cx, y: H - M.bottom + 16, 'text-anchor': 'middle', class: 'label'}, svg, 'rank ' + r);
  }
  const lg = ns.html('div', {class: 'legend'}, box);
  if (series.length > 1)
    for (const s of series) ns.legendItem(lg, s.color, s.label);
  const imb = imbalance(balanceOf);
  box.setAttribute('data-imbalance', imb.toFixed(3));
  const p = ns.html('span', {class: 'imbalance'}, lg);
  p.appendChild(document.createTextNode((balanceText || 'imbalance') + ' (max / mean): '));
  ns.html('b', {}, p, imb.toFixed(2));
  return box;
}

ns.renderStats = function(section, model) {
  ns.clear(section);
  const ranks = model.ranks, backward = model.cfg.backward;
  const grid = ns.html('div', {class: 'charts'}, section);
  const per = (f) => ranks.map((rk) => f(rk.stats, rk));
  const pairs = (phase) => per((s) => (s.work && s.work[phase] ? s.work[phase].pairs : 0));
  const work = [{label: 'forward', color: '#4e79a7', values: pairs('forward')}];
  if (backward) work.push({label: 'backward', color: '#f28e2b', values: pairs('backward')});
  const totalWork = ranks.map((_, r) => work.reduce((s, x) => s + x.values[r], 0));
  barChart(
      grid, 'work', 'Work: visible query-key pairs (x heads x batch)', work, (v) => ns.fmtInt(v), true, totalWork,
      'work imbalance');
  const sent = per((s) => s.bytes_sent || 0), recv = per((s) => s.bytes_received || 0);
  barChart(
      grid, 'bytes', 'Bytes sent and received',
      [{label: 'sent', color: '#e8862a', values: sent}, {label: 'received', color: '#8b5fbf', values: recv}],
      ns.fmtBytes, false, sent, 'sent imbalance', ns.byteTicks);
  const peak = per((s) => s.peak_bytes || 0);
  barChart(
      grid, 'memory', 'Peak memory held on the device', [{label: 'peak', color: '#59a14f', values: peak}], ns.fmtBytes,
      true, peak, 'memory imbalance', ns.byteTicks);
  const time = ['compute', 'comm', 'idle'].map((lane, k) => ({
                                                 label: ['computing', 'in communication calls', 'wait'][k],
                                                 color: ['#3f7cc0', '#e8862a', '#b9c0c8'][k],
                                                 values: per((s, rk) => ns.laneTime(rk, lane) / 1000),
                                               }));
  const busy = per((s) => Object.entries(s.time_ms || {}).filter(([k]) => k !== 'idle').reduce((a, [, v]) => a + v, 0));
  barChart(
      grid, 'time', 'Time per rank (from the trace)', time, (v) => ns.fmtMs(v), false, busy, 'phase time imbalance');
  const note = ns.html('div', {class: 'stats-note'}, section);
  note.appendChild(document.createTextNode(
      'Imbalance is the largest rank\'s value over the mean: 1.00 means every ' +
      'rank carries the same load; the slowest rank sets the pace. Blocking collectives count as both communication ' +
      'and wait, since the rank waits inside them (docs/concepts.md: wait). Run wall time ' + ns.fmtMs(model.run.wall_ms || 0) + '.'));
};
})(window.cpsim);
