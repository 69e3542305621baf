// The attention grid: the S x S score matrix at chunk granularity under the run's mask (causal, documents, a
// window), each tile coloured by the rank that computes it at the chosen step (stripes when several ranks share a
// tile, each with its own heads), with a step slider and an animation. Tiles come from the compute events' query/key
// runs; what the mask lets through each tile, from the trace's mask (model.js).
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
  pruned_ring: 'The ring, but a K/V block travels only as far as some rank still sees it, clockwise or the other ' +
      'way round, whichever is shorter: under a window it becomes an exchange with the neighbours, and blocks ' +
      'no rank sees are never sent.',
  mask_exchange: 'Every rank receives from each owner exactly the K/V rows its queries see, one stage per owner, ' +
      'computing each stage while the next arrives; in the backward the dK/dV partial sums go back to the owners.',
  pass_kv: 'Prefill with a KV cache: only the rows of the new tokens (after the P cached ones) have queries. Their Q ' +
      'stays; every rank\'s K/V (its share of the cache and of the new tokens) travel the ring, so at step i rank r ' +
      'computes its new tokens against the K/V of rank (r \u2212 i) mod C.',
  pass_q: 'Prefill with a KV cache: K/V stay where they were written; the Q of the new tokens travels the ring, ' +
      'so at step i rank r computes the queries of rank (r \u2212 i) mod C against its own K/V, and the partial ' +
      'outputs go home in one all-to-all at the end, where they are merged by LSE.',
  decode: 'Decode: the new token\'s Q goes to every rank (all-gather); each rank computes it against its share of ' +
      'the cache, and the partial outputs go home by all-to-all, where they are merged by LSE.',
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
  const count = (st) => model.states.filter((x) => x === st).length;
  const visibleTiles = count('full') + count('partial');
  const maskedDocs = count('documents'), maskedWindow = count('window'), bounds = model.mask.bounds || [];
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
        'data-tiles-partial': count('partial'),
        'data-tiles-masked': maskedDocs + maskedWindow + count('after'),
        'data-tiles-masked-documents': maskedDocs,
        'data-tiles-masked-window': maskedWindow,
        'data-chunk': model.chunk,
        'data-documents': bounds.length ? bounds.length - 1 : 1,
        'data-window': model.mask.window,
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
    const lo = i * model.chunk, hi = Math.min(cfg.seq, lo + model.chunk), own = model.owners[i];
    const ownerText =
        own.length === 1 ? 'owned by rank ' + own[0][0] : own.map(([r, k]) => 'rank ' + r + ' holds ' + k).join(', ');
    // The owners' strip: one colour per rank that holds positions of the chunk, in proportion to how many.
    const total = own.reduce((a, [, k]) => a + k, 0) || 1;
    let at = 0;
    const strip =
        ns.svg('g', {class: 'owner', 'data-chunk-index': i, 'data-owners': own.map(([r]) => r).join(',')}, svg);
    if (!own.length) own.push([-1, 1]);
    for (const [r, k] of own) {
      const c = r >= 0 ? ns.rankColor(r, C) : '#ccc', f = k / total, w = (tile - 1) * f, o = (tile - 1) * at;
      ns.svg('rect', {x: M.left + i * tile + o, y: M.top - 10, width: w, height: 7, fill: c}, strip);
      ns.svg('rect', {x: M.left - 10, y: M.top + i * tile + o, width: 7, height: w, fill: c}, strip);
      at += f;
    }
    ns.hover(strip, () => ['chunk ' + i, [['positions', '[' + lo + ',' + hi + ')'], ['', ownerText]]]);
    if (i % every === 0) {
      ns.svg(
          'text', {x: M.left + i * tile + tile / 2, y: M.top - 15, 'text-anchor': 'middle', class: 'label'}, svg,
          String(i));
      ns.svg(
          'text', {x: M.left - 14, y: M.top + i * tile + tile / 2 + 4, 'text-anchor': 'end', class: 'label'}, svg,
          String(i));
    }
  }
  const g = ns.svg('g', {}, svg), mask = model.mask;
  const MASKED = {documents: 'url(#mask-documents)', window: 'url(#mask-window)'};
  const defs = ns.svg('defs', {}, svg);
  for (const [id, angle, color] of [['mask-documents', 45, '#c9ced6'], ['mask-window', -45, '#d8c9b0']]) {
    const pat = ns.svg(
        'pattern', {id, width: 6, height: 6, patternUnits: 'userSpaceOnUse', patternTransform: 'rotate(' + angle + ')'},
        defs);
    ns.svg('rect', {width: 6, height: 6, fill: '#fafbfc'}, pat);
    ns.svg('line', {x1: 0, y1: 0, x2: 0, y2: 6, stroke: color, 'stroke-width': 2}, pat);
  }
  // The visible keys of query q inside key chunk j, as text: "keys 4-11", or "none".
  const seen = (q, j) => {
    const lo = Math.max(mask.lo(q), j * model.chunk),
          hi = Math.min(mask.hi(q), Math.min(cfg.seq, (j + 1) * model.chunk) - 1);
    return hi >= lo ? 'keys ' + lo + (hi > lo ? '\u2013' + hi : '') : 'no key';
  };
  for (let i = 0; i < n; ++i)
    for (let j = 0; j < n; ++j) {
      const key = i * n + j, st = model.states[key];
      if (st === 'after') continue;  // the causal triangle's empty half, drawn as nothing
      const x = M.left + j * tile, y = M.top + i * tile;
      const now = current.get(key), before = state.earlier ? earlier.get(key) : undefined;
      const t = now || before;
      const cell = ns.svg(
          'g', {
            class: 'tile' + (now ? ' computed' : ''),
            'data-q': i,
            'data-k': j,
            'data-mask': st,
            'data-pairs': model.pairs[key]
          },
          g);
      ns.svg('rect', {x, y, width: tile - 1, height: tile - 1, fill: MASKED[st] || '#eef1f4'}, cell);
      if (t) {
        const rs = [...t.ranks].sort((a, b) => a - b), w = (tile - 1) / rs.length;
        rs.forEach(
            (r, s) => ns.svg(
                'rect',
                {x: x + s * w, y, width: w, height: tile - 1, fill: ns.rankColor(r, C), 'fill-opacity': now ? 1 : 0.25},
                cell));
      }
      if (st === 'partial') cell.appendChild(maskedPart(mask, i, j, x, y, tile, model.chunk, cfg.seq));
      ns.hover(cell, () => {
        const q0 = i * model.chunk, q1 = Math.min(cfg.seq, (i + 1) * model.chunk),
              k1 = Math.min(cfg.seq, (j + 1) * model.chunk);
        const area = (q1 - q0) * (k1 - j * model.chunk);
        const rows = [
          ['queries', '[' + q0 + ',' + q1 + ')'], ['keys', '[' + j * model.chunk + ',' + k1 + ')'],
          [
            'visible pairs',
            ns.fmtInt(model.pairs[key]) + ' of ' + ns.fmtInt(area) +
                (st === 'documents'  ? ' (queries and keys in different documents)' :
                     st === 'window' ? ' (every key outside the window)' :
                                       '')
          ]
        ];
        if (st === 'partial') {
          rows.push(['query ' + q0 + ' sees', seen(q0, j)]);
          if (q1 - 1 > q0) rows.push(['query ' + (q1 - 1) + ' sees', seen(q1 - 1, j)]);
        }
        if (now)
          rows.push(['computed by', 'rank ' + [...now.ranks].sort((a, b) => a - b).join(', ')]);
        else if (before)
          rows.push(['computed earlier by', 'rank ' + [...before.ranks].join(', ')]);
        else
          rows.push(['', 'not computed at this step']);
        return ['tile (' + i + ', ' + j + ')', rows];
      });
    }
  // Document boundaries (both axes) and the window's edges, over the tiles.
  const over = ns.svg('g', {class: 'mask-lines', 'pointer-events': 'none'}, svg), px = (p) => (p / model.chunk) * tile;
  const inner = bounds.slice(1, -1);
  if (inner.length <= 4 * n)
    for (const b of inner) {  // under the causal mask only below the diagonal, where tiles are drawn
      const at = px(b) - 0.5;
      ns.svg(
          'line',
          {class: 'doc-line', x1: M.left + at, x2: M.left + at, y1: M.top + (mask.causal ? at : 0), y2: M.top + size},
          over);
      ns.svg(
          'line',
          {class: 'doc-line', y1: M.top + at, y2: M.top + at, x1: M.left, x2: M.left + (mask.causal ? at : size)},
          over);
    }
  if (mask.window > 0 && mask.window < cfg.seq) {  // q - k = W (and, without the causal mask, k - q = W)
    const W = mask.window;
    ns.svg(
        'line', {class: 'window-edge', x1: M.left, y1: M.top + px(W), x2: M.left + px(cfg.seq - W), y2: M.top + size},
        over);
    if (!mask.causal)
      ns.svg(
          'line', {class: 'window-edge', x1: M.left + px(W), y1: M.top, x2: M.left + size, y2: M.top + px(cfg.seq - W)},
          over);
  }
  const lg = ns.html('div', {class: 'legend', style: 'margin-left:' + M.left + 'px; max-width:' + size + 'px'}, left);
  ns.legendItem(lg, ns.rankColor(0, C), 'computed at this step (rank colour)');
  ns.legendItem(lg, ns.rankColor(0, C), 'at an earlier step', 'opacity: 0.3');
  ns.legendItem(lg, '#eef1f4', 'not computed');
  ns.legendItem(
      lg, 'linear-gradient(45deg, #eef1f4 50%, #fff 50%)',
      mask.plain && mask.causal ? 'diagonal tile: upper half masked' :
                                  'partly masked: white over the pairs the mask hides');
  if (maskedDocs)
    ns.legendItem(
        lg, 'repeating-linear-gradient(45deg, #fafbfc 0 3px, #c9ced6 3px 5px)',
        'masked: queries and keys in different documents');
  if (maskedWindow)
    ns.legendItem(
        lg, 'repeating-linear-gradient(-45deg, #fafbfc 0 3px, #d8c9b0 3px 5px)',
        'masked: every key more than W = ' + mask.window + ' positions back');
  if (inner.length && inner.length <= 4 * n)
    ns.legendItem(lg, '#1d2733', 'document boundary (' + (inner.length + 1) + ' documents)', 'height: 2px');
  if (inner.length > 4 * n)
    ns.html('span', {class: 'item'}, lg, inner.length + 1 + ' documents: too many to draw their boundaries');
  if (mask.window > 0 && mask.window < cfg.seq)
    ns.legendItem(
        lg, '#b5651d', 'window edge: q \u2212 k = W (visible keys lie between it and the diagonal)', 'height: 2px');
  ns.svg(
      'text', {x: M.left, y: M.top + size + 20, class: 'label'}, svg,
      current.size + ' of ' + visibleTiles + ' visible tiles computed ' +
          (state.step === 'all' ? 'in the ' + state.phase + ' phase' : 'at this step'));

  // Controls.
  ns.html('h3', {}, side, 'Which rank computes which tile');
  ns.html('p', {}, side, EXPLAIN[cfg.strategy] || '');
  if (!model.mask.plain)
    ns.html(
        'p', {}, side,
        'Under the ' + (cfg.mask || 'mask') + ' mask a tile is drawn as masked when no query of it sees a key of it, ' +
            'partly masked when some pairs are hidden; hover a tile for its visible pairs.');
  if (cfg.sharding === 'contiguous' && model.mask.plain && cfg.causal && cfg.strategy !== 'ulysses')
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
    const some = model.owners.map((o, i) => (model.owner[i] < 0 && o.some(([r]) => r === rk.rank) ? i : -1))
                     .filter((i) => i >= 0);
    ns.html(
        'td', {}, tr, own.join(', ') + (some.length ? (own.length ? '; ' : '') + 'part of ' + rangesText(some) : ''));
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
  kvTraffic(side, model);
};

