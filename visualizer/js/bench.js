// Benchmark charts from `cpsim bench strategies --json`: time against sequence length per strategy, forward and
// forward+backward, on log-log axes, with the single-process kernel as the dashed baseline.
'use strict';
(function(ns) {
const W = 590, H = 380, M = {
  left: 78,
  right: 16,
  top: 30,
  bottom: 48
};
const ORDER = ['single_process', 'all_gather', 'ulysses', 'ring', 'hybrid'];
const LABEL = {
  single_process: '1 process (baseline)'
};

function chart(parent, bench, field, title) {
  const box = ns.html('div', {class: 'chart', 'data-chart': field}, parent);
  const names = Object.keys(bench.series).sort((a, b) => ORDER.indexOf(a) - ORDER.indexOf(b));
  const pts = names.flatMap((s) => bench.series[s].filter((r) => r[field] > 0));
  const svg = ns.svg('svg', {width: W, height: H, 'data-series': names.length, 'data-points': pts.length}, box);
  ns.svg('text', {x: M.left, y: 16, class: 'title'}, svg, title);
  if (!pts.length) return box;
  const seqs = [...new Set(pts.map((r) => r.seq))].sort((a, b) => a - b);
  let xlo = seqs[0], xhi = seqs[seqs.length - 1];
  if (xlo === xhi) {
    xlo /= 2;
    xhi *= 2;
  }
  const ys = pts.map((r) => r[field]);
  const ylo = Math.min(...ys) / 1.3, yhi = Math.max(...ys) * 1.3;
  const plotW = W - M.left - M.right, plotH = H - M.top - M.bottom;
  const x = (s) => M.left + ((Math.log(s) - Math.log(xlo)) / (Math.log(xhi) - Math.log(xlo))) * plotW;
  const y = (v) => M.top + plotH - ((Math.log(v) - Math.log(ylo)) / (Math.log(yhi) - Math.log(ylo))) * plotH;
  const axis = ns.svg('g', {class: 'axis'}, svg);
  for (const s of seqs) {
    ns.svg('line', {x1: x(s), x2: x(s), y1: M.top, y2: M.top + plotH}, axis);
    ns.svg('text', {x: x(s), y: M.top + plotH + 16, 'text-anchor': 'middle'}, axis, ns.fmtSeq(s));
  }
  ns.svg(
      'text', {x: M.left + plotW / 2, y: H - 10, 'text-anchor': 'middle', class: 'label'}, svg,
      'sequence length S (log scale)');
  for (const t of ns.logTicks(ylo, yhi)) {
    ns.svg('line', {x1: M.left, x2: M.left + plotW, y1: y(t), y2: y(t)}, axis);
    ns.svg('text', {x: M.left - 6, y: y(t) + 4, 'text-anchor': 'end'}, axis, ns.fmtMs(t));
  }
  ns.svg(
      'text', {
        x: 0,
        y: 0,
        class: 'label',
        'text-anchor': 'middle',
        transform: 'translate(13,' + (M.top + plotH / 2) + ') rotate(-90)'
      },
      svg, 'time, slowest rank (log scale)');
  for (const s of names) {
    const rows = bench.series[s].filter((r) => r[field] > 0);
    const color = ns.strategyColors[s] || '#333';
    const dashed = s === 'single_process';
    ns.svg(
        'polyline', {
          points: rows.map((r) => x(r.seq) + ',' + y(r[field])).join(' '),
          fill: 'none',
          stroke: color,
          'stroke-width': 2.2,
          'stroke-dasharray': dashed ? '6 4' : null,
          class: 'series',
          'data-strategy': s
        },
        svg);
    for (const r of rows) {
      const dot =
          ns.svg('circle', {cx: x(r.seq), cy: y(r[field]), r: 4, fill: color, stroke: '#fff', 'stroke-width': 1}, svg);
      ns.hover(dot, () => [(LABEL[s] || s) + ', S = ' + ns.fmtSeq(r.seq), [
                      [title.split(':')[0], ns.fmtMs(r[field])]
                    ].concat(r.ratio_to_single ? [['x baseline', r.ratio_to_single.toFixed(2)]] : [])]);
    }
  }
  const lg = ns.html('div', {class: 'legend'}, box);
  for (const s of names)
    ns.legendItem(
        lg, ns.strategyColors[s] || '#333', LABEL[s] || s,
        s === 'single_process' ? 'background: repeating-linear-gradient(90deg, #6b7580 0 5px, #fff 5px 8px)' : '');
  return box;
}

ns.renderBench = function(section, bench) {
  ns.clear(section);
  if (!bench) {
    const p = ns.html('div', {class: 'empty'}, section);
    p.appendChild(document.createTextNode('No benchmark loaded. Run '));
    ns.html('code', {}, p, 'cpsim bench strategies --json > bench.json');
    p.appendChild(document.createTextNode(' and open bench.json here (Open files\u2026 or drop it on the page).'));
    return;
  }
  const c = bench.config;
  const head = ns.html('div', {class: 'toolbar'}, section);
  ns.html(
      'span', {class: 'hint'}, head,
      'cpsim bench strategies: ' + c.ranks + ' ' + c.backend + ' ranks, ' + c.sharding + ' sharding, B=' + c.batch +
          ' Nq=' + c.heads + ' Nkv=' + c.kv_heads + ' D=' + c.head_dim + ' ' + c.dtype +
          '. Time is the slowest rank\'s; the baseline is the single-process kernel on one thread.');
  const grid = ns.html('div', {class: 'charts'}, section);
  chart(grid, bench, 'fwd_ms', 'Forward time');
  chart(grid, bench, 'fwd_bwd_ms', 'Forward + backward time');
};
})(window.cpsim);
