#include "server/http/dashboard_page.h"

namespace preface::server {

// Charts: hit ratio and tokens saved, pool occupancy by state, evictions and expiries per interval, TTFT of hits
// and misses per interval. A history sample holds cumulative totals; each point is the change since the previous
// sample (the first since zero, as the server started there).
const std::string_view kDashboardHtml = R"PREFACE_HTML(<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>preface cache dashboard</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
  body { font: 14px/1.4 system-ui, sans-serif; margin: 0; background: #f5f6f8; color: #1d2330; }
  header { background: #1d2330; color: #fff; padding: 10px 20px; display: flex; gap: 16px; align-items: center;
           flex-wrap: wrap; }
  header h1 { font-size: 18px; margin: 0 12px 0 0; }
  header .meta { opacity: .8; }
  header form { margin-left: auto; display: flex; gap: 6px; }
  input, select, textarea, button { font: inherit; }
  main { padding: 16px 20px; display: grid; gap: 16px; }
  .tiles { display: grid; grid-template-columns: repeat(auto-fit, minmax(150px, 1fr)); gap: 12px; }
  .tile, .card { background: #fff; border-radius: 8px; box-shadow: 0 1px 3px rgba(0,0,0,.12); padding: 12px; }
  .tile .v { font-size: 22px; font-weight: 600; }
  .tile .l { color: #5b6475; font-size: 12px; }
  .charts { display: grid; grid-template-columns: repeat(auto-fit, minmax(420px, 1fr)); gap: 16px; }
  .card h2 { font-size: 15px; margin: 0 0 8px; }
  .chart { position: relative; height: 220px; }
  ul.tree { list-style: none; padding-left: 18px; margin: 2px 0; }
  ul.tree.top { padding-left: 0; }
  .node { font-family: ui-monospace, monospace; white-space: pre-wrap; background: #eef1f6; border-radius: 4px;
          padding: 0 4px; }
  .stat { color: #5b6475; font-size: 12px; margin-left: 6px; }
  #status { font-size: 12px; }
  #status.err { color: #ffb4b4; }
  pre { background: #f0f2f5; padding: 8px; border-radius: 4px; overflow: auto; max-height: 260px; }
  .explain textarea { width: 100%; min-height: 70px; box-sizing: border-box; }
  .reason { font-weight: 600; }
</style>
</head>
<body data-ready="0" data-points="0" data-charts="0" data-chart-points="0" data-prefixes="0" data-error="">
<header>
  <h1>preface cache</h1>
  <span class="meta" id="model">model: …</span>
  <span class="meta" id="scope"></span>
  <span id="status">connecting…</span>
  <form id="login" autocomplete="off">
    <input id="key" type="password" placeholder="API key (admin or tenant)" size="26">
    <button type="submit">Use key</button>
    <button type="button" id="logout">Forget</button>
  </form>
</header>
<main>
  <section class="tiles">
    <div class="tile"><div class="v" id="t-ratio">–</div><div class="l">hit ratio (cached / prompt tokens)</div></div>
    <div class="tile"><div class="v" id="t-saved">–</div><div class="l">prompt tokens read from cache</div></div>
    <div class="tile"><div class="v" id="t-written">–</div><div class="l">tokens written to cache</div></div>
    <div class="tile"><div class="v" id="t-flops">–</div><div class="l">prefill FLOPs saved</div></div>
    <div class="tile"><div class="v" id="t-seconds">–</div><div class="l">prefill seconds saved</div></div>
    <div class="tile"><div class="v" id="t-requests">–</div><div class="l">requests (hits)</div></div>
    <div class="tile"><div class="v" id="t-rate">–</div><div class="l">measured prefill tokens/s</div></div>
  </section>
  <section class="charts">
    <div class="card"><h2>Hit ratio and tokens saved</h2><div class="chart"><canvas id="c-hits"></canvas></div></div>
    <div class="card"><h2>KV pool occupancy (blocks)</h2><div class="chart"><canvas id="c-pool"></canvas></div></div>
    <div class="card"><h2>Evictions and expiries</h2><div class="chart"><canvas id="c-evict"></canvas></div></div>
    <div class="card"><h2>Time to first token: hits vs misses (ms)</h2><div class="chart"><canvas id="c-ttft"></canvas></div></div>
  </section>
  <section class="card">
    <h2>Top cached prefixes <span class="stat" id="tree-info"></span></h2>
    <div id="tree">no cached prefixes yet</div>
  </section>
  <section class="card explain">
    <h2>Why did my prompt miss? (POST /v1/cache/explain)</h2>
    <form id="explain">
      <select id="x-kind">
        <option value="prompt">completion prompt</option>
        <option value="chat">chat: one user message</option>
      </select>
      <input id="x-salt" placeholder="cache_salt (optional)" size="22">
      <textarea id="x-text" placeholder="paste the prompt"></textarea>
      <button type="submit">Explain</button>
    </form>
    <div id="x-out"></div>
  </section>
</main>
<script src="/dashboard/chart.js"></script>
<script>
"use strict";
const KEY = "preface_dashboard_key";
const POLL_MS = 2000;
(function takeKeyFromFragment() {
  const m = location.hash.match(/(?:^#|&)key=([^&]*)/);
  if (m) {
    sessionStorage.setItem(KEY, decodeURIComponent(m[1]));
    history.replaceState(null, "", location.pathname + location.search);
  }
})();
const $ = (id) => document.getElementById(id);
function authHeaders(extra) {
  const h = Object.assign({}, extra || {});
  const k = sessionStorage.getItem(KEY);
  if (k) h["Authorization"] = "Bearer " + k;
  return h;
}
async function api(path, init) {
  init = init || {};
  const r = await fetch(path, Object.assign({}, init, {headers: authHeaders(init.headers), cache: "no-store"}));
  const text = await r.text();
  let body = null;
  try { body = JSON.parse(text); } catch (e) { body = null; }
  if (!r.ok) {
    const msg = body && body.error ? (body.error.message || JSON.stringify(body.error)) : text;
    throw new Error(r.status + ": " + msg);
  }
  return body;
}
function si(v, digits) {
  if (v === null || v === undefined || !isFinite(v)) return "–";
  const units = [[1e18, "E"], [1e15, "P"], [1e12, "T"], [1e9, "G"], [1e6, "M"], [1e3, "k"]];
  for (const [f, u] of units) if (Math.abs(v) >= f) return (v / f).toFixed(digits === undefined ? 2 : digits) + u;
  return Number.isInteger(v) ? String(v) : v.toFixed(digits === undefined ? 2 : digits);
}
function seconds(v) {
  if (!isFinite(v)) return "–";
  if (v < 1) return (v * 1000).toFixed(1) + " ms";
  if (v < 120) return v.toFixed(2) + " s";
  return (v / 60).toFixed(1) + " min";
}
function setStatus(text, isErr) {
  $("status").textContent = text;
  $("status").className = isErr ? "err" : "";
  document.body.dataset.error = isErr ? text : "";
}

// ---- charts ----
const haveCharts = typeof Chart !== "undefined";
const charts = {};
function makeChart(id, type, datasets, scales) {
  return new Chart($(id), {
    type: type,
    data: {labels: [], datasets: datasets},
    options: {animation: false, responsive: true, maintainAspectRatio: false, spanGaps: true,
              interaction: {mode: "index", intersect: false}, plugins: {legend: {position: "bottom"}},
              scales: scales || {}}
  });
}
if (haveCharts) {
  charts.hits = makeChart("c-hits", "line", [
    {label: "hit ratio (interval)", data: [], borderColor: "#2a7de1", backgroundColor: "#2a7de1", yAxisID: "y"},
    {label: "tokens saved (cumulative)", data: [], borderColor: "#25a55f", backgroundColor: "#25a55f", yAxisID: "y1"}
  ], {y: {min: 0, max: 1, title: {display: true, text: "ratio"}},
      y1: {position: "right", beginAtZero: true, grid: {drawOnChartArea: false}, title: {display: true, text: "tokens"}}});
  charts.pool = makeChart("c-pool", "line", [
    {label: "in use", data: [], fill: true, borderColor: "#e1572a", backgroundColor: "rgba(225,87,42,.45)"},
    {label: "cached", data: [], fill: true, borderColor: "#2a7de1", backgroundColor: "rgba(42,125,225,.45)"},
    {label: "pinned", data: [], fill: true, borderColor: "#8a3ffc", backgroundColor: "rgba(138,63,252,.45)"},
    {label: "free", data: [], fill: true, borderColor: "#9aa3b2", backgroundColor: "rgba(154,163,178,.35)"}
  ], {y: {stacked: true, beginAtZero: true}});
  charts.evict = makeChart("c-evict", "bar", [
    {label: "evictions", data: [], backgroundColor: "#e1572a"},
    {label: "expiries (TTL)", data: [], backgroundColor: "#f0b429"}
  ], {y: {beginAtZero: true}});
  charts.ttft = makeChart("c-ttft", "line", [
    {label: "hits", data: [], borderColor: "#25a55f", backgroundColor: "#25a55f"},
    {label: "misses", data: [], borderColor: "#e1572a", backgroundColor: "#e1572a"}
  ], {y: {beginAtZero: true}});
} else {
  setStatus("Chart.js not found (install Debian's libjs-chart.js); showing numbers only", true);
}

const ZERO = {prompt_tokens: 0, cached_tokens: 0, ttft_hit_ms_sum: 0, ttft_hit_count: 0, ttft_miss_ms_sum: 0,
              ttft_miss_count: 0, evictions: 0, expired: 0};
function perInterval(series) {
  const out = {labels: [], ratio: [], saved: [], inUse: [], cached: [], pinned: [], free: [], evict: [], expired: [],
               ttftHit: [], ttftMiss: []};
  let prev = ZERO;
  for (const s of series) {
    out.labels.push(new Date(s.t * 1000).toLocaleTimeString());
    const dPrompt = s.prompt_tokens - prev.prompt_tokens, dCached = s.cached_tokens - prev.cached_tokens;
    out.ratio.push(dPrompt > 0 ? dCached / dPrompt : null);
    out.saved.push(s.cached_tokens);
    const pinnedIdle = Math.min(s.blocks_pinned, s.blocks_cached);
    out.inUse.push(s.blocks_in_use);
    out.cached.push(s.blocks_cached - pinnedIdle);
    out.pinned.push(pinnedIdle);
    out.free.push(s.blocks_free);
    out.evict.push(s.evictions - prev.evictions);
    out.expired.push(s.expired - prev.expired);
    const dHit = s.ttft_hit_count - prev.ttft_hit_count, dMiss = s.ttft_miss_count - prev.ttft_miss_count;
    out.ttftHit.push(dHit > 0 ? (s.ttft_hit_ms_sum - prev.ttft_hit_ms_sum) / dHit : null);
    out.ttftMiss.push(dMiss > 0 ? (s.ttft_miss_ms_sum - prev.ttft_miss_ms_sum) / dMiss : null);
    prev = s;
  }
  return out;
}
function setData(chart, labels, arrays) {
  chart.data.labels = labels;
  arrays.forEach((a, i) => { chart.data.datasets[i].data = a; });
  chart.update();
  return arrays.reduce((n, a) => n + a.filter((v) => v !== null).length, 0);
}

// ---- prefix tree ----
function renderNode(n) {
  const li = document.createElement("li");
  const label = document.createElement("span");
  label.className = "node";
  label.textContent = JSON.stringify(n.text).slice(1, -1) + (n.tokens > n.first_tokens.length ? " …" : "");
  li.appendChild(label);
  const stat = document.createElement("span");
  stat.className = "stat";
  let text = n.hits + " hits · " + n.tokens + " tokens in " + n.blocks + " blocks (" + n.subtree_blocks +
             " below and here) · age " + seconds(n.age_s) + " · pins " + n.pins + " · in use by " + n.refs;
  if (n.tenant !== undefined) text += " · tenant " + (n.tenant === null ? "?" : JSON.stringify(n.tenant));
  if (n.hidden_children > 0) text += " · " + n.hidden_children + " more branches";
  stat.textContent = text;
  li.appendChild(stat);
  let count = 1;
  if (n.children.length) {
    const ul = document.createElement("ul");
    ul.className = "tree";
    for (const c of n.children) { const r = renderNode(c); ul.appendChild(r.li); count += r.count; }
    li.appendChild(ul);
  }
  return {li, count};
}
function renderTree(prefixes, info) {
  const root = $("tree");
  root.textContent = "";
  $("tree-info").textContent = info.blocks + " cached blocks in " + info.root_chains + " chains" +
                               (info.truncated ? " (largest shown)" : "");
  if (!prefixes.length) { root.textContent = "no cached prefixes yet"; return 0; }
  const ul = document.createElement("ul");
  ul.className = "tree top";
  let count = 0;
  for (const p of prefixes) { const r = renderNode(p); ul.appendChild(r.li); count += r.count; }
  root.appendChild(ul);
  return count;
}

// ---- polling ----
async function refresh() {
  let d;
  try {
    d = await api("/v1/cache/stats");
  } catch (e) {
    setStatus(String(e.message).startsWith("401") ? "this server needs a key: enter an admin or tenant key"
                                                  : "error: " + e.message, true);
    return;
  }
  $("model").textContent = "model: " + d.model.id + " · " + si(d.model.n_params) + " params · " +
                           d.model.kv_blocks + " blocks of " + d.model.block_size + " tokens";
  $("scope").textContent = d.scope === "all" ? "all tenants" : "tenant " + JSON.stringify(d.tenant);
  const t = d.totals;
  $("t-ratio").textContent = (100 * t.hit_ratio).toFixed(1) + "%";
  $("t-saved").textContent = si(t.cached_tokens);
  $("t-written").textContent = si(t.written_tokens);
  $("t-flops").textContent = si(t.saved_flops);
  $("t-seconds").textContent = seconds(t.saved_seconds);
  $("t-requests").textContent = t.requests + " (" + t.hit_requests + ")";
  $("t-rate").textContent = d.model.prefill_tokens_per_s > 0 ? si(d.model.prefill_tokens_per_s, 1) : "not yet";
  let drawn = 0, points = 0;
  if (haveCharts) {
    const s = perInterval(d.series);
    for (const n of [setData(charts.hits, s.labels, [s.ratio, s.saved]),
                     setData(charts.pool, s.labels, [s.inUse, s.cached, s.pinned, s.free]),
                     setData(charts.evict, s.labels, [s.evict, s.expired]),
                     setData(charts.ttft, s.labels, [s.ttftHit, s.ttftMiss])]) {
      points += n;
      drawn += n > 0 ? 1 : 0;
    }
  }
  const nodes = renderTree(d.prefixes, d.prefix_tree);
  const b = document.body.dataset;
  b.points = String(d.series.length);
  b.charts = String(drawn);
  b.chartPoints = String(points);
  b.prefixes = String(nodes);
  b.ready = "1";
  if (haveCharts) setStatus("updated " + new Date().toLocaleTimeString(), false);
}

$("login").addEventListener("submit", (ev) => {
  ev.preventDefault();
  sessionStorage.setItem(KEY, $("key").value);
  $("key").value = "";
  refresh();
});
$("logout").addEventListener("click", () => { sessionStorage.removeItem(KEY); refresh(); });

$("explain").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const text = $("x-text").value, salt = $("x-salt").value;
  const body = $("x-kind").value === "chat" ? {messages: [{role: "user", content: text}]} : {prompt: text};
  if (salt) body.cache_salt = salt;
  const out = $("x-out");
  out.textContent = "…";
  try {
    const e = await api("/v1/cache/explain", {method: "POST", headers: {"Content-Type": "application/json"},
                                              body: JSON.stringify(body)});
    out.textContent = "";
    const p = document.createElement("p");
    const r = document.createElement("span");
    r.className = "reason";
    r.textContent = e.reason;
    p.appendChild(r);
    p.appendChild(document.createTextNode(": " + e.cached_tokens + " tokens would be read from the cache" +
        (e.diverged_at !== undefined && e.diverged_at !== null ? "; diverged at token " + e.diverged_at : "") +
        (e.detail ? " — " + e.detail : "")));
    out.appendChild(p);
    const pre = document.createElement("pre");
    pre.textContent = JSON.stringify(e, null, 2);
    out.appendChild(pre);
  } catch (err) {
    out.textContent = "error: " + err.message;
  }
});

refresh();
setInterval(refresh, POLL_MS);
</script>
</body>
</html>
)PREFACE_HTML";

}  // namespace preface::server
