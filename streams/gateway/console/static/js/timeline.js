// A session as a timeline: its raw turns a page at a time, grouped by the segment they fell
// in, and beside each segment why it was closed and the records it yielded, each linked to
// the turns it came from (turn -> segment -> record).

import { api, nsPath } from "./api.js";
import { badge, fmtDate, fmtNum, h, link, route, table } from "./dom.js";

const SIGNALS = [
  ["surprise", "surprise"], ["robust_surprise", "robust surprise z"],
  ["absolute_surprise", "absolute surprise A"], ["cohesion_drop", "cohesion drop d"],
  ["cohesion_term", "cohesion term C"], ["length_pressure", "length pressure L"],
  ["turn_pressure", "turn pressure N"], ["score", "score"], ["p_cut", "P(cut)"],
];

export async function timeline(view, params, namespace, session) {
  const page = Number(params.get("page") || 1);
  const size = Number(params.get("size") || 100);
  const query = new URLSearchParams({ page, page_size: size });
  if (params.get("turn")) query.set("turn_id", params.get("turn"));
  const data = await api(`${nsPath(namespace, "sessions", session, "timeline")}?${query}`);
  const here = (p) => route(["ns", namespace, "s", session], { page: p, size: size === 100 ? "" : size });
  const onPage = new Set(data.turns.map((t) => t.turn_id));
  view.append(
    h("p", { class: "crumbs" }, link([], "namespaces"), " / ", link(["ns", namespace], namespace),
      " / ", session),
    h("h1", null, `Session ${session}`),
    h("p", null, `${data.total} turns · page ${data.page} of ${data.pages}`,
      data.open_segment_exchanges ? ` · ${data.open_segment_exchanges} exchanges in the open segment` : "",
      " · ", link(["search"], "search this session", { ns: namespace, session })),
    pager(data, here),
  );
  if (!data.turns.length) {
    view.append(h("p", { class: "muted" }, "No turns on this page."));
    return;
  }
  const bySegment = new Map(data.segments.map((s) => [s.segment_id, s]));
  for (const group of groups(data.turns)) {
    const segment = bySegment.get(group.segmentId);
    bySegment.delete(group.segmentId);
    view.append(h("div", { class: "block" },
      h("ol", { class: "turns" }, group.turns.map(turnRow)),
      segment ? segmentCard(segment, group.turns[0], namespace, session, onPage)
        : group.turns.every((t) => t.memory === false) ? asideCard() : openCard()));
  }
  for (const segment of bySegment.values()) {  // written before segments kept their seqs
    view.append(h("div", { class: "block" }, h("p", { class: "muted" }, "(turns not placed)"),
      segmentCard(segment, null, namespace, session, onPage)));
  }
  view.append(pager(data, here));
  const wanted = params.get("turn");
  if (wanted) setTimeout(() => highlight([wanted], true), 0);
}

function groups(turns) {
  const out = [];
  for (const turn of turns) {
    const last = out[out.length - 1];
    if (last && last.segmentId === turn.segment_id) last.turns.push(turn);
    else out.push({ segmentId: turn.segment_id, turns: [turn] });
  }
  return out;
}

function turnRow(t) {
  return h("li", { class: "turn", dataset: { turn: t.turn_id } },
    h("div", { class: "meta" },
      h("span", { class: "seq" }, `#${t.seq}${t.idx ? `.${t.idx}` : ""}`), " ",
      h("span", { class: "tid" }, t.turn_id), " ",
      h("strong", null, t.speaker || t.role), " ",
      t.memory === false ? [badge("not memory"), " "] : null,
      h("span", { class: "muted" }, fmtDate(t.session_date))),
    h("div", { class: "content" }, t.content),
    t.image_caption ? h("div", { class: "caption" }, `[image: ${t.image_caption}]`) : null);
}

function openCard() {
  return h("aside", { class: "segment open" },
    h("h3", null, "No finalized segment"),
    h("p", { class: "muted" }, "These turns are searchable as raw turns but no finalized segment "
      + "holds them yet: the open segment is closed by a cut, a flush, the end of the session or "
      + "the idle timeout (or they were indexed before segments were kept)."));
}

