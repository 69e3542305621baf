// The page: loads inlined data (cpsim run --html) or files (picker, drag and drop), switches views, keeps the view
// and step in the address (#view=grid&phase=forward&step=1) so a link or a headless browser can open one.
'use strict';
(function(ns) {
const VIEWS = ['timeline', 'grid', 'stats', 'bench'];
const state = {
  view: 'timeline',
  trace: null,
  compare: null,  // a second trace (measured or modeled) whose timeline is drawn under the first
  bench: null,
  timeline: {},
  compareTimeline: {},
  grid: {phase: 'forward', step: 0, earlier: false}
};
state.grid.onchange = () => {
  writeHash();
  render();
};

function message(text) { document.getElementById('message').textContent = text || ''; }

function readHash() {
  const h = new URLSearchParams(location.hash.replace(/^#/, ''));
  if (VIEWS.includes(h.get('view'))) state.view = h.get('view');
  if (h.get('phase')) state.grid.phase = h.get('phase');
  if (h.get('step')) state.grid.step = h.get('step') === 'all' ? 'all' : +h.get('step');
  if (h.get('earlier')) state.grid.earlier = h.get('earlier') === '1';
}
function writeHash() {
  const g = state.grid;
  const h = 'view=' + state.view +
      (state.view === 'grid' ? '&phase=' + g.phase + '&step=' + g.step + (g.earlier ? '&earlier=1' : '') : '');
  history.replaceState(null, '', '#' + h);
}

// "ring, zigzag, C=4 (threads), S=256": one line naming a run (a modeled run names its machine instead).
function describe(m) {
  const c = m.cfg;
  return c.strategy + ', ' + c.sharding + ', C=' + c.ranks + ' (' + (c.machine ? 'modeled on ' + c.machine : c.backend) +
      '), S=' + c.seq;
}

function summary() {
  const box = ns.clear(document.getElementById('summary'));
  if (!state.trace) {
    box.textContent =
        state.bench ? 'Benchmark loaded; open a trace (cpsim run --trace FILE) for the other views' : 'No trace loaded';
    return;
  }
  const c = state.trace.cfg, pill = (text, cls) => ns.html('span', {class: 'pill ' + (cls || '')}, box, text);
  pill(c.strategy + (c.strategy === 'hybrid' ? ' (A2A ' + c.a2a + ' \u00d7 ring ' + c.ranks / c.a2a + ')' : ''));
  pill(c.sharding);
  pill('C = ' + c.ranks + ' ranks (' + (c.machine ? 'modeled on ' + c.machine : c.backend) + ')');
  // An inference step (sim/runtime/inference_run.hpp) names its new and cached tokens; S is their sum.
  const tokens = c.new_tokens !== undefined ? 'T=' + c.new_tokens + ' new after P=' + c.cached + ' cached' : 'S=' + c.seq;
  pill('B=' + c.batch + ' ' + tokens + ' Nq=' + c.heads + ' Nkv=' + c.kv_heads + ' D=' + c.head_dim + ' ' + c.dtype);
  pill(c.backward ? 'forward + backward' : 'forward');
  if (!c.causal) pill('no causal mask');
  const chk = state.trace.run.check;
  if (chk) pill(chk.passed ? 'check passed' : 'check FAILED', chk.passed ? 'ok' : 'bad');
  if (state.compare) pill('timeline compared with: ' + describe(state.compare), 'compare');
}

function emptyView(section, what) {
  ns.clear(section);
  const p = ns.html('div', {class: 'empty'}, section);
  p.appendChild(document.createTextNode('No trace loaded. Write one with '));
  ns.html('code', {}, p, 'cpsim run --strategy ring --ranks 4 --backward --trace run.json');
  p.appendChild(
      document.createTextNode(' and open it here (Open files\u2026 or drop it on the page) to see ' + what + '.'));
}

// A measured run of a small shape (under 10 million visible pairs on its busiest rank: milliseconds of compute)
// shows mostly how the operating system scheduled the rank threads on this machine's cores, not the algorithm.
// Said above the timeline, with the modeled run (cpsim predict, the same program on a machine model) beside it or
// the command that draws it. The shape decides, not the measured time, so the page says the same on any machine.
const SMALL_PAIRS = 1e7;
function measuredNote(section) {
  const measured = [state.trace, state.compare].filter((m) => m && !m.cfg.machine);
  const modeled = [state.trace, state.compare].find((m) => m && m.cfg.machine);
  const busiest = (m) => Math.max(...m.ranks.map((rk) => Object.values(rk.stats.work || {})
                                                          .reduce((a, w) => a + (w.pairs || 0), 0)));
  if (!measured.length || busiest(measured[0]) >= SMALL_PAIRS) return;
  const c = measured[0].cfg;
  const p = ns.html('div', {class: 'stats-note', 'data-note': 'measured-small'}, section);
  p.appendChild(document.createTextNode(
      'The measured run (' + describe(measured[0]) + ') took ' + ns.fmtMs(measured[0].run.wall_ms || 0) +
      ': at this size its timeline is mostly thread scheduling on this machine (a wait can be a rank whose thread ' +
      'was not running yet), not the algorithm. '));
  if (modeled) {
    p.appendChild(document.createTextNode('The modeled run (' + describe(modeled) + ') is drawn beside it: the ' +
                                          'same program on a machine model, where each wait is a transfer.'));
  } else if (c.new_tokens !== undefined) {
    p.appendChild(document.createTextNode('The model\'s times of this inference step: '));
    ns.html('code', {}, p, 'cpsim predict --ranks ' + c.ranks + ' --new-tokens ' + c.new_tokens + ' --cached ' +
                               c.cached + ' --heads ' + c.heads + ' --kv-heads ' + c.kv_heads + ' --head-dim ' + c.head_dim);
  } else {
    p.appendChild(document.createTextNode('To see the modeled timeline beside it, save this run with --trace and ' +
                                          'run '));
    ns.html('code', {}, p, 'cpsim predict --ranks ' + c.ranks + ' --seq 16K --strategies ' + c.strategy +
                               (c.strategy === 'hybrid' ? ':' + c.a2a : '') + ' --html both.html --compare run.json');
  }
}

function draw(view) {
  const section = document.getElementById('view-' + view);
  if (view === 'bench')
    ns.renderBench(section, state.bench);
  else if (!state.trace)
    emptyView(section, {timeline: 'the timeline', grid: 'the attention grid', stats: 'the per-rank totals'}[view]);
  else if (view === 'timeline' && !state.compare) {
    ns.clear(section);
    measuredNote(section);
    ns.renderTimeline(ns.html('div', {class: 'timeline-main'}, section), state.trace, state.timeline);
  } else if (view === 'timeline') {
    // Two runs, one above the other, each on its own time axis (a modeled run's are GPU milliseconds).
    ns.clear(section);
    measuredNote(section);
    ns.html('div', {class: 'compare-head'}, section, describe(state.trace));
    ns.renderTimeline(ns.html('div', {class: 'timeline-main'}, section), state.trace, state.timeline);
    ns.html('div', {class: 'compare-head'}, section, 'Compared with: ' + describe(state.compare));
    ns.renderTimeline(ns.html('div', {class: 'timeline-compare'}, section), state.compare, state.compareTimeline,
                      '-compare');
  }
  else if (view === 'grid')
    ns.renderGrid(section, state.trace, state.grid);
  else
    ns.renderStats(section, state.trace);
}

// Draws the active view, or every view (after loading, so each is in the page and a tab switch is instant).
function render(all) {
  for (const b of document.querySelectorAll('#tabs button'))
    b.setAttribute('aria-selected', String(b.dataset.view === state.view));
  for (const s of document.querySelectorAll('.view')) s.classList.toggle('active', s.dataset.view === state.view);
  try {
    for (const v of all ? VIEWS : [state.view]) draw(v);
  } catch (err) {
    message('Could not draw this view: ' + err.message);
    throw err;
  }
  document.body.dataset.view = state.view;
  document.body.dataset.loaded = [state.trace && 'trace', state.bench && 'bench'].filter(Boolean).join(',');
}

// asCompare: the second trace of a batch (or the page's inlined cpsim-compare block) is the comparison.
function load(m, name, asCompare) {
  if (m.kind === 'trace' && asCompare) {
    state.compare = m;
    state.compareTimeline = {};
  } else if (m.kind === 'trace') {
    state.trace = m;
    state.timeline = {};
    state.compare = null;
    if (state.view === 'bench') state.view = 'timeline';
  } else {
    state.bench = m;
    if (!state.trace) state.view = 'bench';
  }
  message(name ? 'Opened ' + name : '');
}

// Files opened together: the first trace becomes the run, a second trace its comparison (its timeline is drawn
// under the run's), a benchmark the charts. A file that cannot be read is named and skipped.
function openFiles(files) {
  files = [...files];
  const texts = new Array(files.length);
  let left = files.length;
  files.forEach((f, i) => {
    const reader = new FileReader();
    reader.onload = () => {
      texts[i] = reader.result;
      if (--left === 0) loadAll();
    };
    reader.readAsText(f);
  });
  function loadAll() {
    let traces = 0;
    files.forEach((f, i) => {
      try {
        const m = ns.parseAny(JSON.parse(texts[i]));
        load(m, f.name, m.kind === 'trace' && traces++ === 1);
      } catch (err) {
        message(f.name + ': ' + err.message);
      }
    });
    if (files.length > 1 && traces > 0) message('Opened ' + files.map((f) => f.name).join(', '));
    summary();
    writeHash();
    render(true);
  }
}

function start() {
  readHash();
  for (const id of ['cpsim-trace', 'cpsim-bench', 'cpsim-compare']) {
    const block = document.getElementById(id);
    if (!block) continue;
    try {
      load(ns.parseAny(JSON.parse(block.textContent)), '', id === 'cpsim-compare');
    } catch (err) {
      message('The inlined ' + id.slice(6) + ' could not be read: ' + err.message);
    }
  }
  readHash();  // an explicit #view wins over the default chosen by what was loaded
  for (const b of document.querySelectorAll('#tabs button'))
    b.addEventListener('click', () => {
      if (state.grid.playing) {
        clearInterval(state.grid.playing);
        state.grid.playing = null;
      }
      state.view = b.dataset.view;
      writeHash();
      render();
    });
  document.getElementById('file-input').addEventListener('change', (e) => {
    openFiles([...e.target.files]);
    e.target.value = '';  // choosing the same file again reloads it
  });
  let depth = 0;
  window.addEventListener('dragenter', (e) => {
    e.preventDefault();
    ++depth;
    document.body.classList.add('dragover');
  });
  window.addEventListener('dragleave', () => {
    if (--depth <= 0) {
      depth = 0;
      document.body.classList.remove('dragover');
    }
  });
  window.addEventListener('dragover', (e) => e.preventDefault());
  window.addEventListener('drop', (e) => {
    e.preventDefault();
    depth = 0;
    document.body.classList.remove('dragover');
    openFiles(e.dataTransfer.files);
  });
  window.addEventListener('keydown', (e) => {
    if (state.view !== 'grid' || !state.trace || !state.grid.stepBy || e.target.tagName === 'INPUT') return;
    if (e.key === 'ArrowRight') state.grid.stepBy(1);
    if (e.key === 'ArrowLeft') state.grid.stepBy(-1);
  });
  window.addEventListener('hashchange', () => {
    readHash();
    render(true);
  });
  let pending = 0;
  window.addEventListener('resize', () => {
    clearTimeout(pending);
    pending = setTimeout(render, 120);
  });
  summary();
  render(true);
}

ns.state = state;
start();
})(window.cpsim);
