// The attention grid: the S x S causal score matrix at chunk granularity, each tile coloured by the rank that
// computes it at the chosen step (stripes when several ranks share a tile, each with its own heads), with a step
// slider and an animation. Tiles come from the compute events' query/key spans (model.js).
'use strict';
(function(ns) {
const EXPLAIN = {
  ring: 'Q stays on its rank and K/V travel round the ring: at forward step i, rank r holds the K/V of rank ' +
      '(r \u2212 i) mod C and computes only the visible part of Q \u00d7 that K/V. With zigzag sharding every rank ' +
      'gets the same number of tiles at every step.',
  ulysses: 'An all-to-all swaps sequence sharding for head sharding: every rank then holds every position for ' +
      'Nq/C heads and computes the whole causal triangle for them. Each tile is split into C stripes, one per rank ' +
      '(one group of heads each).',
  all_gather: 'Each rank all-gathers K and V and computes its own query chunks against the prefix of keys each ' +
      'chunk can see. No merge is needed; the price is full-length K/V on every rank.',
  hybrid: 'All-to-all inside groups of A ranks, then a ring across the R groups: a tile is computed by the A ' +
      'ranks of one group (A stripes, one group of heads each), and the ring moves which tiles each group sees.',
};

ns.renderGrid = function(section, model, state) {
  ns.clear(section);
  const cfg = model.cfg, n = model.n, C = model.ranks.length;
  const phases = [...new Set(model.frames.map((f) => f.phase))];
  if (!phases.includes(state.phase)) state.phase = phases[0];
  const steps = model.frames.filter((f) => f.phase === state.phase).map((f) => f.step);
  if (state.step !== 'all' && !steps.includes(state.step)) state.step = steps[0];

  const layout = ns.html('div', {class: 'grid-layout'}, section);
  const left = ns.html('div', {}, layout), side = ns.html('div', {class: 'grid-side'}, layout);

  // The frame's tiles, and the phase's tiles of earlier steps (shown faded).
  const tileMap = (step) => model.tiles[ns.frameKey(state.phase, step)] || new Map();
  const current = new Map(), earlier = new Map();
  for (const s of steps) {
    const into = state.step === 'all' || s === state.step ? current : s < state.step ? earlier : null;
    if (!into) continue;
    for (const [k, t] of tileMap(s)) {
      const x = into.get(k) || {i: t.i, j: t.j, ranks: new Set()};
      t.ranks.forEach((r) => x.ranks.add(r));
      into.set(k, x);
    }
  }

  // The grid itself.
  const avail = Math.min(window.innerHeight - 190, 600);
  const tile = Math.max(4, Math.floor((Math.max(300, avail) - 70) / n));
  const M = {left: 58, top: 58}, size = tile * n;
  const perRank = new Array(C).fill(0);
  current.forEach((t) => t.ranks.forEach((r) => ++perRank[r]));
  let visibleTiles = 0;
  for (let i = 0; i < n; ++i)
    for (let j = 0; j < n; ++j)
      if (!cfg.causal || j <= i) ++visibleTiles;
  const svg = ns.svg(
      'svg', {
        id: 'grid-svg',
        width: M.left + size + 12,
        height: M.top + size + 30,
        'data-phase': state.phase,
        'data-step': state.step,
        'data-chunks': n,
        'data-tiles': current.size,
        'data-tiles-visible': visibleTiles,
        'data-rank-tiles': perRank.join(','),
        'data-earlier-tiles': state.earlier ? earlier.size : 0
      },
      left);
  ns.svg(
      'text', {x: M.left + size / 2, y: 14, 'text-anchor': 'middle', class: 'label'}, svg,
      'keys (K/V chunks of ' + model.chunk + ' positions) \u2192');
  const ql = ns.svg(
      'text', {
        x: 0,
        y: 0,
        'text-anchor': 'middle',
        class: 'label',
        transform: 'translate(12,' + (M.top + size / 2) + ') rotate(-90)'
      },
      svg);
  ql.textContent = '\u2190 queries (Q chunks)';
  const every = Math.ceil(16 / tile);
  for (let i = 0; i < n; ++i) {
    const c = model.owner[i] >= 0 ? ns.rankColor(model.owner[i], C) : '#ccc';
    const lo = i * model.chunk, hi = Math.min(cfg.seq, lo + model.chunk);
    const ownerText = model.owner[i] >= 0 ? 'owned by rank ' + model.owner[i] : '';
    const top = ns.svg('rect', {x: M.left + i * tile, y: M.top - 10, width: tile - 1, height: 7, fill: c}, svg);
    const side_ = ns.svg('rect', {x: M.left - 10, y: M.top + i * tile, width: 7, height: tile - 1, fill: c}, svg);
    for (const el of [top, side_])
      ns.hover(el, () => ['chunk ' + i, [['positions', '[' + lo + ',' + hi + ')'], ['', ownerText]]]);
    if (i % every === 0) {
      ns.svg(
          'text', {x: M.left + i * tile + tile / 2, y: M.top - 15, 'text-anchor': 'middle', class: 'label'}, svg,
          String(i));
      ns.svg(
          'text', {x: M.left - 14, y: M.top + i * tile + tile / 2 + 4, 'text-anchor': 'end', class: 'label'}, svg,
          String(i));
    }
  }
  const g = ns.svg('g', {}, svg);
  for (let i = 0; i < n; ++i)
    for (let j = 0; j < n; ++j) {
      if (cfg.causal && j > i) continue;
      const key = i * n + j, x = M.left + j * tile, y = M.top + i * tile;
      const now = current.get(key), before = state.earlier ? earlier.get(key) : undefined;
      const t = now || before;
      const cell = ns.svg('g', {class: 'tile' + (now ? ' computed' : ''), 'data-q': i, 'data-k': j}, g);
      ns.svg('rect', {x, y, width: tile - 1, height: tile - 1, fill: '#eef1f4'}, cell);
      if (t) {
        const rs = [...t.ranks].sort((a, b) => a - b), w = (tile - 1) / rs.length;
        rs.forEach(
            (r, s) => ns.svg(
                'rect',
                {x: x + s * w, y, width: w, height: tile - 1, fill: ns.rankColor(r, C), 'fill-opacity': now ? 1 : 0.25},
                cell));
      }
      if (cfg.causal && i === j)  // the masked upper half of a diagonal tile
        ns.svg(
            'polygon',
            {points: [x, y, x + tile - 1, y, x + tile - 1, y + tile - 1].join(' '), fill: '#fff', 'fill-opacity': 0.72},
            cell);
      ns.hover(cell, () => {
        const rows = [
          ['queries', '[' + i * model.chunk + ',' + (i + 1) * model.chunk + ')'],
          ['keys', '[' + j * model.chunk + ',' + (j + 1) * model.chunk + ')']
        ];
        if (now)
          rows.push(['computed by', 'rank ' + [...now.ranks].sort((a, b) => a - b).join(', ')]);
        else if (before)
          rows.push(['computed earlier by', 'rank ' + [...before.ranks].join(', ')]);
        else
          rows.push(['', 'not computed at this step']);
        return ['tile (' + i + ', ' + j + ')', rows];
      });
    }
  const lg = ns.html('div', {class: 'legend', style: 'margin-left:' + M.left + 'px; max-width:' + size + 'px'}, left);
  ns.legendItem(lg, ns.rankColor(0, C), 'computed at this step (rank colour)');
  ns.legendItem(lg, ns.rankColor(0, C), 'at an earlier step', 'opacity: 0.3');
  ns.legendItem(lg, '#eef1f4', 'not computed');
  ns.legendItem(lg, 'linear-gradient(45deg, #eef1f4 50%, #fff 50%)', 'diagonal tile: upper half masked');
  ns.svg(
      'text', {x: M.left, y: M.top + size + 20, class: 'label'}, svg,
      current.size + ' of ' + visibleTiles + ' visible tiles computed ' +
          (state.step === 'all' ? 'in the ' + state.phase + ' phase' : 'at this step'));

  // Controls.
  ns.html('h3', {}, side, 'Which rank computes which tile');
  ns.html('p', {}, side, EXPLAIN[cfg.strategy] || '');
  if (cfg.sharding === 'contiguous' && cfg.causal && cfg.strategy !== 'ulysses')
    ns.html(
        'p', {}, side,
        'With contiguous sharding the early ranks skip most blocks (every key they are sent is later than ' +
            'their queries) while the last rank computes at every step: the imbalance zigzag sharding fixes.');
  const ctl = ns.html('div', {class: 'step-controls'}, side);
  const sel = ns.html('select', {'aria-label': 'phase'}, ctl);
  for (const p of phases) ns.html('option', {value: p}, sel, p).selected = p === state.phase;
  sel.onchange = () => {
    state.phase = sel.value;
    state.step = 0;
    state.onchange();
  };
  const pos = state.step === 'all' ? steps.length : steps.indexOf(state.step);
  const go = (k) => {
    state.step = k >= steps.length ? 'all' : steps[Math.max(0, k)];
    state.onchange();
  };
  state.stepBy = (d) => go(Math.min(steps.length, Math.max(0, pos + d)));  // the arrow keys
  ns.html('button', {class: 'button small', title: 'previous step'}, ctl, '\u25c0').onclick = () =>
      go(Math.max(0, pos - 1));
  const slider = ns.html('input', {type: 'range', min: 0, max: steps.length, value: pos, 'aria-label': 'step'}, ctl);
  slider.oninput = () => go(+slider.value);
  ns.html('button', {class: 'button small', title: 'next step'}, ctl, '\u25b6').onclick = () =>
      go(Math.min(steps.length, pos + 1));
  const play = ns.html('button', {class: 'button small'}, ctl, state.playing ? 'Pause' : 'Play');
  play.onclick = () => {
    if (state.playing) {
      clearInterval(state.playing);
      state.playing = null;
      state.onchange();
      return;
    }
    if (pos >= steps.length - 1) go(0);
    state.playing = setInterval(() => {
      const k = state.step === 'all' ? steps.length : steps.indexOf(state.step);
      if (k >= steps.length - 1) {
        clearInterval(state.playing);
        state.playing = null;
      }
      go(Math.min(steps.length - 1, k + 1));
    }, 900);
    state.onchange();
  };
  ns.html(
      'span', {class: 'hint'}, ctl,
      state.step === 'all' ? 'all steps of the phase' :
                             'step ' + state.step + ' (of ' + steps[0] + '\u2013' + steps[steps.length - 1] + ')');
  const lab = ns.html('label', {class: 'hint'}, side);
  const cb = ns.html('input', {type: 'checkbox'}, lab);
  cb.checked = !!state.earlier;
  cb.onchange = () => {
    state.earlier = cb.checked;
    state.onchange();
  };
  lab.appendChild(document.createTextNode(' show tiles of earlier steps (faded)'));

  // Per rank at this step: tiles, pairs, messages.
  const table = ns.html('table', {class: 'ranks'}, side);
  const head = ns.html('tr', {}, ns.html('thead', {}, table));
  for (const h of ['rank', 'owns chunks', 'tiles', 'pairs', 'communication at this step']) ns.html('th', {}, head, h);
  const body = ns.html('tbody', {}, table);
  for (const rk of model.ranks) {
    const tr = ns.html('tr', {}, body);
    const c0 = ns.html('td', {}, tr);
    ns.html('span', {class: 'swatch', style: 'background:' + ns.rankColor(rk.rank, C)}, c0);
    c0.appendChild(document.createTextNode(' ' + rk.rank));
    const own = model.owner.map((o, i) => (o === rk.rank ? i : -1)).filter((i) => i >= 0);
    ns.html('td', {}, tr, own.join(', '));
    const evs = state.step === 'all' ? {
      compute: rk.lanes.compute.filter((e) => e.args.phase === state.phase),
      comm: rk.lanes.comm.filter((e) => e.args.phase === state.phase)
    } :
                                       ns.frameEvents(rk, state.phase, state.step);
    ns.html('td', {class: 'num'}, tr, String(perRank[rk.rank]));
    ns.html('td', {class: 'num'}, tr, ns.fmtInt(evs.compute.reduce((s, e) => s + (e.args.pairs || 0), 0)));
    ns.html('td', {}, tr, commText(evs.comm));
  }
  ns.html(
      'p', {}, side,
      'Rows are query chunks, columns key chunks; the strips along the axes show which rank owns ' +
          'each chunk (' + cfg.sharding + ' sharding). Hover a tile for its positions.');
};

// "isend 8.0 KiB \u2192 1, irecv 8.0 KiB \u2190 3", collectives by name and volume.
function commText(evs) {
  if (!evs.length) return '\u2013';
  const parts = [];
  for (const e of evs) {
    const a = e.args;
    if (a.peer !== undefined) {
      const out = a.bytes_sent > 0;
      parts.push(
          e.name + ' ' + ns.fmtBytes(out ? a.bytes_sent : a.bytes_received) + (out ? ' \u2192 ' : ' \u2190 ') + a.peer);
    } else {
      parts.push(e.name + ' ' + ns.fmtBytes(a.bytes_sent));
    }
  }
  return parts.join(', ');
}
})(window.cpsim);