// Which K/V travels where in the forward: for every receiving rank (rows) and owner (columns), the rows of the
// owner's K/V its queries see (the need) and the rows the strategy sends it (run.ranks[].kv_rows_needed and
// kv_rows_sent, sim/strategies/kv_traffic.hpp). Sent and needed, sent for nothing, or never sent.
function kvTraffic(side, model) {
  const ranks = model.run.ranks, C = model.ranks.length;
  if (!ranks.length || !ranks.every((r) => Array.isArray(r.kv_rows_needed) && Array.isArray(r.kv_rows_sent))) return;
  ns.html('h3', {}, side, 'Which K/V blocks travel to which rank');
  let needed = 0, redundant = 0, never = 0;
  const table = ns.html('table', {class: 'ranks kv-traffic', id: 'kv-traffic'}, side);
  const head = ns.html('tr', {}, ns.html('thead', {}, table));
  ns.html('th', {}, head, 'to \\ from');
  for (let o = 0; o < C; ++o) ns.html('th', {}, head, 'rank ' + o);
  const body = ns.html('tbody', {}, table);
  for (const st of [...ranks].sort((a, b) => a.rank - b.rank)) {
    const tr = ns.html('tr', {}, body);
    const c0 = ns.html('td', {}, tr);
    ns.html('span', {class: 'swatch', style: 'background:' + ns.rankColor(st.rank, C)}, c0);
    c0.appendChild(document.createTextNode(' ' + st.rank));
    for (let o = 0; o < C; ++o) {
      const need = st.kv_rows_needed[o] || 0, sent = st.kv_rows_sent[o] || 0;
      const kind = o === st.rank ? 'own' : sent > 0 && need > 0 ? 'needed' : sent > 0 ? 'redundant' : 'never';
      if (kind === 'needed') ++needed;
      if (kind === 'redundant') ++redundant;
      if (kind === 'never') ++never;
      const text = kind === 'own' ? '\u2013' : kind === 'never' ? 'never sent' : sent + ' rows (' + need + ' seen)';
      ns.html('td', {class: 'num kv-' + kind, 'data-kv': kind}, tr, text);
    }
  }
  table.setAttribute('data-kv-needed', needed);
  table.setAttribute('data-kv-redundant', redundant);
  table.setAttribute('data-kv-never', never);
  ns.html(
      'p', {class: 'hint'}, side,
      'Forward K/V rows of each owner (columns) sent to each rank (rows), against the rows its queries see: ' +
          'green where sent and seen, orange where sent but no query sees them, grey where never sent. ' +
          needed + ' blocks travel where they are needed, ' + redundant + ' for nothing, ' + never + ' never.');
}

