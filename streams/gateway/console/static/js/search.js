// Search: a question with k, session and ablation; then why it found what it found: the
// plan, the evidence with scores, provenance and dates, the serialized context with its
// token count, and the time each stage took.

import { api, nsPath } from "./api.js";
import { badge, fmtDate, fmtNum, h, route, section, table } from "./dom.js";

export async function search(view, params) {
  const [{ namespaces }, ablations] = await Promise.all([api("namespaces"), ablationChoices()]);
  const current = {
    ns: params.get("ns") || (namespaces[0] && namespaces[0].namespace) || "",
    q: params.get("q") || "", k: params.get("k") || "10",
    session: params.get("session") || "", ablation: params.get("ablation") || "",
  };
  view.append(h("h1", null, "Search"), form(current, namespaces.map((n) => n.namespace), ablations));
  if (!current.q || !current.ns) return;
  const body = { query: current.q, k: Number(current.k) };
  if (current.session) body.session_id = current.session;
  if (current.ablation) body.ablation = current.ablation;
  const reply = await api(nsPath(current.ns, "search"), { method: "POST", body });
  view.append(results(reply, current.ns));
}

async function ablationChoices() {
  try {  // the gateway's own schema: the console never lists them twice
    const spec = await (await fetch("openapi.json", { cache: "no-store" })).json();
    const field = spec.components.schemas.SearchIn.properties.ablation;
    return (field.anyOf || []).flatMap((x) => x.enum || []);
  } catch {
    return [];
  }
}

function form(current, names, ablations) {
  const field = (label, input) => h("label", null, h("span", null, label), input);
  const ns = h("select", { name: "ns", required: true },
    names.map((n) => h("option", { value: n, selected: n === current.ns }, n)));
  const q = h("input", { name: "q", value: current.q, required: true, size: 60,
                         placeholder: "a question about this namespace" });
  const k = h("input", { name: "k", type: "number", min: 1, max: 200, value: current.k });
  const session = h("input", { name: "session", value: current.session, placeholder: "all" });
  const ablation = h("select", { name: "ablation" }, h("option", { value: "" }, "none"),
    ablations.map((a) => h("option", { value: a, selected: a === current.ablation }, a)));
  const submit = (event) => {
    event.preventDefault();
    location.hash = route(["search"], { ns: ns.value, q: q.value, k: k.value,
                                        session: session.value, ablation: ablation.value });
  };
  return h("form", { class: "search", on: { submit } },
    field("namespace", ns), field("question", q), field("k", k), field("session", session),
    field("ablation", ablation), h("button", { type: "submit" }, "Search"));
}

function results(reply, namespace) {
  return h("div", { class: "results" },
    reply.answer ? section("Answer", h("p", null, reply.answer)) : null,
    plan(reply.plan || {}),
    section(`Evidence (${reply.evidence.length})`, evidence(reply.evidence, namespace)),
    section(`Context · ${reply.context_tokens} tokens`, h("pre", { class: "context" }, reply.context)),
    section("Timings", table(["stage", "ms"], Object.entries(reply.timings_ms).map(([k, v]) =>
      h("tr", null, h("td", null, k), h("td", { class: "num" }, fmtNum(v, 1)))), { class: "timings" })));
}

function filter(f) {
  return f && (f.since || f.until) ? `${f.since || "…"} to ${f.until || "…"}` : "none";
}

function plan(p) {
  const routes = (p.routes || []).map((r, i) => h("tr", null,
    h("td", null, `route ${i + 1}`), h("td", null, r.goal),
    h("td", null, h("ul", null, r.queries.map((q) => h("li", null, q)))),
    h("td", null, filter(r.temporal_filter)), h("td", null, r.speaker || "–")));
  return section("Plan",
    h("dl", { class: "plan" },
      h("dt", null, "question type"), h("dd", null, badge(p.question_type || "?", "type")),
      h("dt", null, "planner"), h("dd", null, p.source || "?"),
      h("dt", null, "date filter"), h("dd", null, filter(p.temporal_filter)),
      p.evidence_target ? [h("dt", null, "evidence target"), h("dd", null, p.evidence_target)] : null,
      h("dt", null, "queries"), h("dd", null, h("ul", null, (p.semantic_queries || []).map((q) => h("li", null, q))))),
    table(["", "goal", "queries", "date filter", "speaker"], routes, { class: "routes" }));
}

// a raw turn's text names its speaker already ("Ann: ..."); a record's does not
function speaker(e) {
  return e.speaker && !e.text.startsWith(`${e.speaker}: `) ? h("strong", null, `${e.speaker}: `) : null;
}

function evidence(items, namespace) {
  return table(["#", "kind", "text", "scores", "provenance", "date"],
    items.map((e, i) => h("tr", { class: "evidence" },
      h("td", { class: "num" }, i + 1),
      h("td", null, badge(e.memory_type || e.kind, e.kind)),
      h("td", { class: "text" }, speaker(e), e.text,
        e.context ? h("div", { class: "record-context" }, `context: ${e.context}`) : null,
        marks(e)),
      h("td", null, h("ul", { class: "scores" }, Object.entries(e.scores).map(([k, v]) =>
        h("li", null, `${k} ${fmtNum(v)}`))), e.routes.length ? `routes: ${e.routes.join(", ")}` : null),
      h("td", null, `session ${e.session_id}: `, e.turn_ids.map((tid) => [h("a",
        { class: "turnref", href: route(["ns", namespace, "s", e.session_id], { turn: tid }) }, tid), " "])),
      h("td", null, e.resolved_date || fmtDate(e.date)))),
    { class: "evidence" });
}

// what the item's links say, as the context's notes say it: replaced (in part: what of it),
// current since a change, contradicted
function marks(e) {
  const part = (e.replaced_values || []).length ? `${e.replaced_values.join(", ")} ` : "";
  const rest = e.kind === "record" ? "its other values" : "the rest";
  const out = [];
  if ((e.superseded_by || []).length) {
    out.push(badge(`${part}replaced ${e.valid_to || "later"}`, "warn"));
    if (part) out.push(" ", h("span", { class: "muted" }, `${rest} not said to change`));
  } else if ((e.supersedes || []).length) {
    out.push(badge(e.valid_from ? `current since ${e.valid_from}` : "current", "ok"));
  }
  if ((e.conflict || []).length) out.push(" ", badge("contradicted, unsettled", "warn"));
  return out.length ? h("div", { class: "marks" }, out) : null;
}
