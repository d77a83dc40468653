// The planner. The form is built from GET /api/schema (the plan request's JSON schema), so
// every request field has an input and a field added to the schema appears here by itself.
// The page address holds the query (?gpus=256&preset=...): reloading or sharing it restores
// the form and plans again. Server data is only ever set as text, never parsed as HTML.
"use strict";
const COLORS = {compute: "#1f77b4", dp: "#d62728", tp: "#2ca02c", pp: "#ff7f0e",
                ep: "#9467bd", cp: "#8c564b", bubble: "#7f7f7f", straggler: "#17becf"};
const $ = (id) => document.getElementById(id);
let SCHEMA = null;   // the form schema from /api/schema
let latest = 0;      // answers to older requests are dropped: the page shows the last query

// --- the API token (only when `bandwall serve` was started with one) -----------------------
const TOKEN = (() => {
  const params = new URLSearchParams(location.search);
  const given = params.get("token");
  if (given) sessionStorage.setItem("bandwall-token", given);
  return given || sessionStorage.getItem("bandwall-token") || "";
})();

function api(url, body) {
  const init = {headers: {}};
  if (TOKEN) init.headers.Authorization = "Bearer " + TOKEN;
  if (body !== undefined) {
    init.method = "POST";
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  return fetch(url, init);
}

async function answer(res) {
  try { return await res.json(); } catch (e) { return {detail: res.status + " " + res.statusText}; }
}

// --- numbers with units and thousands separators --------------------------------------------
const NF = (digits) => new Intl.NumberFormat("en-US", {maximumFractionDigits: digits});
const PCT = new Intl.NumberFormat("en-US", {minimumFractionDigits: 1, maximumFractionDigits: 1});

function fmtTime(s) {
  if (s === null || !isFinite(s)) return "never";
  if (s === 0) return "0 s";
  const units = [["y", 365.25 * 86400], ["d", 86400], ["h", 3600], ["min", 60], ["s", 1],
                 ["ms", 1e-3], ["µs", 1e-6]];
  for (const [u, k] of units) if (Math.abs(s) >= k) return NF(2).format(s / k) + " " + u;
  return NF(0).format(s * 1e9) + " ns";
}

function fmtBytes(b) {
  const units = [["TiB", 2 ** 40], ["GiB", 2 ** 30], ["MiB", 2 ** 20], ["KiB", 2 ** 10]];
  for (const [u, k] of units) if (Math.abs(b) >= k) return NF(1).format(b / k) + " " + u;
  return NF(0).format(b) + " B";
}

const CENTS = new Intl.NumberFormat("en-US", {minimumFractionDigits: 2, maximumFractionDigits: 2});

function fmtUSD(v) {
  return "$" + (Math.abs(v) < 100 ? CENTS : NF(0)).format(v);
}

function fmtMetric(name, v) {
  if (typeof v === "boolean") return v ? "yes" : "no";
  if (v === null) return "n/a";
  if (typeof v !== "number") return String(v);
  if (/_usd$/.test(name)) return fmtUSD(v);
  if (/bytes/.test(name)) return fmtBytes(v);
  if (/_per_s$/.test(name)) return NF(0).format(v) + " /s";
  if (/_s$/.test(name)) return fmtTime(v);
  if (/(efficiency|share|fraction)$|^(mfu|goodput)$/.test(name)) return PCT.format(100 * v) + " %";
  if (/_hours$/.test(name)) return NF(0).format(v) + " h";
  if (/^tflops/.test(name)) return NF(1).format(v) + " TFLOP/s";
  return Number.isInteger(v) || Math.abs(v) >= 100 ? NF(0).format(v) : NF(3).format(v);
}

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === false || v === null || v === undefined) continue;
    node.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children) node.append(c);
  return node;
}

// --- the form, from the schema ----------------------------------------------------------------
function label(name) { return name.replaceAll("_", " "); }

function emptyText(name, prop) {
  if (prop.group === "layout") return "search";
  const m = /\((?:default|unset):?\s*([^)]*)\)/i.exec(prop.description || "");
  return m ? m[1] : "default";
}

function defaultText(prop) {
  return prop.default === null || prop.default === undefined ? "" : String(prop.default);
}

// A nullable boolean has three states (unset: the fabric's or preset's choice, on, off): a
// checkbox could only send false, which is not what the CLI does when the flag is left out.
function triState(name, prop) {
  const sel = el("select", {id: name, name, "data-tristate": true});
  sel.append(el("option", {value: ""}, "(" + emptyText(name, prop) + ")"),
             el("option", {value: "true"}, "on"), el("option", {value: "false"}, "off"));
  sel.value = defaultText(prop);
  return sel;
}

