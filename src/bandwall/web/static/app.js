// The planner: form -> POST /api/plan -> table and a stacked bar of the step breakdown.
"use strict";
const COLORS = {compute: "#1f77b4", dp: "#d62728", tp: "#2ca02c", pp: "#ff7f0e",
                ep: "#9467bd", cp: "#8c564b", bubble: "#7f7f7f", straggler: "#17becf"};
const $ = (id) => document.getElementById(id);

function fmtTime(s) {
  if (!isFinite(s)) return "inf";
  const units = [["d", 86400], ["h", 3600], ["min", 60], ["s", 1], ["ms", 1e-3], ["µs", 1e-6]];
  for (const [u, k] of units) if (Math.abs(s) >= k) return (s / k).toFixed(2) + " " + u;
  return (s * 1e9).toFixed(0) + " ns";
}

async function fill(id, url, label) {
  const rows = await (await fetch(url)).json();
  const sel = $(id);
  for (const r of rows) {
    const o = document.createElement("option");
    o.value = r.key; o.textContent = label(r);
    sel.appendChild(o);
  }
}

function query() {
  const q = {model: $("model").value, gpus: Number($("gpus").value), preset: $("preset").value,
             auto: $("auto").checked};
  if ($("fabric").value) q.fabric = $("fabric").value;
  if ($("bandwidth").value) q.bandwidth_Gbps = Number($("bandwidth").value);
  if (!q.auto) { q.tp = Number($("tp").value); q.pp = Number($("pp").value); }
  return q;
}

function showError(body) {
  const msg = (body.detail || []).map((d) => d.msg + " (" + d.loc.join(".") + ")").join("; ");
  $("status").textContent = "error: " + (msg || JSON.stringify(body));
  $("status").className = "error";
}

function drawChart(breakdown, step) {
  const svg = $("chart"), W = 620;
  svg.innerHTML = "";
  let x = 10;
  const legend = [];
  for (const [k, v] of Object.entries(breakdown)) {
    if (v <= 0) continue;
    const w = Math.max((v / step) * W, 1);
    const r = document.createElementNS("http://www.w3.org/2000/svg", "rect");
    r.setAttribute("x", x); r.setAttribute("y", 10); r.setAttribute("width", w);
    r.setAttribute("height", 40); r.setAttribute("fill", COLORS[k] || "#999");
    r.setAttribute("data-term", k);
    const t = document.createElementNS("http://www.w3.org/2000/svg", "title");
    t.textContent = k + ": " + fmtTime(v);
    r.appendChild(t);
    svg.appendChild(r);
    x += w;
    legend.push('<span><i style="background:' + (COLORS[k] || "#999") + '"></i>' + k + " " +
                (100 * v / step).toFixed(1) + "%</span>");
  }
  $("legend").innerHTML = legend.join("");
}

let latest = 0;  // answers to older requests are dropped, so the page shows the last query

async function plan() {
  const mine = ++latest;
  $("status").textContent = "planning…"; $("status").className = "";
  const res = await fetch("/api/plan", {method: "POST", headers: {"Content-Type": "application/json"},
                                        body: JSON.stringify(query())});
  const body = await res.json();
  if (mine !== latest) return;
  if (!res.ok) { showError(body); return; }
  const L = body.layout;
  const rows = [
    ["layout", `tp=${L.tp} pp=${L.pp} cp=${L.cp} ep=${L.ep} dp=${L.dp} zero=${L.zero}`],
    ["step time", fmtTime(body.step_time_s)],
    ["communication efficiency", (100 * body.comm_efficiency).toFixed(1) + "%"],
    ["MFU", (100 * body.mfu).toFixed(1) + "%"],
    ["goodput", (100 * body.goodput).toFixed(1) + "%"],
    ["time to train", fmtTime(body.time_to_train_s)],
    ["GPU-hours", Math.round(body.gpu_hours).toLocaleString()],
    ["cost", "$" + Math.round(body.cost_usd).toLocaleString()],
  ];
  $("result").querySelector("tbody").innerHTML =
    rows.map(([k, v]) => `<tr><td>${k}</td><td data-key="${k}">${v}</td></tr>`).join("");
  drawChart(body.breakdown, body.step_time_s);
  $("status").textContent = `${body.model_name} on ${body.gpus} × ${body.cluster.gpu} · ${body.cluster.preset} · ${body.cluster.scale_out}`;
  compare();
}

async function compare() {
  const mine = latest;
  const q = query(); delete q.preset;
  const res = await fetch("/api/compare", {method: "POST", headers: {"Content-Type": "application/json"},
                                           body: JSON.stringify({plan: q})});
  if (!res.ok || mine !== latest) return;
  const plans = await res.json();
  $("compare").querySelector("thead").innerHTML = "<tr><th>preset</th><th>step</th><th>comm eff.</th><th>time to train</th><th>cost</th></tr>";
  $("compare").querySelector("tbody").innerHTML = plans.map((p) =>
    `<tr><td>${p.cluster.preset}</td><td>${fmtTime(p.step_time_s)}</td><td>${(100 * p.comm_efficiency).toFixed(1)}%</td><td>${fmtTime(p.time_to_train_s)}</td><td>$${Math.round(p.cost_usd).toLocaleString()}</td></tr>`).join("");
}

async function runs() {
  const rows = await (await fetch("/api/results")).json();
  $("runs-table").querySelector("tbody").innerHTML = rows.map((r) =>
    `<tr><td>${r.id}</td><td>${r.kind}</td><td>${r.status}</td><td>${r.world_size}</td><td>${r.backend}</td><td>${r.rows}</td><td><button data-run="${r.id}">show</button></td></tr>`).join("");
  for (const b of document.querySelectorAll("button[data-run]")) {
    b.onclick = () => { const img = $("run-chart"); img.src = `/api/results/${b.dataset.run}/busbw.png`; img.hidden = false; };
  }
}

async function main() {
  await fill("model", "/api/models", (r) => r.name);
  $("model").value = "llama3-8b";
  await fill("preset", "/api/presets", (r) => r.key);
  const fabrics = await (await fetch("/api/fabrics")).json();
  for (const f of fabrics.filter((f) => f.tier !== "scale_up")) {
    const o = document.createElement("option"); o.value = f.key; o.textContent = f.key;
    $("fabric").appendChild(o);
  }
  for (const id of ["model", "gpus", "preset", "fabric", "bandwidth", "tp", "pp", "auto"]) {
    $(id).addEventListener("change", plan);
  }
  $("run").addEventListener("click", plan);
  await plan();
  await runs();
}
main();
