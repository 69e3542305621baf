// Reading cpsim's files: a trace (Chrome trace JSON with cpsim's run in otherData.run) becomes a model of ranks,
// lanes, steps and attention tiles; a benchmark (`cpsim bench strategies --json`) becomes series per strategy.
'use strict';
(function(ns) {
const LANES = ['steps', 'compute', 'comm', 'idle'];  // tid 0..3, as sim/runtime/trace.hpp writes them
const PHASES = ['forward', 'backward'];

const gcd = (a, b) => {
  while (b) [a, b] = [b, a % b];
  return a;
};

// Positions as runs [first, count, stride, width] (sim/core/positions.hpp): `count` positions in blocks of `width`,
// block b at first + b * stride. Format 1 wrote spans [lo, hi); they are runs of one block.
const spansToRuns = (spans) => (spans || []).filter(([lo, hi]) => hi > lo).map(([lo, hi]) => [lo, hi - lo, 1, 1]);
const runLast = ([f, c, s, w]) => f + Math.floor((c - 1) / w) * s + ((c - 1) % w);

// The positions of `runs` that fall in [a, b): their count, first and last (null when none).
function runsIn(runs, a, b) {
  let count = 0, lo = Infinity, hi = -Infinity;
  for (const [f, c, s, w] of runs) {
    if (f >= b || runLast([f, c, s, w]) < a) continue;
    if (s === 1 && w === 1 || c === w) {  // one range [f, f + c)
      const x0 = Math.max(a, f), x1 = Math.min(b, f + c);
      count += x1 - x0;
      lo = Math.min(lo, x0);
      hi = Math.max(hi, x1 - 1);
      continue;
    }
    const blocks = c / w;
    const b0 = Math.max(0, Math.floor((a - f - w + 1) / s)), b1 = Math.min(blocks - 1, Math.floor((b - 1 - f) / s));
    for (let k = b0; k <= b1; ++k) {  // blocks overlapping [a, b): at most (b - a) / s + 2 of them
      const x0 = Math.max(a, f + k * s), x1 = Math.min(b, f + k * s + w);
      if (x1 <= x0) continue;
      count += x1 - x0;
      lo = Math.min(lo, x0);
      hi = Math.max(hi, x1 - 1);
    }
  }
  return count ? {count, lo, hi} : null;
}

// The chunks a list of runs touches (indices in ascending order).
function chunksOf(runs, chunk) {
  const out = new Set();
  for (const [f, c, s, w] of runs) {
    const last = runLast([f, c, s, w]);
    if (w === 1 && s === 1 || s <= chunk) {  // a block at least every chunk: every chunk between first and last
      for (let i = Math.floor(f / chunk); i <= Math.floor(last / chunk); ++i) out.add(i);
    } else {  // blocks further apart than a chunk: at most S / chunk of them
      for (let k = 0; k < c / w; ++k)
        for (let i = Math.floor((f + k * s) / chunk); i <= Math.floor((f + k * s + w - 1) / chunk); ++i) out.add(i);
    }
  }
  return [...out].sort((a, b) => a - b);
}
ns.runsIn = runsIn;

// "[0,8)", "1, 5, ..., 61 (step 4)", "[2,4) every 4 (16 blocks)": one run list as text.
ns.runsText = function(runs) {
  return (runs || [])
      .map(([f, c, s, w]) => {
        if (c === w || (s === 1 && w === 1)) return '[' + f + ',' + (f + c) + ')';
        if (w === 1)
          return c <= 3 ? [...Array(c).keys()].map((i) => f + i * s).join(', ') :
                          f + ', ' + (f + s) + ', \u2026, ' + runLast([f, c, s, w]) + ' (step ' + s + ')';
        return '[' + f + ',' + (f + w) + ') every ' + s + ' (' + c / w + ' blocks)';
      })
      .join(' ');
};

// The attention mask (sim/core/mask.hpp): a key k is visible to a query q when both lie in one document, k <= q
// (causal) and q - k < W (a window; full: |q - k| < W). Every query's visible keys are one range [lo(q), hi(q)], and
// lo, hi never decrease as q grows. Format 1 traces carry only config.causal (and, from some writers, window).
ns.traceMask = function(cfg) {
  const m = cfg.attention_mask || {kind: cfg.causal === false ? 'full' : 'causal', window: cfg.window || 0};
  const bounds = m.document_bounds && m.document_bounds.length > 2 ? m.document_bounds : null;
  return makeMask(cfg.seq, m.kind !== 'full', m.window || 0, bounds);
};

function makeMask(S, causal, W, bounds) {
  const doc = (p) => {  // the index d with bounds[d] <= p < bounds[d + 1]
    let a = 0, b = bounds.length - 2;
    while (a < b) {
      const mid = (a + b + 1) >> 1;
      if (bounds[mid] <= p)
        a = mid;
      else
        b = mid - 1;
    }
    return a;
  };
  const start = (q) => (bounds ? bounds[doc(q)] : 0), end = (q) => (bounds ? bounds[doc(q) + 1] - 1 : S - 1);
  return {
    causal,
    window: W,
    bounds,
    doc: bounds ? doc : () => 0,
    lo: (q) => Math.max(start(q), W > 0 ? q - W + 1 : 0),
    hi: (q) => Math.min(causal ? q : end(q), W > 0 && !causal ? q + W - 1 : S, end(q)),
    plain: !bounds && W === 0,
    withoutWindow: () => makeMask(S, causal, 0, bounds),
  };
}

// Whether some query in [qa, qb] sees some key in [ka, kb] (inclusive). lo and hi never decrease, so the queries
// with hi(q) >= ka are a suffix [a, qb] and those with lo(q) <= kb a prefix: they meet iff lo(a) <= kb.
function anyVisible(mask, qa, qb, ka, kb) {
  let a = qa, b = qb + 1;
  while (a < b) {
    const m = Math.floor((a + b) / 2);
    if (mask.hi(m) >= ka)
      b = m;
    else
      a = m + 1;
  }
  return a <= qb && mask.lo(a) <= kb;
}

// Visible pairs of every tile (query chunk i, key chunk j): a difference array per row of tiles, each query adding
// its visible range [lo(q), hi(q)] in O(1), so O(S + n^2) in all. Returns Float64Array(n * n).
function tilePairs(mask, S, chunk, n) {
  const pairs = new Float64Array(n * n), diff = new Float64Array(n + 1);
  for (let i = 0; i < n; ++i) {
    diff.fill(0);
    const row = pairs.subarray(i * n, (i + 1) * n);
    for (let q = i * chunk; q < Math.min(S, (i + 1) * chunk); ++q) {
      const lo = mask.lo(q), hi = mask.hi(q);
      if (hi < lo) continue;
      const jl = Math.floor(lo / chunk), jh = Math.floor(hi / chunk);
      if (jl === jh) {
        row[jl] += hi - lo + 1;
        continue;
      }
      row[jl] += (jl + 1) * chunk - lo;
      row[jh] += hi - jh * chunk + 1;
      diff[jl + 1] += 1;  // the whole chunks between, `chunk` keys each
      diff[jh] -= 1;
    }
    let run = 0;
    for (let j = 0; j < n; ++j) {
      run += diff[j];
      row[j] += run * chunk;
    }
  }
  return pairs;
}

// What the mask does to each tile: 'full' (every pair visible), 'partial', or why no pair is: 'after' (every key
// after every query: the causal triangle), 'documents' (no pair even without the window), 'window'.
function tileStates(mask, S, chunk, n, pairs) {
  const out = new Array(n * n), docsOnly = mask.withoutWindow();
  for (let i = 0; i < n; ++i)
    for (let j = 0; j < n; ++j) {
      const qa = i * chunk, qb = Math.min(S, qa + chunk) - 1, ka = j * chunk, kb = Math.min(S, ka + chunk) - 1;
      const p = pairs[i * n + j];
      let st = 'window';
      if (p >= (qb - qa + 1) * (kb - ka + 1))
        st = 'full';
      else if (p > 0)
        st = 'partial';
      else if (mask.causal && ka > qb)
        st = 'after';
      else if (!anyVisible(docsOnly, qa, qb, ka, kb))
        st = 'documents';
      out[i * n + j] = st;
    }
  return out;
}

// The tile size: the largest chunk that every layout run boundary and document bound falls on, so each tile is
// owned by one rank where the sharding allows and never straddles a document; at most 64 x 64 tiles on screen
// (coarser tiles are then partly owned and partly covered).
function chunkSize(seq, runLists, bounds) {
  let g = seq;
  for (const runs of runLists)
    for (const [f, c, s, w] of runs) {
      g = gcd(g, f);
      g = s === 1 && w === 1 || c === w ? gcd(g, c) : gcd(gcd(g, w), s);
    }
  for (const b of bounds || []) g = gcd(g, b);
  while (seq / g > 64) g *= 2;
  return g;
}

// Tiles (query chunk i, key chunk j) an attention call covers: the call's queries in chunk i and its keys in chunk
// j include a pair the mask lets through (judged on their extents in the tile).
function coveredTiles(qRuns, kRuns, chunk, mask) {
  const out = [];
  const ks = chunksOf(kRuns, chunk).map((j) => [j, runsIn(kRuns, j * chunk, (j + 1) * chunk)]);
  for (const i of chunksOf(qRuns, chunk)) {
    const q = runsIn(qRuns, i * chunk, (i + 1) * chunk);
    if (!q) continue;
    for (const [j, k] of ks)
      if (k && anyVisible(mask, q.lo, q.hi, k.lo, k.hi)) out.push([i, j]);
  }
  return out;
}

ns.frameKey = (phase, step) => phase + '|' + step;

const isObject = (x) => typeof x === 'object' && x !== null && !Array.isArray(x);
const isRun = (r) => Array.isArray(r) && r.length === 4 && r.every((x) => Number.isInteger(x) && x >= 0) && r[1] > 0;
const isSpan = (r) => Array.isArray(r) && r.length === 2 && r.every((x) => Number.isInteger(x) && x >= 0);

// The trace is checked before it is modelled, so that a damaged or hand-edited file is one clear line, never a
// JavaScript error ("Cannot read properties of undefined") nor a page that hangs drawing what its config claims:
//   config     strategy and sharding strings; ranks, seq, batch, heads, kv_heads, head_dim positive integers
//   ranks      config.ranks no more than the ranks the trace holds (entries in run.ranks, ranks its events name), and
//              config.seq no more than one past the last position its ranks hold: the page draws a row per rank and
//              works per position, so these bound its work by the size of the file (and S by MAX_SEQ)
//   events     objects; a complete event ('X') names its rank (pid) and lane (tid) with integers and its time (ts,
//              dur) with numbers; its args an object whose q/k positions are runs (format 2) or spans (format 1)
const MAX_SEQ = 2 ** 27;  // the grid's work is linear in S: some seconds at this S
function checkTrace(obj) {
  const bad = (what) => {
    throw new Error('not a trace cpsim can draw: ' + what + '; write a new one with cpsim run --trace FILE');
  };
  const run = obj.otherData.run;
  if (!isObject(run)) bad('otherData.run is not an object');
  const cfg = run.config;
  if (!isObject(cfg)) bad('otherData.run.config is missing');
  for (const k of ['strategy', 'sharding'])
    if (typeof cfg[k] !== 'string') bad('its config has no ' + k);
  for (const k of ['ranks', 'seq', 'batch', 'heads', 'kv_heads', 'head_dim'])
    if (!Number.isSafeInteger(cfg[k]) || cfg[k] < 1)
      bad('its config.' + k + ' is ' + JSON.stringify(cfg[k]) + ', not a positive integer');
  if (!Array.isArray(run.ranks)) bad('otherData.run.ranks (the per-rank totals) is missing');
  let last = -1;  // the last position any rank holds
  for (const st of run.ranks) {
    if (!isObject(st) || !Number.isInteger(st.rank)) bad('an entry of otherData.run.ranks has no rank number');
    const runs = st.position_runs !== undefined ? st.position_runs : st.positions || [];
    const ok = st.position_runs !== undefined ? isRun : isSpan;
    if (!Array.isArray(runs) || !runs.every(ok)) bad('the positions of rank ' + st.rank + ' are not runs of positions');
    for (const r of runs) last = Math.max(last, st.position_runs !== undefined ? runLast(r) : r[1] - 1);
  }
  let pids = 0;
  for (const e of obj.traceEvents) {
    if (!isObject(e)) bad('an event is not an object');
    if (e.ph !== 'X') continue;
    if (!Number.isInteger(e.pid) || e.pid < 0 || !Number.isInteger(e.tid))
      bad('an event ("' + e.name + '") names no rank (pid) or lane (tid)');
    if (!Number.isFinite(+e.ts) || !Number.isFinite(+e.dur)) bad('an event ("' + e.name + '") has no time (ts, dur)');
    if (e.args !== undefined && !isObject(e.args)) bad('an event ("' + e.name + '") has args that are not an object');
    const a = e.args || {};
    for (const [key, ok] of [['q_runs', isRun], ['k_runs', isRun], ['q', isSpan], ['k', isSpan]])
      if (a[key] !== undefined && !(Array.isArray(a[key]) && a[key].every(ok)))
        bad('an event ("' + e.name + '") has ' + key + ' that are not positions');
    pids = Math.max(pids, e.pid + 1);
  }
  const held = Math.max(run.ranks.length, pids);
  if (cfg.ranks > held)
    bad('its config claims ' + cfg.ranks + ' ranks, but its events and totals hold ' + held);
  if (cfg.seq > last + 1)
    bad('its config claims a sequence of ' + cfg.seq + ' positions, but its ranks hold ' + (last + 1));
  if (cfg.seq > MAX_SEQ) bad('its sequence of ' + cfg.seq + ' positions is more than the page draws (' + MAX_SEQ + ')');
}

// What an inference strategy's messages carry (sim/strategies/inference.hpp), by call: pass-KV's ring moves K/V,
// pass-Q's ring moves Q and its all-to-all brings the partial outputs home, decode all-gathers Q and sends the
// partials home. The timeline colours and labels these; training traces carry no such label.
const CARRIES = {
  pass_kv: {isend: 'K/V', irecv: 'K/V'},
  pass_q: {isend: 'Q', irecv: 'Q', all_to_all: 'partial out + LSE'},
  decode: {all_gather: 'Q', all_to_all: 'partial out + LSE'},
};
ns.carries = (strategy, call) => (CARRIES[strategy] || {})[call];

ns.parseTrace = function(obj) {
  if (!obj || !Array.isArray(obj.traceEvents)) throw new Error('not a trace: it has no traceEvents');
  const other = isObject(obj.otherData) ? obj.otherData : {};
  if (other.generator !== 'cpsim' || !other.run)
    throw new Error('a trace, but not one cpsim wrote (no otherData.run); write one with cpsim run --trace FILE');
  checkTrace(obj);
  const run = other.run, cfg = run.config, C = cfg.ranks;
  const ranks = [];
  for (let r = 0; r < C; ++r) {
    const stats = run.ranks.find((x) => x.rank === r) || {rank: r, positions: []};
    const runs = stats.position_runs || spansToRuns(stats.positions);  // format 2 : format 1
    ranks.push({rank: r, stats, runs, lanes: {steps: [], compute: [], comm: [], idle: []}});
  }
  let t0 = Infinity, t1 = -Infinity;
  for (const e of obj.traceEvents) {
    if (e.ph !== 'X' || !ranks[e.pid] || !LANES[e.tid]) continue;
    const ev = {name: e.name, cat: e.cat, ts: +e.ts, dur: +e.dur, args: e.args || {}, rank: e.pid};
    if (ev.args.q && !ev.args.q_runs) ev.args.q_runs = spansToRuns(ev.args.q);  // format 1: spans
    if (ev.args.k && !ev.args.k_runs) ev.args.k_runs = spansToRuns(ev.args.k);
    if (LANES[e.tid] === 'comm' && ns.carries(cfg.strategy, ev.name)) ev.args.carries = ns.carries(cfg.strategy, ev.name);
    ranks[e.pid].lanes[LANES[e.tid]].push(ev);
    t0 = Math.min(t0, ev.ts);
    t1 = Math.max(t1, ev.ts + ev.dur);
  }
  if (!(t1 >= t0)) {
    t0 = 0;
    t1 = 1;
  }
  for (const rk of ranks)
    for (const lane of LANES) rk.lanes[lane].sort((a, b) => a.ts - b.ts || b.dur - a.dur);

  // Frames: every (phase, step) that has a step slice or an attention call, in run order. (Copies and merges a
  // modeled run books before a phase's first step mark sit at step -1 and make no frame of their own.)
  const steps = {};
  for (const rk of ranks)
    for (const e of rk.lanes.steps.concat(rk.lanes.compute))
      if (e.cat !== 'phase' && e.args.phase && (e.args.step >= 0 || (e.args.q_runs || []).length > 0))
        (steps[e.args.phase] = steps[e.args.phase] || new Set()).add(e.args.step);
  const frames = [];
  for (const phase of PHASES)
    if (steps[phase])
      for (const s of [...steps[phase]].sort((a, b) => a - b)) frames.push({phase, step: s});

  const mask = ns.traceMask(cfg);
  const chunk = chunkSize(cfg.seq, ranks.map((r) => r.runs), mask.bounds), n = Math.ceil(cfg.seq / chunk);
  const pairs = tilePairs(mask, cfg.seq, chunk, n), states = tileStates(mask, cfg.seq, chunk, n, pairs);

  // tiles[frameKey] = Map(i * n + j -> {i, j, ranks: Set}) of the tiles computed at that step.
  const tiles = {};
  for (const rk of ranks)
    for (const e of rk.lanes.compute) {
      if (e.args.kind === 'skipped' || !(e.args.pairs > 0)) continue;
      const key = ns.frameKey(e.args.phase, e.args.step), m = (tiles[key] = tiles[key] || new Map());
      for (const [i, j] of coveredTiles(e.args.q_runs || [], e.args.k_runs || [], chunk, mask)) {
        const t = m.get(i * n + j) || {i, j, ranks: new Set()};
        t.ranks.add(rk.rank);
        m.set(i * n + j, t);
      }
    }
  // The owners of every chunk: owners[i] = [[rank, positions of chunk i it holds], ...] (several under striped
  // sharding, or where a tile is coarser than the layout's chunks); owner[i] the rank holding all of it, else -1.
  const owners = [...Array(n)].map(() => []);
  for (const rk of ranks)
    for (const i of chunksOf(rk.runs, chunk)) {
      const have = runsIn(rk.runs, i * chunk, (i + 1) * chunk);
      if (have) owners[i].push([rk.rank, have.count]);
    }
  const owner =
      owners.map((o, i) => (o.length === 1 && o[0][1] === Math.min(chunk, cfg.seq - i * chunk) ? o[0][0] : -1));
  return {
    kind: 'trace',
    raw: obj,
    run,
    cfg,
    ranks,
    t0,
    t1,
    frames,
    chunk,
    n,
    tiles,
    owner,
    owners,
    mask,
    pairs,
    states
  };
};

// Events of one rank at one frame, per lane.
ns.frameEvents = function(rk, phase, step) {
  const pick = (lane) => rk.lanes[lane].filter((e) => e.args.phase === phase && e.args.step === step);
  return {compute: pick('compute'), comm: pick('comm'), idle: pick('idle')};
};

// Sums over one rank's lane (time in us), optionally of one phase.
ns.laneTime = (rk, lane, phase) =>
    rk.lanes[lane].filter((e) => !phase || e.args.phase === phase).reduce((s, e) => s + e.dur, 0);

ns.parseBench = function(obj) {
  if (!obj || !Array.isArray(obj.results) || !obj.config) throw new Error('not a cpsim benchmark (no results)');
  const series = {};
  for (const r of obj.results) (series[r.strategy] = series[r.strategy] || []).push(r);
  for (const s of Object.values(series)) s.sort((a, b) => a.seq - b.seq);
  return {kind: 'bench', raw: obj, config: obj.config, series};
};

// Either kind of file, told apart by its fields.
ns.parseAny = function(obj) {
  if (obj && Array.isArray(obj.traceEvents)) return ns.parseTrace(obj);
  if (obj && Array.isArray(obj.results)) return ns.parseBench(obj);
  throw new Error('neither a cpsim trace (traceEvents) nor a cpsim benchmark (results)');
};
})(window.cpsim);