function input(name, prop) {
  const kind = prop["x-kind"];
  if (kind === "boolean" && prop["x-nullable"]) return triState(name, prop);
  if (kind === "boolean") {
    return el("input", {id: name, name, type: "checkbox", checked: prop.default === true});
  }
  if (kind === "choice" && !(prop.patterns || []).length) {
    const sel = el("select", {id: name, name});
    if (prop["x-nullable"]) sel.append(el("option", {value: ""}, "(" + emptyText(name, prop) + ")"));
    for (const c of prop.choices) sel.append(el("option", {value: c}, c));
    sel.value = defaultText(prop);
    return sel;
  }
  const attrs = {id: name, name, type: "text", autocomplete: "off", value: defaultText(prop),
                 placeholder: prop["x-nullable"] ? emptyText(name, prop) : ""};
  if (kind === "integer") attrs.inputmode = "numeric";
  if (kind === "number") attrs.inputmode = "decimal";
  if (kind === "choice") {  // choices plus a free-form template such as measured:NAME
    attrs.list = name + "-choices";
    const list = el("datalist", {id: name + "-choices"});
    for (const c of [...prop.choices, ...prop.patterns]) list.append(el("option", {value: c}));
    const box = el("span", {class: "combo"}, el("input", attrs), list);
    return box;
  }
  return el("input", attrs);
}

function buildForm() {
  const groups = new Map(SCHEMA["x-groups"].map((g) => [g, []]));
  for (const [name, prop] of Object.entries(SCHEMA.properties)) {
    const kind = prop["x-kind"];
    const help = el("small", {class: "help"}, prop.description || "");
    const error = el("span", {class: "field-error", id: name + "-error", role: "alert"});
    const control = input(name, prop);
    const row = kind === "boolean" && control.type === "checkbox"
      ? el("div", {class: "field check", "data-field": name},
           el("label", {for: name}, control, " " + label(name)), help, error)
      : el("div", {class: "field", "data-field": name},
           el("label", {for: name}, label(name)), control, help, error);
    row.title = name;
    groups.get(prop.group || "other").push(row);
  }
  const open = new Set(["workload", "cluster", "network", "layout"]);
  for (const [group, rows] of groups) {
    const box = el("details", {class: "group", "data-group": group, open: open.has(group)},
                   el("summary", {}, group), el("div", {class: "grid"}, ...rows));
    $("fields").append(box);
  }
}

function control(name) { return $(name); }

function rawValue(name) {
  const c = control(name);
  return c.type === "checkbox" ? String(c.checked) : c.value.trim();
}

// A value a select does not offer (an address with ?preset=ai-factory) is kept as typed, in
// an option marked unknown, so it is sent and refused next to its field: never silently
// replaced by another value.
function setRaw(name, value) {
  const c = control(name);
  if (c.type === "checkbox") { c.checked = value === "true" || value === "1" || value === "on"; return; }
  if (c.tagName === "SELECT" && ![...c.options].some((o) => o.value === value)) {
    c.append(el("option", {value, "data-unknown": true}, value + " (unknown)"));
  }
  c.value = value;
}

// Only what differs from the schema's defaults goes into the request and the URL.
function formValues() {
  const out = {};
  for (const [name, prop] of Object.entries(SCHEMA.properties)) {
    const v = rawValue(name);
    if (v === "" || v === defaultText(prop)) continue;
    out[name] = v;
  }
  return out;
}

// Text as the JSON the schema takes; what does not parse goes as typed and the server names it.
function typed(name, text) {
  const kind = SCHEMA.properties[name]["x-kind"];
  const numeric = /^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(text);
  if (kind === "boolean") return text === "true";
  if (kind === "integer") return /^[-+]?\d+$/.test(text) ? Number(text) : text;
  if ((kind === "number" || kind === "quantity") && numeric) return Number(text);
  return text;
}

function request(values) {
  return Object.fromEntries(Object.entries(values).map(([k, v]) => [k, typed(k, v)]));
}

function writeURL(values) {
  const q = new URLSearchParams(values).toString();
  const url = location.pathname + (q ? "?" + q : "");
  if (url !== location.pathname + location.search) history.replaceState(null, "", url);
}

