// More pages: the message browser, consumer groups, controller, security.
"use strict";

(() => {
  const {el, dash, table, section, facts, link, getJson, postJson, resultView, input, labelled,
         selectOf} = window.ui;
  const {groupsTable, changesTable, controllerFacts, replace} = window.pages;
  const enc = encodeURIComponent;

  // -- the message browser --------------------------------------------------------------------

  function shown(part, format) {
    if (!part || part.size === null || part.size === undefined) return el("span", {class: "muted"}, "null");
    if (format === "hex" || part.text === null) return el("code", {class: "hex"}, part.hex + (part.truncated ? "…" : ""));
    if (format === "json") {
      try { return el("pre", {class: "json"}, JSON.stringify(JSON.parse(part.text), null, 2)); } catch (_) { /* not JSON */ }
    }
    return el("span", {class: "text"}, part.text + (part.truncated ? "…" : ""));
  }

  const messages = {
    title: "Messages",
    init(params, ctx) {
      this.name = params.name;
      this.doc = null;
      const t = (ctx.state.topics || []).find((x) => x.name === params.name);
      const parts = t ? t.partitions.map((p) => [String(p.partition), `partition ${p.partition}`]) : [];
      const from = selectOf("msg-from", [["newest", "newest"], ["offset", "from offset"], ["timestamp", "from time"]], "newest");
      const form = el("form", {id: "browse", onsubmit: (e) => { e.preventDefault(); this.load(); }},
        labelled("partition", selectOf("msg-partition", [["all", "all"], ...parts], "all")),
        labelled("start", from),
        labelled("offset", input({id: "msg-offset", type: "number", min: "0", value: "0"})),
        labelled("time", input({id: "msg-time", type: "datetime-local", step: "1"})),
        labelled("limit", input({id: "msg-limit", type: "number", min: "1", max: "500", value: "50"})),
        el("button", {type: "submit"}, "load"));
      const view = el("div", {class: "toolbar"},
        labelled("show values as", selectOf("msg-format", [["text", "text"], ["json", "JSON (pretty)"], ["hex", "hex"]], "text")),
        labelled("search loaded records", input({id: "msg-search", type: "search", placeholder: "key, value or header contains…"})));
      view.addEventListener("input", () => this.render());
      view.addEventListener("change", () => this.render());
      return [el("h2", {}, "Messages of ", link(`/topics/${enc(params.name)}`, params.name)), form, view,
              el("p", {id: "msg-status", class: "muted"}), el("div", {id: "messages-box"})];
    },
    update() { if (!this.started) { this.started = true; this.load(); } },
    async load() {
      const q = new URLSearchParams();
      q.set("partition", document.getElementById("msg-partition").value);
      const from = document.getElementById("msg-from").value;
      q.set("from", from);
      if (from === "offset") q.set("offset", document.getElementById("msg-offset").value || "0");
      if (from === "timestamp") {
        const when = document.getElementById("msg-time").value;
        q.set("timestamp", String(when ? new Date(when).getTime() : Date.now() - 3600 * 1000));
      }
      q.set("limit", document.getElementById("msg-limit").value || "50");
      document.getElementById("msg-status").textContent = "loading…";
      this.doc = await getJson(`/api/topics/${enc(this.name)}/messages?${q}`);
      this.render();
    },
    render() {
      const doc = this.doc;
      if (!doc) return;
      const status = document.getElementById("msg-status");
      const box = document.getElementById("messages-box");
      if (doc.error) { status.textContent = ""; box.replaceChildren(el("p", {class: "error-text"}, doc.error)); return; }
      const format = document.getElementById("msg-format").value;
      const needle = document.getElementById("msg-search").value.toLowerCase();
      const text = (part) => (part && part.text !== null && part.text !== undefined ? part.text : (part && part.hex) || "");
      const records = doc.records.filter((r) => !needle || [text(r.key), text(r.value),
        ...r.headers.flatMap((h) => [h.key, text(h)])].some((s) => s.toLowerCase().includes(needle)));
      status.textContent = `${records.length} of ${doc.records.length} loaded record(s) shown` +
        (doc.took_ms !== undefined ? ` (read in ${doc.took_ms} ms)` : "");
      box.replaceChildren(
        ...(doc.errors || []).map((e) => el("p", {class: "error-text"}, e)),
        table("messages", ["partition", "offset", "timestamp", "key", "value", "headers"], records.map((r) =>
          el("tr", {"data-partition": String(r.partition), "data-offset": String(r.offset)},
            el("td", {}, r.partition), el("td", {}, r.offset),
            el("td", {title: r.timestamp_type}, new Date(r.timestamp).toISOString()),
            el("td", {class: "key"}, shown(r.key, format)), el("td", {class: "value"}, shown(r.value, format)),
            el("td", {class: "headers"}, r.headers.map((h) => el("div", {}, `${h.key}: `, shown(h, format))))))));
    },
  };

  // -- consumer groups ---------------------------------------------------------------------------

  const groups = {
    title: "Consumer groups",
    init() { return [section("Consumer groups", el("div", {id: "groups-box"}))]; },
    update(ctx) {
      const errs = ctx.state.group_errors || [];
      document.getElementById("groups-box").replaceChildren(groupsTable(ctx.state.groups || [], "groups"),
        ...errs.map((e) => el("p", {class: "error-text"}, `ListGroups: ${e}`)));
    },
  };

  const group = {
    title: "Consumer group",
    init(params, ctx) {
      this.name = params.group;
      this.loaded = false;
      const out = [el("h2", {}, "Consumer group ", el("span", {id: "group-name"}, params.group)), facts("group-facts", []),
        section("Members", el("div", {id: "members-box"})),
        section("Lag per partition", el("div", {id: "group-lag-box"}))];
      if (ctx.allowActions) out.push(section("Reset offsets", resetForm(params.group, ctx)));
      return out;
    },
    async update(ctx) {
      if (this.loaded && ctx.tick % 2) return;
      this.loaded = true;
      const g = await getJson(`/api/groups/${enc(this.name)}`);
      if (g.error) {  // no stale members or lag beside the error
        replace("group-facts", el("p", {id: "group-facts", class: "error-text"}, g.error));
        for (const box of ["members-box", "group-lag-box"]) document.getElementById(box).replaceChildren();
        return;
      }
      replace("group-facts", facts("group-facts", [["state", g.state], ["members", g.members],
        ["protocol", g.protocol_type ? `${g.protocol_type} / ${dash(g.protocol)}` : "–"], ["total lag", g.total_lag]]));
      document.getElementById("members-box").replaceChildren(g.member_rows.length
        ? table("members", ["client id", "host", "member id", "instance id", "assignment"], g.member_rows.map((m) =>
          el("tr", {}, el("td", {}, m.client_id), el("td", {}, m.host), el("td", {class: "muted"}, m.member_id),
            el("td", {}, dash(m.instance_id)), el("td", {}, m.assignment.join(", ")))))
        : el("p", {class: "muted"}, "no active members"));
      document.getElementById("group-lag-box").replaceChildren(table("group-lag",
        ["topic", "partition", "committed", "log end", "lag", "member"], g.partitions.map((r) =>
          el("tr", {"data-group": g.group, "data-topic": r.topic, "data-partition": String(r.partition)},
            el("td", {}, link(`/topics/${enc(r.topic)}`, r.topic)), el("td", {}, r.partition),
            el("td", {}, dash(r.current_offset)), el("td", {}, dash(r.log_end_offset)),
            el("td", {class: r.lag > 0 ? "lag-high lag" : "lag"}, dash(r.lag)), el("td", {}, dash(r.member))))));
    },
  };

  function resetForm(groupName, ctx) {
    const topics = (ctx.state.topics || []).filter((t) => !t.internal).map((t) => [t.name, t.name]);
    const scenario = selectOf("reset-scenario", [["to-earliest", "to earliest"], ["to-latest", "to latest"],
      ["to-offset", "to offset"], ["shift-by", "shift by"], ["to-datetime", "to date-time (ISO-8601)"],
      ["by-duration", "by duration (ISO-8601, e.g. PT15M)"]], "to-earliest");
    const value = input({id: "reset-value", placeholder: "value (offset, shift, time or duration)"});
    const out = el("div", {id: "reset-result"});
    let planned = null;
    const body = () => ({topic: document.getElementById("reset-topic").value, scenario: scenario.value,
                         value: value.value === "" ? null : value.value});
    const show = (outcome) => {
      const d = outcome.doc;
      const parts = [resultView({ok: outcome.ok, doc: {error: d.error, results: d.results}})];
      if (d.plan) {
        parts.push(el("p", {}, d.dry_run ? `Dry run (group ${d.state}): nothing committed yet.` : "Committed."),
          table("reset-plan", ["topic", "partition", "current offset", "new offset"], d.plan.map((r) =>
            el("tr", {"data-partition": String(r.partition)}, el("td", {}, r.topic), el("td", {}, r.partition),
              el("td", {}, dash(r.current_offset)), el("td", {class: "new-offset"}, r.new_offset)))),
          ...(d.warnings || []).map((w) => el("p", {class: "muted"}, w)));
      }
      out.replaceChildren(...parts);
    };
    const execute = el("button", {type: "button", id: "reset-execute", disabled: true, onclick: async () => {
      if (!planned) return;
      show(await postJson(`/api/groups/${enc(groupName)}/reset-offsets`, {...planned, execute: true}));
      planned = null;
      execute.disabled = true;
    }}, "execute");
    const form = el("form", {id: "reset-offsets", onsubmit: async (e) => {
      e.preventDefault();
      planned = body();
      const outcome = await postJson(`/api/groups/${enc(groupName)}/reset-offsets`, planned);
      show(outcome);
      execute.disabled = !outcome.ok;
    }}, labelled("topic", selectOf("reset-topic", topics, topics.length ? topics[0][0] : "")),
       labelled("scenario", scenario), labelled("value", value),
       el("button", {type: "submit", id: "reset-dry-run"}, "dry run"), " ", execute);
    return el("div", {}, form, out);
  }

  // -- controller --------------------------------------------------------------------------------

  const controller = {
    title: "Controller",
    init() {
      return [section("Controller", facts("controller", [])),
              section("Reassignments in progress", el("div", {id: "reassignments-box"}, "loading…")),
              section("State-change log (newest first)", el("div", {id: "changes-box"}))];
    },
    async update(ctx) {
      replace("controller", controllerFacts(ctx.state.controller || {}));
      document.getElementById("changes-box").replaceChildren(changesTable((ctx.state.controller || {}).state_changes || [], 200));
      const doc = await getJson("/api/controller");
      const box = document.getElementById("reassignments-box");
      if (doc.reassignments_error) { box.replaceChildren(el("p", {class: "error-text"}, doc.reassignments_error)); return; }
      const moves = doc.reassignments || [];
      box.replaceChildren(moves.length ? table("reassignments", ["topic", "partition", "replicas", "adding", "removing", "progress"],
        moves.map((m) => el("tr", {}, el("td", {}, m.topic), el("td", {}, m.partition), el("td", {}, m.replicas.join(", ")),
          el("td", {}, m.adding.join(", ")), el("td", {}, m.removing.join(", ")),
          el("td", {}, m.progress.map((p) => el("div", {}, `broker ${p.broker}: ` + (p.leader_bytes
            ? `${Math.min(100, Math.round(100 * (p.bytes || 0) / p.leader_bytes))}% of the leader's bytes`
            : (p.bytes === null || p.bytes === undefined ? "not started" : `${p.bytes} bytes`))))))))
        : el("p", {class: "muted", id: "no-reassignments"}, "none"));
    },
  };

  // -- security ----------------------------------------------------------------------------------

  const security = {
    title: "Security",
    init() { return [section("ACLs", el("div", {id: "acls-box"}, "loading…")), section("SCRAM users", el("div", {id: "users-box"}, "loading…"))]; },
    async update(ctx) {
      if (this.loaded && ctx.tick % 5) return;
      this.loaded = true;
      const doc = await getJson("/api/security");
      document.getElementById("acls-box").replaceChildren(doc.acls_error
        ? el("p", {class: "error-text", id: "acls-error"}, doc.acls_error)
        : (doc.acls.length ? table("acls", ["resource type", "resource", "pattern", "principal", "host", "operation", "permission"],
          doc.acls.map((a) => el("tr", {}, el("td", {}, a.resource_type), el("td", {}, a.resource_name), el("td", {}, a.pattern_type),
            el("td", {}, a.principal), el("td", {}, a.host), el("td", {}, a.operation), el("td", {}, a.permission))))
          : el("p", {class: "muted"}, "no ACLs")));
      document.getElementById("users-box").replaceChildren(doc.users_error
        ? el("p", {class: "error-text"}, doc.users_error)
        : (doc.users.length ? table("users", ["user", "mechanisms"], doc.users.map((u) => el("tr", {"data-user": u.user},
          el("td", {}, u.user), el("td", {}, u.error || u.mechanisms.map((m) => `${m.mechanism} (${m.iterations} iterations)`).join(", ")))))
          : el("p", {class: "muted"}, "no SCRAM users")));
    },
  };

  Object.assign(window.pages, {messages, groups, group, controller, security});
})();