// The masked part of a partly masked tile, one strip per pixel row: the keys left of lo(q) and right of hi(q) of
// the row's middle query, whitened.
function maskedPart(mask, i, j, x, y, tile, chunk, S) {
  const rows = Math.max(1, tile - 1), k0 = j * chunk, k1 = Math.min(S, (j + 1) * chunk), w = (tile - 1) / (k1 - k0);
  let d = '';
  for (let r = 0; r < rows; ++r) {
    const q = Math.min(S - 1, Math.floor(i * chunk + ((r + 0.5) * chunk) / rows));
    const lo = Math.max(k0, Math.min(k1, mask.lo(q))), hi = Math.max(k0, Math.min(k1, mask.hi(q) + 1));
    const spans = hi > lo ? [[k0, lo], [hi, k1]] : [[k0, k1]];
    for (const [a, b] of spans)
      if (b > a)
        d += 'M' + (x + (a - k0) * w).toFixed(2) + ' ' + (y + r) + 'h' + ((b - a) * w).toFixed(2) + 'v1h' +
            (-(b - a) * w).toFixed(2) + 'z';
  }
  return ns.svg('path', {d, fill: '#fff', 'fill-opacity': 0.72, class: 'masked-part'});
}

// "3-7, 12": ascending indices as ranges.
function rangesText(xs) {
  const out = [];
  for (let a = 0; a < xs.length;) {
    let b = a;
    while (b + 1 < xs.length && xs[b + 1] === xs[b] + 1) ++b;
    out.push(b > a ? xs[a] + '\u2013' + xs[b] : String(xs[a]));
    a = b + 1;
  }
  return out.join(', ');
}

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
