// A namespace's history, or one record's: what replaced what (when, from which turns, found
// by which rule or model), then the conflicts nothing settled. Every record stays; this only
// shows the links. Each statement links to its own record's history.

import { api, nsPath } from "./api.js";
import { badge, fmtDate, h, link, section } from "./dom.js";

function said(namespace, side, label) {
  return h("div", { class: "said" },
    h("span", { class: "label" }, label), " ",
    h("span", { class: "when" }, fmtDate(side.said_at)), " ",
    h("span", { class: "text" }, side.text), " ",
    h("span", { class: "turns" },
      side.turn_ids.map((t) => link(["ns", namespace, "s", side.session_id], t)).flatMap((a) => [a, " "])),
    h("span", { class: "record" }, link(["ns", namespace, "history", side.record_id], "its history")));
}

function change(namespace, c, conflict) {
  return h("li", { class: conflict ? "conflict" : "supersession", dataset: { newer: c.newer.record_id } },
    h("div", { class: "head" },
      conflict ? badge("conflict", "warn") : badge(`replaced ${fmtDate(c.changed_at)}`, "ok"), " ",
      h("span", { class: "finder" }, c.found_by), " ",
      h("span", { class: "reason muted" }, c.reason)),
    said(namespace, c.older, conflict ? "one" : "was"),
    said(namespace, c.newer, conflict ? "other" : "now"));
}

export async function history(view, _params, namespace, recordId) {
  const one = recordId ? `?record_id=${encodeURIComponent(recordId)}` : "";
  const data = await api(nsPath(namespace, "history") + one);
  view.append(
    recordId
      ? h("p", { class: "crumbs" }, link([], "namespaces"), " / ", link(["ns", namespace], namespace),
        " / ", link(["ns", namespace, "history"], "history"), " / record")
      : h("p", { class: "crumbs" }, link([], "namespaces"), " / ", link(["ns", namespace], namespace),
        " / history"),
    h("h1", null, recordId ? `History of record ${recordId}` : `History of ${namespace}`),
    section(`Supersessions (${data.supersessions.length})`,
      data.supersessions.length
        ? h("ol", { class: "history" }, data.supersessions.map((c) => change(namespace, c, false)))
        : h("p", { class: "muted" }, "Nothing replaced yet.")),
    section(`Open conflicts (${data.conflicts.length})`,
      data.conflicts.length
        ? h("ol", { class: "conflicts" }, data.conflicts.map((c) => change(namespace, c, true)))
        : h("p", { class: "muted" }, "No conflicts.")),
  );
}
