// Operations: workers and their restarts, lag per stage, dead letters, rows, and the
// construction token counters per namespace.

import { api } from "./api.js";
import { badge, h, section, table } from "./dom.js";

export async function operations(view) {
  const ops = await api("operations");
  view.append(h("h1", null, "Operations"));
  if (!ops.stack_wide) {
    view.append(h("p", { class: "muted" }, "This key reads only some namespaces: workers, lag "
      + "and dead letters mix every namespace and need a key for every namespace (*)."));
  } else {
    view.append(workers(ops.supervision), lag(ops.stages), deadLetters(ops.dead_letters),
      section("Rows", table(["table", "rows"], Object.entries(ops.rows).map(([k, v]) =>
        h("tr", null, h("td", null, k), h("td", { class: "num" }, v))))));
  }
  const usage = Object.entries(ops.construction_tokens).sort(([a], [b]) => a.localeCompare(b));
  const columns = ["segments", "calls", "input_tokens", "output_tokens", "prompt_tokens"];
  view.append(section("Construction tokens per namespace", usage.length
    ? table(["namespace", ...columns.map((c) => c.replace("_", " ")), ""],
        usage.map(([ns, u]) => h("tr", null, h("td", null, ns),
          columns.map((c) => h("td", { class: "num" }, u[c] ?? 0)),
          h("td", null, u.estimated ? badge("estimated", "warn") : null))),
        { class: "usage" })
    : h("p", { class: "muted" }, "No segment encoded yet.")));
}

function workers(sup) {
  if (!sup) {
    return section("Workers", h("p", { class: "muted" },
      "No `lychee up` supervises this stack's workers (they run elsewhere)."));
  }
  return section(`Workers · lychee up ${sup.launcher_alive ? sup.state : "not running"}`,
    table(["stage", "state", "restarts", "pid", "last exit"], sup.stages.map((w) => h("tr", null,
      h("td", null, w.stage), h("td", null, badge(w.state, w.state === "running" ? "ok" : "warn")),
      h("td", { class: "num" }, w.restarts), h("td", { class: "num" }, w.pid ?? "–"),
      h("td", { class: "num" }, w.last_exit_code ?? "–")))),
    (sup.failed || []).length ? h("p", { class: "error" }, `failed: ${sup.failed.join(", ")}`) : null);
}

function lag(stages) {
  return section("Lag per stage", table(["stage", "group", "topic", "end", "committed", "lag"],
    stages.map((s) => h("tr", null, h("td", null, s.stage), h("td", null, s.group),
      h("td", null, s.topic), [s.end, s.committed, s.lag].map((x) => h("td", { class: "num" }, x)))),
    { class: "lag" }));
}

function deadLetters(dead) {
  return section("Dead letters",
    table(["topic", "messages"], Object.entries(dead).map(([topic, n]) => h("tr", null,
      h("td", null, topic), h("td", { class: "num" }, n ? badge(String(n), "warn") : "0")))),
    h("p", { class: "muted" }, "Counts per dead-letter topic (as `lychee status`). "
      + "Reasons, samples and replay are not in the console yet."));
}
