// The timeline: one row per rank with four lanes (phase/step, compute, communication, wait), step boundaries as
// dashed lines, zoom with the wheel or the buttons, pan by dragging, a click on a step zooms to it.
'use strict';
(function(ns) {
const LABEL_W = 118, RIGHT = 14, AXIS_H = 26;
const LANE = {
  steps: 15,
  compute: 18,
  comm: 14,
  idle: 10
};
const GAP = 2, ROW_GAP = 12;
const KIND_COLORS = {
  diagonal: '#1f5a92',
  full: '#3f7cc0',
  'half-kv': '#5f9bd6',
  'half-q': '#8bb8e6',
  skipped: '#c8d3de'
};
const P2P = new Set(['isend', 'irecv', 'send', 'recv', 'sendrecv']);

// An inference step's messages by what they carry (model.js: carries): Q and the partial outputs in colours of their
// own, so that they are seen travelling; every other message by its kind of call.
const CARRY_COLORS = {'Q': 'var(--comm-q)', 'partial out + LSE': 'var(--comm-partial)', 'K/V': 'var(--comm-p2p)'};
const commColor = (e) =>
    CARRY_COLORS[e.args.carries] || (P2P.has(e.name) ? 'var(--comm-p2p)' : 'var(--comm-coll)');

function legend(parent, model) {
  const lg = ns.html('div', {class: 'legend'}, parent);
  for (const k of ['diagonal', 'full', 'half-kv', 'half-q']) ns.legendItem(lg, KIND_COLORS[k], 'compute: ' + k);
  const carried = new Set();
  for (const rk of model.ranks)
    for (const e of rk.lanes.comm)
      if (e.args.carries) carried.add(e.args.carries);
  for (const what of ['K/V', 'Q', 'partial out + LSE'])
    if (carried.has(what)) ns.legendItem(lg, CARRY_COLORS[what], 'carries ' + what);
  if (!carried.size) {
    ns.legendItem(lg, 'var(--comm-p2p)', 'send / recv');
    ns.legendItem(lg, 'var(--comm-coll)', 'collective');
  }
  ns.legendItem(lg, 'var(--idle)', 'wait');
  const step = ns.html('span', {class: 'item'}, lg);
  const s = ns.svg('svg', {width: 16, height: 12}, step);
  ns.svg('line', {x1: 8, x2: 8, y1: 0, y2: 12, class: 'step-line'}, s);
  ns.html('span', {}, step, 'step boundary');
  ns.legendItem(lg, 'var(--forward)', 'forward');
  ns.legendItem(lg, 'var(--backward)', 'backward');
}

function tooltipRows(e) {
  const a = e.args, rows = [['rank', String(e.rank)]];
  if (a.phase) rows.push(['phase / step', a.phase + (a.step >= 0 ? ' / step ' + a.step : '')]);
  rows.push(['start', ns.fmtTime(e.ts)], ['duration', ns.fmtTime(e.dur)]);
  if (a.kind)
    rows.push(
        ['block', a.kind], ['queries', ns.runsText(a.q_runs)], ['keys', ns.runsText(a.k_runs)],
        ['visible pairs', ns.fmtInt(a.pairs || 0)]);
  if (a.carries) rows.push(['carries', a.carries]);
  if (a.peer !== undefined) rows.push(['peer', 'rank ' + a.peer]);
  if (a.group) rows.push(['group', 'ranks ' + a.group.join(', ')]);
  if (a.bytes_sent !== undefined)
    rows.push(['sent', ns.fmtBytes(a.bytes_sent)], ['received', ns.fmtBytes(a.bytes_received)]);
  return rows;
}

// suffix keeps element ids unique when a second (compared) run is drawn on the same page.
ns.renderTimeline = function(section, model, state, suffix = '') {
  ns.clear(section);
  const C = model.ranks.length;
  const bar = ns.html('div', {class: 'toolbar'}, section);
  legend(bar, model);
  const tools = ns.html('div', {class: 'toolbar'}, section);
  const zoomBy = (f) => {
    const mid = (state.lo + state.hi) / 2;
    setRange(mid - ((mid - state.lo) * f), mid + (state.hi - mid) * f);
  };
  ns.html('button', {class: 'button small', title: 'zoom in'}, tools, '+').onclick = () => zoomBy(0.5);
  ns.html('button', {class: 'button small', title: 'zoom out'}, tools, '\u2212').onclick = () => zoomBy(2);
  ns.html('button', {class: 'button small', title: 'show the whole run'}, tools, 'Fit').onclick = () => fit();
  const info = ns.html('span', {class: 'hint'}, tools);
  ns.html(
      'span', {class: 'hint'}, tools,
      'Wheel: zoom at the pointer \u00b7 drag: pan \u00b7 click a step: zoom to it \u00b7 double-click: fit');

  const width = Math.max(640, section.clientWidth || 1240);
  // Taller lanes when few ranks leave room (up to 1.6x), never shorter than 0.8x.
  const top = section.getBoundingClientRect().top + 70;
  const base = LANE.steps + LANE.compute + LANE.comm + LANE.idle + 3 * GAP;
  const k = Math.min(1.6, Math.max(0.8, ((window.innerHeight - top - AXIS_H) / C - ROW_GAP) / base));
  const L = {};
  for (const [lane, h] of Object.entries(LANE)) L[lane] = Math.round(h * k);
  const rowH = L.steps + L.compute + L.comm + L.idle + 3 * GAP;
  const height = AXIS_H + C * (rowH + ROW_GAP) + 4;
  const svg = ns.svg('svg', {id: 'timeline-svg' + suffix, class: 'timeline-svg', width, height, 'data-ranks': C}, section);
  const plotW = width - LABEL_W - RIGHT;
  const span = model.t1 - model.t0, pad = span * 0.01;
  if (state.lo === undefined) {
    state.lo = model.t0 - pad;
    state.hi = model.t1 + pad;
  }
  const x = (t) => LABEL_W + ((t - state.lo) / (state.hi - state.lo)) * plotW;

  const defs = ns.svg('defs', {}, svg);
  const clip = ns.svg('clipPath', {id: 'tl-clip' + suffix}, defs);
  ns.svg('rect', {x: LABEL_W, y: 0, width: plotW, height}, clip);
  const axis = ns.svg('g', {class: 'axis'}, svg);
  const rows = ns.svg('g', {}, svg);

  function draw() {
    ns.clear(axis);
    ns.clear(rows);
    info.textContent = 'Showing ' + ns.fmtTime(state.hi - state.lo) + ' of ' + ns.fmtTime(span) + '.';
    // Ticks in time since the first event of the run.
    for (const t of ns.ticks(state.lo - model.t0, state.hi - model.t0, Math.max(3, Math.floor(plotW / 110)))) {
      const px = x(t + model.t0);
      ns.svg('line', {x1: px, x2: px, y1: AXIS_H - 5, y2: height, 'stroke-opacity': 0.5}, axis);
      ns.svg('text', {x: px, y: AXIS_H - 9, 'text-anchor': 'middle'}, axis, ns.fmtTime(t));
    }
    ns.svg('text', {x: 8, y: AXIS_H - 9, class: 'lane-label'}, axis, 'time since start');
    model.ranks.forEach((rk, r) => drawRank(rk, AXIS_H + r * (rowH + ROW_GAP)));
  }

  function drawRank(rk, y0) {
    const g = ns.svg(
        'g', {
          class: 'tl-row',
          'data-rank': rk.rank,
          'data-compute': rk.lanes.compute.length,
          'data-comm': rk.lanes.comm.length,
          'data-idle': rk.lanes.idle.length,
          'data-steps': rk.lanes.steps.filter((e) => e.cat === 'step').length,
          'data-skipped-steps':
              rk.lanes.steps.filter((e) => e.cat === 'step' && isSkipped(rk, e.args.phase, e.args.step)).length
        },
        rows);
    ns.svg('rect', {x: 0, y: y0 - 3, width: width, height: rowH + 6, fill: r2bg(rk.rank)}, g);
    ns.svg('text', {x: 8, y: y0 + 14, class: 'rank-label'}, g, 'rank ' + rk.rank);
    const ys = {}, lanes = ['steps', 'compute', 'comm', 'idle'], names = ['step', 'compute', 'comm', 'wait'];
    let y = y0;
    lanes.forEach((l, i) => {
      ys[l] = y;
      if (i > 0)
        ns.svg('text', {x: LABEL_W - 8, y: y + L[l] - 3, 'text-anchor': 'end', class: 'lane-label'}, g, names[i]);
      y += L[l] + GAP;
    });
    const body = ns.svg('g', {'clip-path': 'url(#tl-clip' + suffix + ')'}, g);
    const visible = (e) => e.ts + e.dur >= state.lo && e.ts <= state.hi;
    const rect = (e, lane, fill, extra) => {
      const x0 = x(e.ts), w = Math.max(1, x(e.ts + e.dur) - x0);
      const el = ns.svg(
          'rect', Object.assign({x: x0, y: ys[lane], width: w, height: L[lane], fill, class: 'ev'}, extra), body);
      ns.hover(el, () => [e.name, tooltipRows(e)]);
      return el;
    };
    for (const e of rk.lanes.steps.filter(visible)) {
      if (e.cat === 'phase') {
        ns.svg(
            'rect', {
              x: x(e.ts),
              y: y0 - 3,
              width: Math.max(1, x(e.ts + e.dur) - x(e.ts)),
              height: rowH + 6,
              fill: e.name === 'backward' ? 'var(--backward)' : 'var(--forward)'
            },
            body);
        continue;
      }
      // A step where this rank computes nothing and sends or receives nothing is skipped (a pruned ring's far
      // steps, a window's masked blocks): drawn grey and labelled so, not as a step of work.
      const skipped = isSkipped(rk, e.args.phase, e.args.step);
      const el = rect(
          e, 'steps', skipped ? '#e3e7ec' : '#fff',
          {stroke: '#9aa6b2', 'stroke-width': 0.6, style: 'cursor: zoom-in', class: 'ev step' + (skipped ? ' skipped' : '')});
      el.addEventListener('click', () => {
        if (!state.dragged) setRange(e.ts - e.dur * 0.03, e.ts + e.dur * 1.03);
      });
      const w = x(e.ts + e.dur) - x(e.ts);
      const label = (w > 70 ? e.args.phase + ' ' + e.args.step :
          w > 22            ? (e.args.phase || '?')[0].toUpperCase() + e.args.step :
                              '') +
          (skipped && w > 70 ? ' skipped' : '');
      if (label)
        ns.svg(
            'text', {
              x: Math.max(x(e.ts), LABEL_W) + 4,
              y: ys.steps + L.steps - 4,
              class: 'lane-label',
              'pointer-events': 'none'
            },
            body, label);
      ns.svg('line', {x1: x(e.ts), x2: x(e.ts), y1: y0 - 3, y2: y0 + rowH + 3, class: 'step-line'}, body);
    }
    for (const e of rk.lanes.compute.filter(visible)) rect(e, 'compute', KIND_COLORS[e.args.kind] || KIND_COLORS.full);
    // Transfers that overlap (an isend beside its irecv) or abut (one step's after the last) would merge into one
    // bar: each goes on the first of a few sub-rows free at its start, outlined, so every transfer shows apart.
    const comm = rk.lanes.comm.filter(visible).slice().sort((a, b) => a.ts - b.ts);
    const ends = [];
    const rowOf = comm.map((e) => {
      let k = ends.findIndex((end) => end < e.ts);
      if (k < 0) k = ends.length < 3 ? ends.length : ends.indexOf(Math.min(...ends));
      ends[k] = e.ts + e.dur;
      return k;
    });
    const subH = L.comm / Math.max(1, ends.length);
    comm.forEach((e, i) => {
      const outline = x(e.ts + e.dur) - x(e.ts) > 4 ? {stroke: '#fff', 'stroke-width': 0.8} : {};
      const attrs = Object.assign({'data-subrow': rowOf[i]}, e.args.carries ? {'data-carries': e.args.carries} : {});
      const el = rect(e, 'comm', commColor(e), Object.assign(attrs, outline));
      el.setAttribute('y', ys.comm + rowOf[i] * subH);
      el.setAttribute('height', subH);
    });
    for (const e of rk.lanes.idle.filter(visible)) rect(e, 'idle', 'var(--idle)');
  }
  const r2bg = (r) => (r % 2 ? '#fbfcfd' : '#fff');

  function setRange(lo, hi) {
    const minSpan = Math.max(span * 1e-5, 0.01);
    if (hi - lo < minSpan) {
      const m = (lo + hi) / 2;
      lo = m - minSpan / 2;
      hi = m + minSpan / 2;
    }
    state.lo = lo;
    state.hi = hi;
    draw();
  }
  function fit() { setRange(model.t0 - pad, model.t1 + pad); }

  svg.addEventListener('wheel', (ev) => {
    ev.preventDefault();
    const rect = svg.getBoundingClientRect();
    const t = state.lo + ((ev.clientX - rect.left - LABEL_W) / plotW) * (state.hi - state.lo);
    const f = ev.deltaY > 0 ? 1.25 : 0.8;
    setRange(t - (t - state.lo) * f, t + (state.hi - t) * f);
  }, {passive: false});
  svg.addEventListener('mousedown', (ev) => {
    const startX = ev.clientX, lo = state.lo, hi = state.hi;
    state.dragged = false;
    const move = (m) => {
      const dt = ((m.clientX - startX) / plotW) * (hi - lo);
      if (Math.abs(m.clientX - startX) > 3) {
        state.dragged = true;
        svg.classList.add('dragging');
      }
      if (state.dragged) setRange(lo - dt, hi - dt);
    };
    const up = () => {
      svg.classList.remove('dragging');
      window.removeEventListener('mousemove', move);
      window.removeEventListener('mouseup', up);
    };
    window.addEventListener('mousemove', move);
    window.addEventListener('mouseup', up);
  });
  svg.addEventListener('dblclick', fit);
  draw();
};
// Whether a rank did nothing at a step: no attention call with a visible pair, no transfer.
function isSkipped(rk, phase, step) {
  const at = (e) => e.args.phase === phase && e.args.step === step;
  return !rk.lanes.compute.some((e) => at(e) && e.args.pairs > 0) && !rk.lanes.comm.some(at);
}
})(window.cpsim);
