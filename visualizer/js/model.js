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

// The tile size: the largest chunk that every span boundary (layout and compute) falls on, so tiles are exact.
function chunkSize(seq, spanLists) {
  let g = seq;
  for (const spans of spanLists)
    for (const [lo, hi] of spans) g = gcd(gcd(g, lo), hi);
  while (seq / g > 64) g *= 2;  // at most 64 x 64 tiles on screen (coarser tiles are then partly covered)
  return g;
}

// Tiles (query chunk i, key chunk j) an attention call covers: some query of its rows in chunk i sees some key of
// its columns in chunk j (key <= query when causal).
function coveredTiles(qSpans, kSpans, chunk, causal) {
  const out = [];
  for (const [qa, qb] of qSpans)
    for (const [ka, kb] of kSpans)
      for (let i = Math.floor(qa / chunk); i * chunk < qb; ++i) {
        const qHi = Math.min(qb, (i + 1) * chunk) - 1;
        for (let j = Math.floor(ka / chunk); j * chunk < kb; ++j) {
          const kLo = Math.max(ka, j * chunk);
          if (!causal || kLo <= qHi) out.push([i, j]);
        }
      }
  return out;
}

ns.frameKey = (phase, step) => phase + '|' + step;

ns.parseTrace = function(obj) {
  if (!obj || !Array.isArray(obj.traceEvents)) throw new Error('not a trace: it has no traceEvents');
  const other = obj.otherData || {};
  if (other.generator !== 'cpsim' || !other.run)
    throw new Error('a trace, but not one cpsim wrote (no otherData.run); write one with cpsim run --trace FILE');
  const run = other.run, cfg = run.config, C = cfg.ranks;
  const ranks = [];
  for (let r = 0; r < C; ++r) {
    const stats = run.ranks.find((x) => x.rank === r) || {rank: r, positions: []};
    ranks.push({rank: r, stats, spans: stats.positions, lanes: {steps: [], compute: [], comm: [], idle: []}});
  }
  let t0 = Infinity, t1 = -Infinity;
  for (const e of obj.traceEvents) {
    if (e.ph !== 'X' || !ranks[e.pid] || !LANES[e.tid]) continue;
    const ev = {name: e.name, cat: e.cat, ts: +e.ts, dur: +e.dur, args: e.args || {}, rank: e.pid};
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
      if (e.cat !== 'phase' && e.args.phase && (e.args.step >= 0 || (e.args.q || []).length > 0))
        (steps[e.args.phase] = steps[e.args.phase] || new Set()).add(e.args.step);
  const frames = [];
  for (const phase of PHASES)
    if (steps[phase])
      for (const s of [...steps[phase]].sort((a, b) => a - b)) frames.push({phase, step: s});

  const spanLists = ranks.map((r) => r.spans);
  for (const rk of ranks)
    for (const e of rk.lanes.compute) spanLists.push(e.args.q || [], e.args.k || []);
  const chunk = chunkSize(cfg.seq, spanLists), n = Math.ceil(cfg.seq / chunk);

  // tiles[frameKey] = Map(i * n + j -> {i, j, ranks: Set}) of the tiles computed at that step.
  const tiles = {};
  for (const rk of ranks)
    for (const e of rk.lanes.compute) {
      if (e.args.kind === 'skipped' || !(e.args.pairs > 0)) continue;
      const key = ns.frameKey(e.args.phase, e.args.step), m = (tiles[key] = tiles[key] || new Map());
      for (const [i, j] of coveredTiles(e.args.q || [], e.args.k || [], chunk, cfg.causal)) {
        const t = m.get(i * n + j) || {i, j, ranks: new Set()};
        t.ranks.add(rk.rank);
        m.set(i * n + j, t);
      }
    }
  // The owner of every chunk (the rank whose layout spans hold it).
  const owner = new Array(n).fill(-1);
  for (const rk of ranks)
    for (const [lo, hi] of rk.spans)
      for (let i = Math.floor(lo / chunk); i * chunk < hi; ++i) owner[i] = rk.rank;
  return {kind: 'trace', raw: obj, run, cfg, ranks, t0, t1, frames, chunk, n, tiles, owner};
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
