// The console's router: `#/<page>` selects a page; a page renders into #view.

import { ApiError, AuthRequired, api, clearKey, hasKey, setKey } from "./api.js";
import { h } from "./dom.js";
import { forget } from "./forget.js";
import { history } from "./history.js";
import { namespaces, sessions } from "./namespaces.js";
import { operations } from "./operations.js";
import { search } from "./search.js";
import { timeline } from "./timeline.js";

const ROUTES = [
  [/^$/, namespaces],
  [/^ns\/([^/]+)$/, sessions],
  [/^ns\/([^/]+)\/s\/([^/]+)$/, timeline],
  [/^ns\/([^/]+)\/history$/, history],
  [/^ns\/([^/]+)\/history\/([^/]+)$/, history],
  [/^search$/, search],
  [/^operations$/, operations],
  [/^forget$/, forget],
];

let generation = 0;

async function render() {
  const mine = ++generation;
  const view = document.getElementById("view");
  delete view.dataset.rendered;
  view.setAttribute("aria-busy", "true");
  const [path, query] = location.hash.replace(/^#\/?/, "").split("?");
  const params = new URLSearchParams(query || "");
  const found = ROUTES.map(([re, page]) => [path.match(re), page]).find(([m]) => m);
  if (!found) {
    done(view, h("p", { class: "error" }, "No such page."));
    return;
  }
  const [match, page] = found;
  const body = h("div", { class: "page" });
  try {
    // a link with a malformed escape ("%ZZ") is an error of the page, not of the router
    const args = match.slice(1).map(decodeURIComponent);
    await page(body, params, ...args);
  } catch (err) {
    if (err instanceof AuthRequired) {
      body.replaceChildren(keyForm(err.message));
    } else {
      const what = err instanceof ApiError ? `${err.status}: ${err.message}` : String(err);
      body.replaceChildren(h("p", { class: "error", role: "alert" }, what));
    }
  }
  if (mine === generation) {
    done(view, body);
    await who();
  }
}

// the page is in place: `data-rendered` names the route it shows (what tests wait for)
function done(view, body) {
  view.replaceChildren(body);
  view.setAttribute("aria-busy", "false");
  view.dataset.rendered = location.hash || "#/";
}

function keyForm(reason) {
  const input = h("input", { type: "password", name: "key", autocomplete: "off", required: true,
                             "aria-label": "API key", placeholder: "lyk_…" });
  const submit = (event) => {
    event.preventDefault();
    setKey(input.value.trim());
    render();
  };
  return h("form", { class: "key", on: { submit } },
    h("h2", null, "API key"),
    h("p", null, `This gateway needs an API key (${reason}). It is kept in this tab only.`),
    input, h("button", { type: "submit" }, "Use this key"));
}

async function who() {
  const slot = document.getElementById("who");
  if (!hasKey()) {
    slot.replaceChildren();
    return;
  }
  try {
    const me = await api("whoami");
    const out = h("button", { type: "button", on: { click: () => { clearKey(); render(); } } },
                  "forget key");
    slot.replaceChildren(`key ${me.name} (${(me.namespaces || ["*"]).join(", ")}) `, out);
  } catch {
    slot.replaceChildren();
  }
}

window.addEventListener("hashchange", render);
render();
