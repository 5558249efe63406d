// Small DOM helpers shared by the pages.  Data reaches the DOM through textContent only.
"use strict";

window.ui = (() => {
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null) continue;
      if (k === "class") node.className = v;
      else if (k.startsWith("data-") || k === "for" || k === "role") node.setAttribute(k, v);
      else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
      else node[k] = v;
    }
    for (const c of children.flat()) {
      if (c === null || c === undefined || c === false) continue;
      node.appendChild(typeof c === "object" ? c : document.createTextNode(String(c)));
    }
    return node;
  }

  const dash = (v) => (v === null || v === undefined || v === "" ? "–" : v);

  function humanBytes(n) {
    if (n === null || n === undefined || n < 0) return "–";
    const units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let i = 0;
    while (n >= 1024 && i < units.length - 1) { n /= 1024; i += 1; }
    return (i === 0 ? n.toFixed(0) : n.toFixed(1)) + " " + units[i];
  }

  function table(id, headers, rows, opts) {
    return el("table", {id, class: (opts && opts.class) || ""},
      el("thead", {}, el("tr", {}, headers.map((h) => el("th", {}, h)))),
      el("tbody", {}, rows));
  }

  function section(title, ...children) {
    return el("section", {}, el("h2", {}, title), ...children);
  }

  function facts(id, pairs) {
    return el("dl", {id, class: "facts"},
      pairs.flatMap(([k, v]) => [el("dt", {}, k), el("dd", {"data-fact": k}, dash(v))]));
  }

  function link(href, text) { return el("a", {href}, text); }

  async function getJson(path) {
    const response = await fetch(path, {headers: {Accept: "application/json"}});
    const doc = await response.json().catch(() => ({error: `HTTP ${response.status}`}));
    if (!response.ok && !doc.error) doc.error = `HTTP ${response.status}`;
    return doc;
  }

  async function postJson(path, body) {
    const response = await fetch(path, {method: "POST",
      headers: {"Content-Type": "application/json"}, body: JSON.stringify(body || {})});
    const doc = await response.json().catch(() => ({error: `HTTP ${response.status}`}));
    return {ok: response.ok, status: response.status, doc};
  }

  function toast(text) {
    const box = document.getElementById("toast");
    box.textContent = text;
    box.hidden = false;
    clearTimeout(toast.timer);
    toast.timer = setTimeout(() => { box.hidden = true; }, 6000);
  }

  // An action's answer, readable: per resource "ok" or Kafka's error name and message.
  function resultView(outcome) {
    const {ok, doc} = outcome;
    const failed = !ok || doc.error || Object.values(doc.results || {}).some((err) => err);
    const box = el("div", {class: "result " + (failed ? "failed" : "ok")});
    if (doc.error) box.appendChild(el("p", {class: "error-text"}, doc.error));
    if (doc.results) {
      box.appendChild(el("ul", {}, Object.entries(doc.results).map(([name, err]) =>
        el("li", {"data-resource": name, class: err ? "error-text" : ""},
           `${name}: ${err ? err : "done"}`))));
    }
    return box;
  }

  function input(attrs) { return el("input", attrs); }

  function labelled(text, control) { return el("label", {class: "field"}, el("span", {}, text), control); }

  function selectOf(id, options, value) {
    return el("select", {id}, options.map(([v, text]) => el("option", {value: v, selected: v === value}, text)));
  }

  return {el, dash, humanBytes, table, section, facts, link, getJson, postJson, toast, resultView,
          input, labelled, selectOf};
})();
