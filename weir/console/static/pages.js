// The console's pages.  Each page has init(params) (builds its layout and forms once) and
// update(ctx) (fills its data regions; called on every poll, so forms keep what was typed).
"use strict";

window.pages = (() => {
  const {el, dash, humanBytes, table, section, facts, link, getJson, postJson, resultView,
         input, labelled, selectOf} = window.ui;
  const {drawLines, humanNumber} = window.weirChart;
  const BROKER_STATES = {0: "NotRunning", 1: "Starting", 2: "RecoveringFromUncleanShutdown",
                         3: "Running", 6: "PendingControlledShutdown", 7: "ShuttingDown"};
  const enc = encodeURIComponent;
  const topicHref = (t) => `/topics/${enc(t)}`;
  const groupHref = (g) => `/groups/${enc(g)}`;

  function replace(id, node) {
    const old = document.getElementById(id);
    if (old) old.replaceWith(node);
  }

  function statusOf(p) { return p.offline ? "offline" : (p.under_replicated ? "under-replicated" : "ok"); }

  function lastLag(charts, b) {
    if (b.down) return "–";  // no stale figure for a broker that is gone
    const lags = ((charts && charts.loop_lag_ms) || {})[String(b.id)] || [];
    const last = lags.length ? lags[lags.length - 1] : null;
    return last === null || last === undefined ? "–" : last.toFixed(1);
  }

  function dirsSummary(b) {
    const dirs = (b.log_dirs && b.log_dirs.dirs) || [];
    if (!dirs.length) return "–";
    const used = dirs.reduce((a, d) => a + d.size_bytes, 0);
    const free = dirs.reduce((a, d) => a + Math.max(d.usable_bytes, 0), 0);
    return `${humanBytes(used)} used, ${humanBytes(free)} free`;
  }

  function brokerRows(state, charts) {
    const controllerId = state.controller ? state.controller.id : null;
    return (state.brokers || []).map((b) => {
      const m = b.down ? null : b.metrics;
      return el("tr", {"data-broker": String(b.id), class: b.down ? "down" : ""},
        el("td", {}, link(`/brokers/${b.id}`, String(b.id))), el("td", {}, `${b.host}:${b.port}`),
        el("td", {}, b.down ? "down (not in Metadata)" : (b.id === controllerId ? "controller" : "broker")),
        el("td", {}, b.down ? "–" : (m ? (BROKER_STATES[m.state] || dash(m.state)) : (b.metrics_url ? "no answer" : "–"))),
        el("td", {}, m ? dash(m.partitions) : "–"), el("td", {}, m ? dash(m.leaders) : "–"),
        el("td", {}, m ? dash(m.under_replicated) : "–"), el("td", {}, lastLag(charts, b)),
        el("td", {}, b.down ? "–" : dirsSummary(b)),
        el("td", {}, b.metrics_url ? el("a", {href: b.metrics_url + "/metrics"}, "/metrics") : "not configured"));
    });
  }
  const BROKER_HEADERS = ["id", "endpoint", "role", "state", "partitions", "leaders",
                          "under-replicated", "loop lag (ms)", "log dirs", "metrics"];

  // An action's answer stays under its partition across the table's refreshes.
  const partitionResults = new Map();

  function partitionActions(p, ctx) {
    if (!ctx.allowActions) return null;
    const out = el("td", {class: "actions-col"});
    const key = `${p.topic}-${p.partition}`;
    const show = (outcome) => {
      out.querySelectorAll(".result").forEach((n) => n.remove());
      const node = resultView(outcome);
      partitionResults.set(key, node);
      out.appendChild(node);
    };
    const elect = el("button", {class: "elect", onclick: async () => {
      show(await postJson("/api/elect", {partitions: [{topic: p.topic, partition: p.partition}]}));
    }}, "elect preferred");
    const replicas = input({class: "replicas", value: p.replicas.join(","), size: 8,
                            "aria-label": `new replicas of ${p.topic}-${p.partition}`});
    const form = el("form", {class: "inline reassign", onsubmit: async (e) => {
      e.preventDefault();
      const ids = replicas.value.split(",").map((s) => s.trim()).filter(Boolean).map(Number);
      if (!ids.length || ids.some((n) => !Number.isInteger(n))) {
        show({ok: false, doc: {error: "replicas must be broker ids separated by commas"}});
        return;
      }
      show(await postJson("/api/reassign", {topic: p.topic, partition: p.partition, replicas: ids}));
    }}, replicas, el("button", {type: "submit"}, "reassign"));
    out.append(elect, " ", form);
    if (partitionResults.has(key)) out.appendChild(partitionResults.get(key));
    return out;
  }

  function partitionRow(p, ctx, detail) {
    const status = statusOf(p);
    const cells = [
      el("td", {}, detail ? p.partition : link(topicHref(p.topic), p.topic)),
      detail ? null : el("td", {}, p.partition),
      el("td", {}, p.leader < 0 ? "none" : p.leader), el("td", {}, p.replicas.join(", ")),
      el("td", {class: "isr"}, p.isr.join(", ")), el("td", {}, status)];
    if (detail) {
      cells.push(el("td", {}, dash(typeof p.log_start_offset === "number" ? p.log_start_offset : p.offsets_error)),
                 el("td", {class: "leo"}, dash(typeof p.log_end_offset === "number" ? p.log_end_offset : p.offsets_error)),
                 el("td", {}, dash(p.records)), el("td", {}, humanBytes(p.size_bytes)));
    }
    if (ctx.allowActions && detail) cells.push(partitionActions(p, ctx));
    return el("tr", {class: status === "ok" ? "" : status, "data-topic": p.topic,
                     "data-partition": String(p.partition), "data-status": status}, cells);
  }

  // -- overview -----------------------------------------------------------------------------

  const overview = {
    title: "Overview",
    init(params, ctx) {
      return [
        el("section", {id: "summary", class: "cards"}),
        section("Brokers", table("brokers", BROKER_HEADERS, [])),
        section("Controller", facts("controller", []), el("p", {}, link("/controller", "controller page: event queue, state-change log, reassignments"))),
        section("Throughput and ISR changes", el("div", {class: "charts"},
          chartBox("chart-produce", "Produce, whole cluster (per second)"),
          chartBox("chart-fetch", "Fetch, whole cluster (bytes per second)"),
          chartBox("chart-isr", "ISR shrinks and expands (per second)"),
          chartBox("chart-lag", "Event-loop lag per broker (ms, mean over each interval)"))),
        section("Problem partitions (under-replicated or offline)",
          el("label", {class: "muted"}, el("input", {type: "checkbox", id: "show-internal",
            onchange: () => this.update(ctx)}), " include internal topics"),
          table("partitions", ["topic", "partition", "leader", "replicas", "isr", "status"], [])),
        section("Consumer groups", el("div", {id: "groups-summary"})),
        section("Recent controller state changes", el("div", {id: "changes-box"})),
      ];
    },
    update(ctx) {
      const {state, charts} = ctx;
      const topics = state.topics || [];
      const showInternal = document.getElementById("show-internal").checked;
      const parts = topics.flatMap((t) => t.partitions);
      const visible = topics.filter((t) => showInternal || !t.internal);
      const urp = parts.filter((p) => p.under_replicated).length;
      const offline = parts.filter((p) => p.offline).length;
      const lag = (state.groups || []).reduce((a, g) => a + (g.total_lag || 0), 0);
      const brokers = state.brokers || [];
      const down = brokers.filter((b) => b.down).length;
      const card = (label, value, cls, id, href) => el("a", {class: "card " + (cls || ""), id, href},
        el("div", {class: "muted"}, label), el("div", {class: "value"}, value));
      document.getElementById("summary").replaceChildren(
        card("brokers up", `${brokers.length - down} / ${brokers.length}`, down ? "bad" : "", "brokers-count", "/brokers"),
        card("controller", dash(state.controller && state.controller.id), "", "controller-id", "/controller"),
        card("topics", visible.length, "", "topics-count", "/topics"),
        card("partitions", visible.reduce((a, t) => a + t.partitions.length, 0), "", "partitions-count", "/topics"),
        card("under-replicated", urp, urp ? "warn" : "", "urp-count", "/topics"),
        card("offline", offline, offline ? "bad" : "", "offline-count", "/topics"),
        card("consumer groups", (state.groups || []).length, "", "groups-count", "/groups"),
        card("consumer lag (records)", lag, "", "total-lag", "/groups"));
      replace("brokers", table("brokers", BROKER_HEADERS, brokerRows(state, charts)));
      replace("controller", controllerFacts(state.controller || {}));
      const problems = topics.filter((t) => showInternal || !t.internal)
        .flatMap((t) => t.partitions).filter((p) => p.under_replicated || p.offline);
      replace("partitions", table("partitions", ["topic", "partition", "leader", "replicas", "isr", "status"],
        problems.length ? problems.map((p) => partitionRow(p, ctx, false))
          : [el("tr", {}, el("td", {colSpan: 6, class: "muted"}, "none: every partition has its full ISR"))]));
      document.getElementById("groups-summary").replaceChildren(groupsTable(state.groups || [], "groups-overview"));
      document.getElementById("changes-box").replaceChildren(changesTable((state.controller || {}).state_changes || [], 15));
      renderCharts(charts);
    },
  };

  function chartBox(id, caption) {
    return el("figure", {}, el("figcaption", {}, caption), el("div", {class: "legend", id: id + "-legend"}),
              document.createElementNS("http://www.w3.org/2000/svg", "svg"));
  }

  function renderCharts(charts) {
    const t = charts.t || [];
    const draw = (id, series, fmt) => {
      const fig = document.getElementById(id + "-legend").parentNode;
      const svg = fig.querySelector("svg");
      svg.id = id;
      svg.setAttribute("class", "chart");
      drawLines(svg, t, series, fmt);
    };
    draw("chart-produce", [{name: "bytes in (B/s)", values: charts.bytesin},
                           {name: "records in (records/s)", values: charts.messagesin}]);
    draw("chart-fetch", [{name: "to consumers (B/s)", values: charts.bytesout},
                         {name: "to followers (B/s)", values: charts.replicationbytesout}]);
    draw("chart-isr", [{name: "shrinks (/s)", values: charts.isrshrinks},
                       {name: "expands (/s)", values: charts.isrexpands}]);
    const lag = charts.loop_lag_ms || {};
    draw("chart-lag", Object.keys(lag).map((b) => ({name: `broker ${b} (ms)`, values: lag[b]})),
         (v) => (v === null || v === undefined ? "–" : v.toFixed(1)));
  }

  function controllerFacts(c) {
    const pairs = [["broker", c.id], ["epoch", c.epoch], ["event queue", c.event_queue_size],
                   ["handling", c.current_event || (c.event_queue_size === null || c.event_queue_size === undefined ? "–" : "idle")],
                   ["events handled", c.events_processed], ["source", c.source]];
    if (c.registered) pairs.push(["registered brokers", c.registered.join(", ")]);
    if (c.zookeeper_error) pairs.push(["ZooKeeper", c.zookeeper_error]);
    return facts("controller", pairs);
  }

  function changesTable(changes, limit) {
    if (!changes.length) return el("p", {class: "muted"}, "no state changes reported (the controller's metrics endpoint gives them)");
    return el("div", {class: "scroll"}, table("changes", ["time", "event", "level", "message"],
      changes.slice(0, limit).map((s) => el("tr", {class: "level-" + s.level},
        el("td", {}, new Date(s.time_ms).toLocaleTimeString()), el("td", {}, s.event),
        el("td", {}, s.level), el("td", {}, s.message)))));
  }

  function groupsTable(groups, id) {
    if (!groups.length) return el("p", {class: "muted", id}, "no consumer groups");
    return table(id, ["group", "state", "members", "topics", "total lag"], groups.map((g) =>
      el("tr", {"data-group": g.group},
        el("td", {}, link(groupHref(g.group), g.group)), el("td", {class: "state"}, g.error ? `${dash(g.state)} (${g.error})` : g.state),
        el("td", {}, g.members), el("td", {}, (g.topics || []).join(", ")),
        el("td", {class: "lag" + (g.total_lag > 0 ? " lag-high" : "")}, dash(g.total_lag)))));
  }

  // -- brokers -----------------------------------------------------------------------------

  const brokers = {
    title: "Brokers",
    init() { return [section("Brokers", table("brokers", BROKER_HEADERS, []))]; },
    update(ctx) { replace("brokers", table("brokers", BROKER_HEADERS, brokerRows(ctx.state, ctx.charts))); },
  };

  const broker = {
    title: "Broker",
    init(params) {
      this.id = params.id;
      this.loaded = false;
      return [el("h2", {}, `Broker ${params.id}`), facts("broker-facts", []),
              section("Log dirs", el("div", {id: "log-dirs"}, "loading…")),
              section("Configs (every key, with its source)",
                labelled("filter ", input({id: "config-filter", placeholder: "name contains…",
                  oninput: () => filterRows("broker-configs", "config-filter")})),
                el("div", {id: "configs-box"}, "loading…"))];
    },
    async update(ctx) {
      if (this.loaded && ctx.tick % 5) return;
      this.loaded = true;
      const doc = await getJson(`/api/brokers/${enc(this.id)}`);
      if (doc.error) {
        replace("broker-facts", el("p", {id: "broker-facts", class: "error-text"}, doc.error));
        for (const box of ["log-dirs", "configs-box"]) {  // nothing to load: never "loading…"
          document.getElementById(box).replaceChildren(el("p", {class: "muted"}, "–"));
        }
        return;
      }
      replace("broker-facts", facts("broker-facts", [
        ["endpoint", `${doc.host}:${doc.port}`], ["status", doc.down ? "down (not in Metadata)" : "up"],
        ["role", doc.controller ? "controller" : "broker"], ["rack", doc.rack],
        ["partitions led", doc.leader_partitions], ["loop lag (ms)", lastLag(ctx.charts, doc)],
        ["metrics", doc.metrics_url ? doc.metrics_url + "/metrics" : "not configured"]]));
      if (doc.down) {  // DescribeLogDirs and DescribeConfigs go to the broker itself
        const why = `broker ${doc.id} is down: its log dirs and configs cannot be read until it is back`;
        document.getElementById("log-dirs").replaceChildren(el("p", {class: "error-text", id: "log-dirs-down"}, why));
        document.getElementById("configs-box").replaceChildren(el("p", {class: "muted"}, "–"));
        return;
      }
      const dirs = doc.log_dirs || {};
      document.getElementById("log-dirs").replaceChildren(dirs.error
        ? el("p", {class: "error-text"}, dirs.error)
        : table("log-dirs-table", ["path", "status", "size of its logs", "free", "total"], (dirs.dirs || []).map((d) =>
          el("tr", {}, el("td", {}, d.path), el("td", {}, d.error || "online"), el("td", {}, humanBytes(d.size_bytes)),
            el("td", {}, humanBytes(d.usable_bytes)), el("td", {}, humanBytes(d.total_bytes))))));
      document.getElementById("configs-box").replaceChildren(doc.configs_error
        ? el("p", {class: "error-text"}, doc.configs_error) : configsTable("broker-configs", doc.configs || []));
      filterRows("broker-configs", "config-filter");
    },
  };

  function configsTable(id, configs) {
    return table(id, ["name", "value", "source", "synonyms"], configs.map((c) =>
      el("tr", {"data-config": c.name, class: c.source === "DEFAULT_CONFIG" ? "" : "override"},
        el("td", {}, c.name), el("td", {class: "value"}, c.sensitive ? "(sensitive)" : dash(c.value)),
        el("td", {}, c.source),
        el("td", {class: "muted"}, (c.synonyms || []).map((s) => `${s.source}:${s.name}=${dash(s.value)}`).join("; ")))));
  }

  function filterRows(tableId, inputId) {
    const needle = (document.getElementById(inputId) || {}).value || "";
    document.querySelectorAll(`#${tableId} tbody tr`).forEach((tr) => {
      tr.hidden = needle && !tr.textContent.toLowerCase().includes(needle.toLowerCase());
    });
  }

  // -- topics ------------------------------------------------------------------------------

  const topics = {
    title: "Topics",
    init(params, ctx) {
      const out = [section("Topics",
        el("div", {class: "toolbar"}, input({id: "topic-search", placeholder: "search topics…", type: "search",
          oninput: () => this.update(ctx)}),
          el("label", {class: "muted"}, el("input", {type: "checkbox", id: "show-internal", onchange: () => this.update(ctx)}), " show internal topics")),
        table("topics", [], []))];
      if (ctx.allowActions) out.push(section("Create a topic", createTopicForm()));
      return out;
    },
    update(ctx) {
      const needle = document.getElementById("topic-search").value.toLowerCase();
      const showInternal = document.getElementById("show-internal").checked;
      const rows = (ctx.state.topics || []).filter((t) => (showInternal || !t.internal) && t.name.toLowerCase().includes(needle));
      replace("topics", table("topics", ["topic", "partitions", "replication factor", "size on disk (all replicas)", "records", "under-replicated", "offline"],
        rows.map((t) => el("tr", {"data-topic": t.name, class: t.offline ? "offline" : (t.under_replicated ? "under-replicated" : "")},
          el("td", {}, link(topicHref(t.name), t.name), t.internal ? el("span", {class: "badge small"}, "internal") : null),
          el("td", {}, t.partitions.length), el("td", {}, t.replication_factor), el("td", {}, humanBytes(t.size_bytes)),
          el("td", {class: "records"}, dash(t.records)), el("td", {}, t.under_replicated), el("td", {}, t.offline)))));
    },
  };

  function createTopicForm() {
    const name = input({id: "new-topic-name", required: true, placeholder: "name"});
    const parts = input({id: "new-topic-partitions", type: "number", value: "1", min: "1"});
    const factor = input({id: "new-topic-rf", type: "number", value: "1", min: "1"});
    const configs = input({id: "new-topic-configs", placeholder: "key=value,key=value", size: 30});
    const out = el("div", {id: "create-topic-result"});
    const form = el("form", {id: "create-topic", onsubmit: async (e) => {
      e.preventDefault();
      const cfg = {};
      for (const pair of configs.value.split(",").map((s) => s.trim()).filter(Boolean)) {
        const at = pair.indexOf("=");
        if (at < 1) { out.replaceChildren(resultView({ok: false, doc: {error: `not key=value: ${pair}`}})); return; }
        cfg[pair.slice(0, at).trim()] = pair.slice(at + 1).trim();
      }
      out.replaceChildren(resultView(await postJson("/api/topics", {name: name.value,
        partitions: Number(parts.value), replication_factor: Number(factor.value), configs: cfg})));
    }}, labelled("name", name), labelled("partitions", parts), labelled("replication factor", factor),
       labelled("configs", configs), el("button", {type: "submit"}, "create"));
    return el("div", {}, form, out);
  }

  const topic = {
    title: "Topic",
    init(params, ctx) {
      this.name = params.name;
      this.loaded = false;
      const out = [el("h2", {}, "Topic ", el("span", {id: "topic-name"}, params.name)),
        el("p", {}, link(`${topicHref(params.name)}/messages`, "browse messages →")),
        facts("topic-facts", []),
        section("Partitions", table("topic-partitions", [], [])),
        section("Consumer groups reading it", el("div", {id: "topic-groups"})),
        section("Configs", el("div", {id: "topic-configs-box"}, "loading…"))];
      if (ctx.allowActions) {
        out.push(section("Change a config", alterConfigForm(params.name)),
                 section("Delete the topic", deleteTopicForm(params.name)));
      }
      return out;
    },
    async update(ctx) {
      if (this.loaded && ctx.tick % 3) return;
      this.loaded = true;
      const doc = await getJson(`/api/topics/${enc(this.name)}`);
      if (doc.error) { replace("topic-facts", el("p", {id: "topic-facts", class: "error-text"}, doc.error)); return; }
      replace("topic-facts", facts("topic-facts", [["partitions", doc.partitions.length],
        ["replication factor", doc.replication_factor], ["records", doc.records],
        ["size on disk (all replicas)", humanBytes(doc.size_bytes)],
        ["under-replicated", doc.under_replicated], ["offline", doc.offline], ["internal", doc.internal ? "yes" : "no"]]));
      const headers = ["partition", "leader", "replicas", "isr", "status", "log start", "log end", "records", "size (leader)"];
      if (ctx.allowActions) headers.push("actions");
      if (!document.activeElement || !document.activeElement.closest("#topic-partitions")) {
        replace("topic-partitions", table("topic-partitions", headers, doc.partitions.map((p) => partitionRow(p, ctx, true))));
      }
      document.getElementById("topic-groups").replaceChildren(doc.groups.length
        ? table("topic-groups-table", ["group", "state", "lag on this topic"], doc.groups.map((g) =>
          el("tr", {"data-group": g.group}, el("td", {}, link(groupHref(g.group), g.group)), el("td", {}, g.state),
            el("td", {class: "lag"}, g.lag))))
        : el("p", {class: "muted"}, "no group has committed offsets for it"));
      document.getElementById("topic-configs-box").replaceChildren(doc.configs_error
        ? el("p", {class: "error-text"}, doc.configs_error) : configsTable("topic-configs", doc.configs || []));
    },
  };

  function alterConfigForm(name) {
    const key = input({id: "config-key", placeholder: "retention.ms", required: true});
    const value = input({id: "config-value", placeholder: "new value (empty: back to the default)"});
    const out = el("div", {id: "alter-config-result"});
    return el("div", {}, el("form", {id: "alter-config", onsubmit: async (e) => {
      e.preventDefault();
      const body = value.value === "" ? {delete: [key.value]} : {set: {[key.value]: value.value}};
      out.replaceChildren(resultView(await postJson(`${"/api/topics/" + enc(name)}/config`, body)));
    }}, labelled("config", key), labelled("value", value), el("button", {type: "submit"}, "apply")), out);
  }

  function deleteTopicForm(name) {
    const confirmName = input({id: "delete-confirm", placeholder: "type the topic's name"});
    const out = el("div", {id: "delete-topic-result"});
    return el("div", {}, el("form", {id: "delete-topic", onsubmit: async (e) => {
      e.preventDefault();
      if (confirmName.value !== name) {
        out.replaceChildren(resultView({ok: false, doc: {error: "type the topic's name to confirm"}}));
        return;
      }
      out.replaceChildren(resultView(await postJson(`/api/topics/${enc(name)}/delete`, {})));
    }}, labelled("confirm", confirmName), el("button", {type: "submit", class: "danger"}, "delete topic")), out);
  }

  return {overview, brokers, broker, topics, topic, groupsTable, changesTable, controllerFacts,
          filterRows, configsTable, replace};
})();
