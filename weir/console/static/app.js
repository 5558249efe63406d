// The console page: polls /api/state and /api/charts and redraws.  Data reaches the DOM
// through textContent only.
"use strict";

const POLL_MS = 2000;
const { drawLines, humanNumber } = window.weirChart;
let lastState = null;

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") node.className = v;
    else if (k.startsWith("data-")) node.setAttribute(k, v);
    else if (k === "onclick") node.addEventListener("click", v);
    else node[k] = v;
  }
  for (const c of children) {
    if (c === null || c === undefined) continue;
    node.appendChild(typeof c === "object" ? c : document.createTextNode(String(c)));
  }
  return node;
}

function fill(tbody, rows) {
  tbody.replaceChildren(...rows);
}

function dash(v) { return v === null || v === undefined ? "–" : v; }

const BROKER_STATES = {1: "Starting", 3: "Running", 7: "ShuttingDown"};

function renderSummary(state) {
  const topics = state.topics || [];
  const parts = topics.flatMap((t) => t.partitions);
  const urp = parts.filter((p) => p.under_replicated).length;
  const offline = parts.filter((p) => p.offline).length;
  const lag = (state.groups || []).reduce((a, g) => a + (g.total_lag || 0), 0);
  const card = (label, value, cls, id) => el("div", {class: "card " + (cls || ""), id},
    el("div", {class: "muted"}, label), el("div", {class: "value"}, value));
  const brokers = state.brokers || [];
  const down = brokers.filter((b) => b.down).length;
  document.getElementById("summary").replaceChildren(
    card("brokers up", `${brokers.length - down} / ${brokers.length}`, down ? "bad" : "", "brokers-count"),
    card("controller", dash(state.controller && state.controller.id), "", "controller-id"),
    card("topics", topics.length),
    card("partitions", parts.length),
    card("under-replicated", urp, urp ? "warn" : "", "urp-count"),
    card("offline", offline, offline ? "bad" : "", "offline-count"),
    card("consumer lag", lag, "", "total-lag"));
}

function renderBrokers(state, charts) {
  const controllerId = state.controller ? state.controller.id : null;
  const lagSeries = (charts && charts.loop_lag_ms) || {};
  fill(document.querySelector("#brokers tbody"), (state.brokers || []).map((b) => {
    const m = b.metrics;
    const lags = (lagSeries[String(b.id)] || []).filter((v) => v !== null);
    const lag = lags.length ? lags[lags.length - 1].toFixed(1) : "–";
    return el("tr", {"data-broker": String(b.id), class: b.down ? "down" : ""},
      el("td", {}, b.id), el("td", {}, `${b.host}:${b.port}`),
      el("td", {}, b.down ? "down (not in Metadata)" : (b.id === controllerId ? "controller" : "broker")),
      el("td", {}, m ? (BROKER_STATES[m.state] || dash(m.state)) : (b.metrics_url ? "no answer" : "–")),
      el("td", {}, m ? dash(m.partitions) : "–"), el("td", {}, m ? dash(m.leaders) : "–"),
      el("td", {}, m ? dash(m.under_replicated) : "–"), el("td", {}, lag),
      el("td", {}, b.metrics_url ? el("a", {href: b.metrics_url + "/metrics"}, "/metrics") : "not configured"));
  }));
}

function renderController(state) {
  const c = state.controller || {};
  const facts = [["broker", dash(c.id)], ["epoch", dash(c.epoch)],
                 ["event queue", dash(c.event_queue_size)],
                 ["handling", c.current_event || (c.event_queue_size === null ? "–" : "idle")],
                 ["events handled", dash(c.events_processed)], ["source", dash(c.source)]];
  if (c.registered) facts.push(["registered brokers", c.registered.join(", ")]);
  if (c.zookeeper_error) facts.push(["ZooKeeper", c.zookeeper_error]);
  document.getElementById("controller").replaceChildren(
    ...facts.flatMap(([k, v]) => [el("dt", {}, k), el("dd", {"data-fact": k}, v)]));
  fill(document.querySelector("#changes tbody"), (c.state_changes || []).slice(0, 100).map((s) =>
    el("tr", {class: "level-" + s.level},
      el("td", {}, new Date(s.time_ms).toLocaleTimeString()), el("td", {}, s.event),
      el("td", {}, s.level), el("td", {}, s.message))));
}

async function post(path, body) {
  const response = await fetch(path, {method: "POST", headers: {"Content-Type": "application/json"},
                                      body: JSON.stringify(body)});
  const doc = await response.json().catch(() => ({}));
  toast(response.ok ? `${path}: ${JSON.stringify(doc.results)}` : `${path}: ${doc.error || response.status}`);
}

function toast(text) {
  const box = document.getElementById("toast");
  box.textContent = text;
  box.hidden = false;
  setTimeout(() => { box.hidden = true; }, 5000);
}

