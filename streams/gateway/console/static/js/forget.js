// Forget a namespace or one session: the confirmation repeats its name, then the receipt.

import { api, nsPath } from "./api.js";
import { h, link, route, section, table } from "./dom.js";

export async function forget(view, params) {
  const { namespaces } = await api("namespaces");
  const names = namespaces.map((n) => n.namespace);
  const ns = params.get("ns") || "";
  const session = params.get("session") || "";
  view.append(h("h1", null, "Forget"));
  if (!ns) {
    view.append(h("p", null, "Choose what to forget: everything derived from it goes, in every "
      + "stage, for good."), h("ul", null, names.map((n) => h("li", null,
      link(["forget"], n, { ns: n })))));
    return;
  }
  const what = session ? `session ${session} of namespace ${ns}` : `namespace ${ns}`;
  const name = session || ns;
  const typed = h("input", { name: "confirm", autocomplete: "off", "aria-label": "confirm" });
  const button = h("button", { type: "submit", class: "danger", disabled: true }, `Forget ${what}`);
  const result = h("div", { class: "receipt" });
  typed.addEventListener("input", () => { button.disabled = typed.value !== name; });
  const submit = async (event) => {
    event.preventDefault();
    if (typed.value !== name) return;
    button.disabled = true;
    result.replaceChildren(h("p", { class: "muted" }, "Forgetting… every stage confirms."));
    try {
      const path = session ? nsPath(ns, "sessions", session) : nsPath(ns);
      result.replaceChildren(receipt(await api(path, { method: "DELETE" })));
    } catch (err) {
      result.replaceChildren(h("p", { class: "error", role: "alert" }, String(err.message || err)));
    }
  };
  view.append(
    h("form", { class: "forget", on: { submit } },
      h("p", null, `This removes ${what}: raw turns, segments, records, evidence links, `
        + "state and caches, and the old store versions that held them. It cannot be undone."),
      h("label", null, h("span", null, `Type ${session ? "the session" : "the namespace"} `
        + "name to confirm: "), h("code", null, name), typed),
      button),
    result);
}

function receipt(r) {
  const rows = Object.entries(r.rows_removed).map(([k, v]) => h("tr", null, h("td", null, k),
    h("td", { class: "num" }, v), h("td", { class: "num" }, r.rows_updated[k] ?? 0)));
  return section("Receipt",
    h("p", null, `Forgot ${r.session_id ? `session ${r.session_id} of ` : ""}namespace `
      + `${r.namespace} in ${r.elapsed_s}s (forget ${r.forget_id}).`),
    table(["table", "rows removed", "rows updated"], rows, { class: "removed" }),
    h("p", null, `${r.redis_keys_removed} Redis keys removed, ${r.versions_pruned} store `
      + `versions pruned; stages: ${Object.entries(r.stages).map(([s, t]) => `${s} ${t}s`).join(", ")}.`),
    h("p", null, h("a", { href: route([]) }, "back to the namespaces")));
}
