// Small helpers shared by the views: element builders, number formats, axis ticks, colours, the tooltip.
'use strict';
window.cpsim = window.cpsim || {};
(function(ns) {
const SVG_NS = 'http://www.w3.org/2000/svg';

// svg("rect", {x: 1, ...}, parent) and html("div", {class: "x"}, parent, "text"): create, set, append.
function make(el, attrs, parent, text) {
  for (const [k, v] of Object.entries(attrs || {}))
    if (v !== undefined && v !== null) el.setAttribute(k, v);
  if (text !== undefined) el.textContent = text;
  if (parent) parent.appendChild(el);
  return el;
}
ns.svg = (tag, attrs, parent, text) => make(document.createElementNS(SVG_NS, tag), attrs, parent, text);
ns.html = (tag, attrs, parent, text) => make(document.createElement(tag), attrs, parent, text);
ns.clear = (el) => {
  while (el.firstChild) el.removeChild(el.firstChild);
  return el;
};

ns.fmtInt = (n) => Math.round(n).toLocaleString('en-US');
// A number with at most `d` decimals and no trailing zeros: 2.50 -> "2.5", 200.0 -> "200".
const trim = (x, d) => String(Number(x.toFixed(d)));
ns.fmtBytes = function(b) {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let u = 0;
  while (Math.abs(b) >= 1024 && u < units.length - 1) {
    b /= 1024;
    ++u;
  }
  return trim(b, u === 0 || Math.abs(b) >= 100 ? 0 : 1) + ' ' + units[u];
};
// Microseconds, in the unit that reads best.
ns.fmtTime = function(us) {
  const a = Math.abs(us);
  if (a === 0) return '0';
  if (a >= 1e6) return trim(us / 1e6, a >= 1e7 ? 1 : 2) + ' s';
  if (a >= 1e3) return trim(us / 1e3, a >= 1e5 ? 0 : a >= 1e4 ? 1 : 2) + ' ms';
  return trim(us, a >= 100 ? 0 : a >= 10 ? 1 : 2) + ' \u00b5s';
};
ns.fmtMs = (ms) => ns.fmtTime(ms * 1000);
ns.fmtSeq = (s) => (s >= 1024 && s % 1024 === 0 ? s / 1024 + 'K' : String(s));

// About n round ticks covering [lo, hi] (steps of 1, 2 or 5 times a power of ten).
ns.ticks = function(lo, hi, n) {
  if (!(hi > lo)) return [lo];
  const raw = (hi - lo) / Math.max(1, n);
  const p = Math.pow(10, Math.floor(Math.log10(raw)));
  const step = [1, 2, 5, 10].map((m) => m * p).find((s) => s >= raw);
  const out = [];
  for (let t = Math.ceil(lo / step) * step; t <= hi + step * 1e-9; t += step) out.push(+t.toPrecision(12));
  return out;
};
// Round ticks for a byte axis: steps of 1, 2 or 5 in the unit (B, KiB, MiB, ...) of the top value.
ns.byteTicks = function(top, n) {
  const unit = Math.pow(1024, Math.max(0, Math.floor(Math.log(Math.max(top, 1)) / Math.log(1024))));
  return ns.ticks(0, top / unit, n).map((t) => t * unit);
};
// Ticks of a log axis: 1, 2, 5 times each power of ten inside [lo, hi].
ns.logTicks = function(lo, hi) {
  const out = [];
  for (let e = Math.floor(Math.log10(lo)); e <= Math.ceil(Math.log10(hi)); ++e)
    for (const m of [1, 2, 5]) {
      const t = m * Math.pow(10, e);
      if (t >= lo * 0.999 && t <= hi * 1.001) out.push(t);
    }
  return out;
};

// Rank colours: a qualitative palette that stays distinct on white; beyond ten ranks, evenly spaced hues.
const PALETTE =
    ['#4e79a7', '#f28e2b', '#59a14f', '#e15759', '#8c6bb1', '#76b7b2', '#edc948', '#b07aa1', '#9c755f', '#ff9da7'];
ns.rankColor = function(r, count) {
  if (count <= PALETTE.length) return PALETTE[r % PALETTE.length];
  return 'hsl(' + Math.round((r * 360) / count) + ', 62%, ' + (r % 2 ? 42 : 55) + '%)';
};
ns.strategyColors = {
  all_gather: '#e15759',
  ulysses: '#59a14f',
  ring: '#4e79a7',
  hybrid: '#8c6bb1',
  single_process: '#6b7580',
};

ns.legendItem = function(parent, color, label, style) {
  const item = ns.html('span', {class: 'item'}, parent);
  ns.html('span', {class: 'swatch', style: 'background:' + color + ';' + (style || '')}, item);
  ns.html('span', {}, item, label);
  return item;
};

// The tooltip: a title and (key, value) rows, placed next to the pointer and kept on screen.
ns.tooltip = {
  show(event, title, rows) {
    const tt = document.getElementById('tooltip');
    ns.clear(tt);
    ns.html('div', {class: 'tt-title'}, tt, title);
    for (const [k, v] of rows) {
      const row = ns.html('div', {}, tt);
      ns.html('span', {class: 'tt-key'}, row, k);
      ns.html('span', {}, row, v);
    }
    tt.style.display = 'block';
    const pad = 14, w = tt.offsetWidth, h = tt.offsetHeight;
    let x = event.clientX + pad, y = event.clientY + pad;
    if (x + w > window.innerWidth - 4) x = event.clientX - w - pad;
    if (y + h > window.innerHeight - 4) y = event.clientY - h - pad;
    tt.style.left = Math.max(4, x) + 'px';
    tt.style.top = Math.max(4, y) + 'px';
  },
  hide() { document.getElementById('tooltip').style.display = 'none'; },
};
// Wires an element's hover to the tooltip; content() returns [title, rows].
ns.hover = function(el, content) {
  el.addEventListener('mousemove', (e) => {
    const [t, rows] = content();
    ns.tooltip.show(e, t, rows);
  });
  el.addEventListener('mouseleave', () => ns.tooltip.hide());
};
})(window.cpsim);