function partitionActions(p) {
  const elect = el("button", {onclick: () => post("/api/elect",
    {partitions: [{topic: p.topic, partition: p.partition}]})}, "elect preferred");
  const move = el("button", {onclick: () => {
    const text = prompt(`New replicas for ${p.topic}-${p.partition} (comma-separated ids)`, p.replicas.join(","));
    if (!text) return;
    const replicas = text.split(",").map((s) => parseInt(s.trim(), 10));
    if (replicas.some(Number.isNaN)) { toast("replicas must be broker ids"); return; }
    post("/api/reassign", {topic: p.topic, partition: p.partition, replicas});
  }}, "reassign");
  return el("td", {class: "actions-col"}, elect, " ", move);
}

function renderPartitions(state) {
  const showInternal = document.getElementById("show-internal").checked;
  const onlyProblems = document.getElementById("only-problems").checked;
  const rows = [];
  for (const t of state.topics || []) {
    if (t.internal && !showInternal && !t.under_replicated && !t.offline) continue;
    for (const p of t.partitions) {
      if (onlyProblems && !p.under_replicated && !p.offline) continue;
      const status = p.offline ? "offline" : (p.under_replicated ? "under-replicated" : "ok");
      rows.push(el("tr", {class: status === "ok" ? "" : status, "data-topic": p.topic,
                          "data-partition": String(p.partition), "data-status": status},
        el("td", {}, p.topic), el("td", {}, p.partition), el("td", {}, p.leader < 0 ? "none" : p.leader),
        el("td", {}, p.replicas.join(", ")), el("td", {}, p.isr.join(", ")), el("td", {}, status),
        partitionActions(p)));
    }
  }
  fill(document.querySelector("#partitions tbody"), rows);
}

function renderGroups(state) {
  const groups = state.groups || [];
  const box = document.getElementById("groups");
  if (!groups.length) { box.replaceChildren(el("p", {class: "muted"}, "no consumer groups")); return; }
  box.replaceChildren(...groups.map((g) => {
    const table = el("table", {},
      el("thead", {}, el("tr", {}, ...["topic", "partition", "committed", "log end", "lag", "member"]
        .map((h) => el("th", {}, h)))),
      el("tbody", {}, ...g.partitions.map((r) => el("tr", {"data-group": g.group, "data-topic": r.topic,
                                                             "data-partition": String(r.partition)},
        el("td", {}, r.topic), el("td", {}, r.partition), el("td", {}, dash(r.current_offset)),
        el("td", {}, dash(r.log_end_offset)),
        el("td", {class: r.lag > 0 ? "lag-high lag" : "lag"}, dash(r.lag)), el("td", {}, dash(r.member))))));
    return el("div", {class: "group", "data-group": g.group},
      el("h3", {}, `${g.group} — ${g.state}, ${g.members} member(s), total lag ${g.total_lag}`,
         g.error ? ` (error: ${g.error})` : ""), table);
  }));
}

function renderCharts(charts) {
  const t = charts.t || [];
  drawLines(document.getElementById("chart-produce"), t,
            [{name: "bytes in", values: charts.bytesin}, {name: "records in", values: charts.messagesin}]);
  drawLines(document.getElementById("chart-fetch"), t,
            [{name: "consumers", values: charts.bytesout}, {name: "replication", values: charts.replicationbytesout}]);
  drawLines(document.getElementById("chart-isr"), t,
            [{name: "shrinks", values: charts.isrshrinks}, {name: "expands", values: charts.isrexpands}]);
  const lag = charts.loop_lag_ms || {};
  drawLines(document.getElementById("chart-lag"), t,
            Object.keys(lag).map((b) => ({name: `broker ${b}`, values: lag[b]})),
            (v) => (v === null || v === undefined ? "–" : v.toFixed(1)));
}

function render(state, charts) {
  document.body.classList.toggle("actions-enabled", !!state.allow_actions);
  const mode = document.getElementById("mode");
  mode.textContent = state.allow_actions ? "actions enabled" : "read-only";
  mode.className = "badge" + (state.allow_actions ? " actions" : "");
  const error = document.getElementById("error");
  error.hidden = !state.error;
  error.textContent = state.error || "";
  document.getElementById("updated").textContent = state.ready
    ? "updated " + new Date(state.generated_s * 1000).toLocaleTimeString() : "waiting for the first read…";
  renderSummary(state);
  renderBrokers(state, charts);
  renderController(state);
  renderPartitions(state);
  renderGroups(state);
  renderCharts(charts);
}

async function poll() {
  try {
    const [state, charts] = await Promise.all([
      fetch("/api/state").then((r) => r.json()), fetch("/api/charts").then((r) => r.json())]);
    lastState = [state, charts];
    render(state, charts);
  } catch (exc) {
    const error = document.getElementById("error");
    error.hidden = false;
    error.textContent = "console server unreachable: " + exc;
  } finally {
    setTimeout(poll, POLL_MS);
  }
}

for (const id of ["show-internal", "only-problems"]) {
  document.getElementById(id).addEventListener("change", () => { if (lastState) render(...lastState); });
}
poll();
