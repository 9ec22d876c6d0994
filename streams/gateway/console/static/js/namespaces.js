// The namespaces this key may read, and one namespace's sessions.

import { api, nsPath } from "./api.js";
import { badge, fmtDate, h, link, route, table } from "./dom.js";

const searchable = (ok) => (ok ? badge("searchable", "ok") : badge("indexing", "warn"));

export async function namespaces(view) {
  const { namespaces: rows } = await api("namespaces");
  view.append(h("h1", null, "Namespaces"));
  if (!rows.length) {
    view.append(h("p", { class: "muted" }, "No namespace this key may read holds anything."));
    return;
  }
  view.append(
    table(
      ["namespace", "sessions", "turns", "segments", "records", "nodes", "last write", "status", ""],
      rows.map((n) =>
        h("tr", { dataset: { namespace: n.namespace } },
          h("td", null, link(["ns", n.namespace], n.namespace)),
          [n.sessions, n.turns, n.segments, n.records, n.nodes].map((x) => h("td", { class: "num" }, x)),
          h("td", null, fmtDate(n.last_write)),
          h("td", null, searchable(n.searchable)),
          h("td", { class: "actions" },
            link(["search"], "search", { ns: n.namespace }), " ",
            link(["forget"], "forget", { ns: n.namespace }))),
      ),
      { class: "namespaces" },
    ),
  );
}

export async function sessions(view, _params, namespace) {
  const data = await api(nsPath(namespace, "sessions"));
  view.append(
    h("p", { class: "crumbs" }, link([], "namespaces"), " / ", namespace),
    h("h1", null, `Sessions of ${namespace}`),
    h("p", null, link(["search"], "search this namespace", { ns: namespace }), " · ",
      link(["ns", namespace, "history"], "history"), " · ",
      link(["forget"], "forget this namespace", { ns: namespace })),
  );
  if (!data.sessions.length) {
    view.append(h("p", { class: "muted" }, "No sessions."));
    return;
  }
  view.append(
    table(
      ["session", "turns", "segments", "records", "seqs", "conversation dates", "open segment", "status", ""],
      data.sessions.map((s) =>
        h("tr", { dataset: { session: s.session_id } },
          h("td", null, h("a", { href: route(["ns", namespace, "s", s.session_id]) }, s.session_id)),
          [s.turns, s.segments, s.records].map((x) => h("td", { class: "num" }, x)),
          h("td", null, s.first_seq === null ? "–" : `${s.first_seq}–${s.last_seq}`),
          h("td", null, `${fmtDate(s.first_date)} – ${fmtDate(s.last_date)}`),
          h("td", { class: "num" }, s.ended ? "ended" : `${s.open_segment_exchanges} exchanges`),
          h("td", null, searchable(s.searchable)),
          h("td", { class: "actions" },
            link(["forget"], "forget", { ns: namespace, session: s.session_id }))),
      ),
      { class: "sessions" },
    ),
  );
}