function readURL() {
  const params = new URLSearchParams(location.search);
  const ignored = [];
  for (const [k, v] of params) {
    if (k === "token") continue;
    if (SCHEMA.properties[k]) setRaw(k, v); else ignored.push(k);
  }
  return ignored;
}

// --- results --------------------------------------------------------------------------------
function clearResults() {
  $("results").hidden = true;
  $("compare-box").hidden = true;
  $("result").querySelector("tbody").replaceChildren();
  $("metrics").querySelector("tbody").replaceChildren();
  $("chart").replaceChildren();
  $("legend").replaceChildren();
  $("compare").querySelector("thead").replaceChildren();
  $("compare").querySelector("tbody").replaceChildren();
  $("compare-status").textContent = "";
}

function clearErrors() {
  for (const e of document.querySelectorAll(".field-error")) e.textContent = "";
  for (const e of document.querySelectorAll("[aria-invalid]")) e.removeAttribute("aria-invalid");
}

function detailLines(body) {
  if (typeof body.detail === "string") return [{field: null, msg: body.detail}];
  return (body.detail || []).map((d) => {
    const loc = d.loc || [];
    const field = loc[0] === "body" ? loc[1] : loc[loc.length - 1];
    const msg = String(d.msg).replace(/^Value error, /, "");
    return {field: field === undefined ? null : String(field), msg};
  });
}

function showError(body) {
  clearResults();
  const lines = detailLines(body);
  const text = [];
  for (const {field, msg} of lines) {
    const flag = field ? field.replaceAll("_", "-") : "";
    const clean = field && msg.startsWith(flag + ": ") ? msg.slice(flag.length + 2) : msg;
    text.push(field ? field + ": " + clean : clean);
    if (field && SCHEMA.properties[field]) {
      $(field + "-error").textContent = clean;
      control(field).setAttribute("aria-invalid", "true");
      control(field).closest("details").open = true;
    }
  }
  $("status").textContent = "error: " + (text.join("; ") || JSON.stringify(body));
  $("status").className = "error";
  // bring the first field named into view (the form can be long), else the status line
  const first = lines.find(({field}) => field && SCHEMA.properties[field]);
  const target = first ? control(first.field) : $("status");
  target.scrollIntoView({block: "center"});
  if (first) target.focus({preventScroll: true});
}

function drawChart(breakdown, step) {
  const svg = $("chart"), W = 620;
  svg.replaceChildren();
  $("legend").replaceChildren();
  let x = 10;
  for (const [k, v] of Object.entries(breakdown)) {
    if (!(v > 0)) continue;
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
    const swatch = el("i", {style: "background:" + (COLORS[k] || "#999")});
    $("legend").append(el("span", {}, swatch, `${k} ${fmtTime(v)} (${PCT.format(100 * v / step)} %)`));
  }
}

function showPlan(body) {
  $("results").hidden = false;
  $("compare-box").hidden = false;
  const L = body.layout;
  const rows = [
    ["layout", `tp=${L.tp} pp=${L.pp} cp=${L.cp} ep=${L.ep} dp=${L.dp} zero=${L.zero} ` +
               `micro-batch=${L.micro_batch}`],
    ["step time", fmtTime(body.step_time_s)],
    ["communication efficiency", fmtMetric("comm_efficiency", body.comm_efficiency)],
    ["MFU", fmtMetric("mfu", body.mfu)],
    ["goodput", fmtMetric("goodput", body.goodput)],
    ["memory per GPU", fmtBytes(body.memory_bytes) + " of " + fmtBytes(body.memory_capacity_bytes)],
    ["time to train", fmtTime(body.time_to_train_s)],
    ["GPU-hours", fmtMetric("gpu_hours", body.gpu_hours)],
    ["cost", fmtUSD(body.cost_usd)],
  ];
  $("result").querySelector("tbody").replaceChildren(
    ...rows.map(([k, v]) => el("tr", {}, el("td", {}, k), el("td", {"data-key": k}, v))));
  const metrics = Object.entries(body).filter(([, v]) => typeof v === "number" || typeof v === "boolean");
  $("metrics").querySelector("tbody").replaceChildren(
    ...metrics.map(([k, v]) => el("tr", {}, el("td", {}, k), el("td", {"data-metric": k}, fmtMetric(k, v)))));
  drawChart(body.breakdown, body.step_time_s);
  const c = body.cluster;
  $("status").textContent =
    `${body.model_name} on ${NF(0).format(body.gpus)} × ${c.gpu} · ${c.preset} · ${c.scale_out}`;
  $("status").className = "ok";
}

