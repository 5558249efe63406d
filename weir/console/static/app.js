// The console's router and poller: the path names the page (/, /brokers, /brokers/ID,
// /topics, /topics/NAME, /topics/NAME/messages, /groups, /groups/ID, /controller,
// /security); /api/state and /api/charts are polled and handed to the page's update().
"use strict";

(() => {
  const POLL_MS = 2000;
  const {el, getJson, postJson, input} = window.ui;
  const pages = window.pages;

  const ROUTES = [
    [/^\/$/, "overview", []], [/^\/brokers$/, "brokers", []], [/^\/brokers\/([^/]+)$/, "broker", ["id"]],
    [/^\/topics$/, "topics", []], [/^\/topics\/([^/]+)$/, "topic", ["name"]],
    [/^\/topics\/([^/]+)\/messages$/, "messages", ["name"]], [/^\/groups$/, "groups", []],
    [/^\/groups\/(.+)$/, "group", ["group"]], [/^\/controller$/, "controller", []],
    [/^\/security$/, "security", []],
  ];

  function route(path) {
    for (const [re, name, keys] of ROUTES) {
      const m = path.match(re);
      if (m) return [name, Object.fromEntries(keys.map((k, i) => [k, decodeURIComponent(m[i + 1])]))];
    }
    return ["overview", {}];
  }

  const [pageName, params] = route(location.pathname);
  const page = pages[pageName];
  const nav = pageName === "broker" ? "brokers" : (pageName === "topic" || pageName === "messages" ? "topics" : (pageName === "group" ? "groups" : pageName));
  document.querySelectorAll("#nav a").forEach((a) => a.classList.toggle("current", a.dataset.page === nav));
  document.title = `${page.title} · Weir console`;
  const ctx = {state: {}, charts: {}, tick: 0, allowActions: false, session: null};
  let built = false;

  function header(state) {
    const mode = document.getElementById("mode");
    mode.textContent = state.allow_actions ? "actions enabled" : "read-only";
    mode.className = "badge" + (state.allow_actions ? " actions" : "");
    const error = document.getElementById("error");
    error.hidden = !state.error;
    error.textContent = state.error || "";
    document.getElementById("updated").textContent = state.ready
      ? "updated " + new Date(state.generated_s * 1000).toLocaleTimeString() : "waiting for the first read…";
  }

  function loginBox(session) {
    const box = document.getElementById("login");
    if (!session || !session.allow_actions || !session.login_required) { box.replaceChildren(); return; }
    if (session.user) {
      box.replaceChildren(`signed in as ${session.user} `, el("button", {onclick: async () => {
        await postJson("/api/logout", {}); location.reload(); }}, "log out"));
      return;
    }
    const user = input({id: "login-user", placeholder: "user", size: 8});
    const password = input({id: "login-password", type: "password", placeholder: "password", size: 10});
    const message = el("span", {class: "login-error"});
    box.replaceChildren(el("form", {id: "login-form", class: "inline", onsubmit: async (e) => {
      e.preventDefault();
      const outcome = await postJson("/api/login", {username: user.value, password: password.value});
      if (outcome.ok) location.reload(); else message.textContent = outcome.doc.error || "refused";
    }}, user, password, el("button", {type: "submit"}, "log in for actions"), message));
  }

  async function poll() {
    try {
      const [state, charts] = await Promise.all([getJson("/api/state"), getJson("/api/charts")]);
      if (!ctx.session) {
        ctx.session = await getJson("/api/session");
        loginBox(ctx.session);
      }
      ctx.state = state;
      ctx.charts = charts;
      ctx.allowActions = !!state.allow_actions && !!ctx.session && !!ctx.session.user;
      header(state);
      if (!built && state.ready) {
        document.getElementById("page").replaceChildren(...page.init(params, ctx));
        built = true;
      }
      if (built) await page.update(ctx);
      ctx.tick += 1;
    } catch (exc) {
      const error = document.getElementById("error");
      error.hidden = false;
      error.textContent = "console server unreachable: " + exc;
    } finally {
      setTimeout(poll, POLL_MS);
    }
  }

  poll();
})();