function asideCard() {
  return h("aside", { class: "segment open" },
    h("h3", null, "Not memory"),
    h("p", { class: "muted" }, "An agent's tool calls, their outputs or reasoning: kept and "
      + "listed with the session, in no segment, never searched."));
}

function segmentCard(s, firstTurn, namespace, session, onPage) {
  const continues = firstTurn && s.first_seq !== null && s.first_seq < firstTurn.seq;
  return h("aside", { class: "segment", dataset: { segment: s.segment_id } },
    h("h3", null, `Segment ${s.segment_index} `, badge(s.reason || "reason unknown", "reason")),
    continues ? h("p", { class: "muted" }, "continues from the previous page") : null,
    h("p", { class: "facts" },
      `seqs ${s.first_seq ?? "?"}–${s.last_seq ?? "?"} · ${s.exchanges} exchanges · ${s.tokens} tokens · `
      + `turns ${s.first_turn_id} – ${s.last_turn_id} · ${s.encoder}`),
    s.signals ? signals(s.signals) : h("p", { class: "muted" }, closedBy(s.reason)),
    h("h4", null, `${s.records.length} records`),
    h("ul", { class: "records" }, s.records.map((r) => recordItem(r, namespace, session, onPage))));
}

function closedBy(reason) {
  if (reason === "session_flush") return "Closed by a flush, the end of the session or the idle timeout.";
  if (reason === "day_change") return "Closed because the next exchange is dated another day.";
  if (reason === "oversized_exchange") return "A fragment of an exchange longer than the cap.";
  if (reason === "per_exchange") return "Eager construction: one segment per exchange.";
  return "No boundary signals for this decision.";
}

function signals(values) {
  return table(["closing decision", "value"],
    SIGNALS.filter(([k]) => k in values).map(([k, label]) =>
      h("tr", { class: k === "p_cut" ? "key" : null }, h("td", null, label),
        h("td", { class: "num" }, fmtNum(values[k])))),
    { class: "signals" });
}

export function recordItem(r, namespace, session, onPage) {
  const dates = [["date", r.t_ref], ["from", r.t_valid_from], ["until", r.t_valid_to]]
    .filter(([, v]) => v).map(([k, v]) => `${k} ${v}`).join(" · ");
  const sources = (r.evidence || []).map((tid) =>
    onPage.has(tid)
      ? h("button", { type: "button", class: "turnref",
                      on: { click: () => highlight(r.evidence, true) } }, tid)
      : h("a", { class: "turnref", href: route(["ns", namespace, "s", session], { turn: tid }) }, tid));
  return h("li", { class: "record", dataset: { record: r.id } },
    badge(r.memory_type, "type"), " ", h("span", { class: "text" }, r.semantic_text),
    h("div", { class: "meta" },
      dates ? h("span", null, dates, " · ") : null,
      (r.entities || []).length ? h("span", null, "entities: ", r.entities.join(", "), " · ") : null,
      (r.tags || []).length ? h("span", null, "tags: ", r.tags.join(", "), " · ") : null,
      "from turns ", sources));
}

function highlight(turnIds, scroll) {
  const wanted = new Set(turnIds);
  let first = null;
  for (const li of document.querySelectorAll("li.turn")) {
    const on = wanted.has(li.dataset.turn);
    li.classList.toggle("hl", on);
    if (on && !first) first = li;
  }
  if (first && scroll) first.scrollIntoView({ block: "center" });
}

function pager(data, here) {
  if (data.pages <= 1) return h("nav", { class: "pager" });
  const go = (p, text) => (p >= 1 && p <= data.pages && p !== data.page
    ? h("a", { href: here(p) }, text) : h("span", { class: "muted" }, text));
  return h("nav", { class: "pager", "aria-label": "pages" },
    go(1, "« first"), " ", go(data.page - 1, "‹ previous"), " ",
    h("span", null, `page ${data.page} of ${data.pages}`), " ",
    go(data.page + 1, "next ›"), " ", go(data.pages, "last »"));
}