async function plan() {
  const mine = ++latest;
  clearErrors();
  $("status").textContent = "planning…"; $("status").className = "busy";
  const values = formValues();
  writeURL(values);
  let res, body;
  try {
    res = await api("/api/plan", request(values));
    body = await answer(res);
  } catch (e) {
    res = {ok: false}; body = {detail: "the server did not answer: " + e};
  }
  if (mine !== latest) return;
  if (!res.ok) { showError(body); return; }
  showPlan(body);
  compare(mine, values);
}

async function compare(mine, values) {
  const q = request(values); delete q.preset;
  $("compare-status").textContent = "pricing every preset…";
  const res = await api("/api/compare", {plan: q});
  const body = await answer(res);
  if (mine !== latest) return;
  if (!res.ok) {
    $("compare-status").textContent = "cannot compare: " + detailLines(body).map((d) => d.msg).join("; ");
    return;
  }
  $("compare-status").textContent = "click a preset to plan on it";
  $("compare").querySelector("thead").replaceChildren(el("tr", {},
    ...["preset", "GPU", "layout", "step", "comm eff.", "time to train", "cost"].map((h) => el("th", {}, h))));
  $("compare").querySelector("tbody").replaceChildren(...body.map((p) => {
    const L = p.layout;
    const row = el("tr", {"data-preset": p.cluster.preset, class: "pick"},
      el("td", {}, p.cluster.preset), el("td", {}, p.cluster.gpu),
      el("td", {}, `tp=${L.tp} pp=${L.pp} cp=${L.cp} ep=${L.ep} dp=${L.dp}`),
      el("td", {}, fmtTime(p.step_time_s)),
      el("td", {}, fmtMetric("comm_efficiency", p.comm_efficiency)),
      el("td", {}, fmtTime(p.time_to_train_s)), el("td", {}, fmtUSD(p.cost_usd)));
    row.onclick = () => { $("preset").value = p.cluster.preset; plan(); };
    return row;
  }));
}

// --- stored runs ------------------------------------------------------------------------------
async function showRunChart(id) {
  const img = $("run-chart");
  const res = await api(`/api/results/${id}/busbw.png`);
  if (!res.ok) {
    $("runs-status").textContent = "error: " + detailLines(await answer(res)).map((d) => d.msg).join("; ");
    $("runs-status").className = "error";
    return;
  }
  if (img.src.startsWith("blob:")) URL.revokeObjectURL(img.src);
  img.src = URL.createObjectURL(await res.blob());
  img.hidden = false;
}

async function runs() {
  const res = await api("/api/results");
  const body = await answer(res);
  if (!res.ok) {
    $("runs-status").textContent = "error: " + detailLines(body).map((d) => d.msg).join("; ");
    $("runs-status").className = "error";
    return;
  }
  $("runs-status").textContent = body.length ? "" : "no stored runs yet (bandwall bench …)";
  $("runs-table").querySelector("tbody").replaceChildren(...body.map((r) => {
    const button = el("button", {type: "button", "data-run": r.id}, "show");
    button.onclick = () => showRunChart(r.id);
    return el("tr", {}, el("td", {}, String(r.id)), el("td", {}, r.kind), el("td", {}, r.status),
              el("td", {}, String(r.world_size)), el("td", {}, r.backend),
              el("td", {}, NF(0).format(r.rows)), el("td", {}, button));
  }));
}

async function main() {
  const res = await api("/api/schema");
  if (!res.ok) {
    $("status").textContent = "error: " + detailLines(await answer(res)).map((d) => d.msg).join("; ");
    $("status").className = "error";
    return;
  }
  SCHEMA = await res.json();
  buildForm();
  const ignored = readURL();
  for (const name of Object.keys(SCHEMA.properties)) {
    const c = control(name);
    c.addEventListener("change", plan);
    if (c.closest("details") && formValues()[name] !== undefined) c.closest("details").open = true;
  }
  $("run").addEventListener("click", plan);
  $("reset").addEventListener("click", () => {
    for (const [name, prop] of Object.entries(SCHEMA.properties)) {
      setRaw(name, prop["x-kind"] === "boolean" ? String(prop.default === true) : defaultText(prop));
    }
    plan();
  });
  runs();
  await plan();
  if (ignored.length && $("status").className === "ok") {
    $("status").textContent += ` (ignored unknown URL parameter ${ignored.join(", ")})`;
  }
}
main();
