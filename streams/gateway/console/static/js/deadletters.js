// Dead letters by topic and reason with a sample of each, and their replay: a dry run
// first, then the replay once confirmed, then the receipt. A second replay of the same dead
// letters is refused, as `lychee dlq replay` refuses it; "replay again anyway" needs a second
// confirmation. The samples are any namespace's text: shown as text only, like all memory.

import { api } from "./api.js";
import { badge, fmtDate, h, section, table } from "./dom.js";

export async function deadLetters(totals) {
  const counts = table(["topic", "messages"], Object.entries(totals).map(([topic, n]) =>
    h("tr", null, h("td", null, topic), h("td", { class: "num" }, n ? badge(String(n), "warn") : "0"))));
  let byReason;
  try {
    const { reasons } = await api("dead-letters");
    byReason = reasons.length
      ? table(["topic", "reason", "count", "oldest", "newest", "sample", ""],
          reasons.map(reasonRows), { class: "reasons" })
      : h("p", { class: "muted" }, "No dead letters.");
  } catch (err) {
    byReason = h("p", { class: "error", role: "alert" }, String(err.message || err));
  }
  return section("Dead letters", counts, h("h3", null, "By reason"), byReason);
}

const shown = (v) => (v === null || v === undefined ? "–" : typeof v === "string" ? v
  : v.hex !== undefined ? `hex ${v.hex}` : JSON.stringify(v));

function reasonRows(r) {
  const s = r.sample;
  const panel = h("td", { colspan: 7 });
  const notes = [r.replayed_before ? `${r.replayed_before} replayed before` : null,
    r.after_replay ? `${r.after_replay} failed again after a replay` : null].filter(Boolean);
  return [
    h("tr", { class: "reason", dataset: { topic: r.topic, reason: r.error_type } },
      h("td", null, r.topic), h("td", null, badge(r.error_type, "reason")),
      h("td", { class: "num" }, r.count, notes.length ? h("div", { class: "facts" }, notes.join(", ")) : null),
      h("td", null, fmtDate(r.oldest)), h("td", null, fmtDate(r.newest)),
      h("td", { class: "sample" },
        h("div", { class: "facts" }, `${s.id} · ${s.stage || "?"} · from ${s.source}`),
        h("div", { class: "text error-text" }, s.error),
        h("pre", { class: "value" }, shown(s.value))),
      h("td", null, h("button", { type: "button", class: "replay", on: { click: replayer(r, panel) } },
        "Replay…"))),
    h("tr", { class: "replay" }, panel),
  ];
}

// the replay of one topic and reason, in `panel`: dry run, confirmation, receipt
function replayer(r, panel) {
  const source = r.topic.replace(/\.dlq$/, "");
  const say = (...nodes) => panel.replaceChildren(h("div", { class: "replay-panel" }, ...nodes));
  const send = (extra) => api("dead-letters/replay", { method: "POST",
    body: { topic: r.topic, error_type: r.error_type, ...extra } });
  const cancel = h("button", { type: "button", on: { click: () => panel.replaceChildren() } }, "Cancel");
  const run = async (extra) => {
    say(h("p", { class: "muted" }, "Replaying…"));
    try {
      say(receipt(await send(extra)));
    } catch (err) {
      if (err.status === 409) refused(err.message); else failed(err);
    }
  };
  const failed = (err) => say(h("p", { class: "error", role: "alert" }, String(err.message || err)));
  const refused = (why) => say(
    h("p", { class: "error refusal", role: "alert" }, why),
    h("button", { type: "button", class: "danger", on: { click: () => say(
      h("p", null, `Replay them again anyway: every one of them is produced to ${source} a `
        + "second time (deterministic ids make that idempotent downstream). Sure?"),
      h("button", { type: "button", class: "danger", on: { click: () => run({ force: true }) } },
        "Yes, replay them again"), cancel) } }, "Replay again anyway…"),
    cancel);
  return async () => {
    say(h("p", { class: "muted" }, "Dry run…"));
    let dry;
    try {
      dry = await send({ dry_run: true });
    } catch (err) {
      failed(err);
      return;
    }
    if (dry.refusal) {
      refused(`A replay is refused, as the CLI refuses it: ${dry.refusal}.`);
      return;
    }
    const n = dry.replayed.length;
    say(h("p", { class: "dry" }, `Dry run: ${n} of ${dry.selected} dead letters would be replayed `
      + `to ${source}${skipped(dry)}.`),
      n ? h("button", { type: "button", class: "danger", on: { click: () => run({}) } }, `Replay ${n}`) : null,
      cancel);
  };
}

const skipped = (r) => (r.already.length ? `; ${r.already.length} skipped, replayed before` : "")
  + (r.not_copied.length ? `; ${r.not_copied.length} not copied (too large: they stay in `
    + "their source topic)" : "");

function receipt(r) {
  return h("div", { class: "receipt" },
    h("p", null, `Replayed ${r.replayed.length} of ${r.selected} (replay ${r.replay_id})${skipped(r)}.`),
    h("ul", null, r.replayed.map((x) => h("li", null, `${x.id} → ${x.replayed.to}`))));
}
