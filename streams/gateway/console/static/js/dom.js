// Building the page from untrusted text: DOM nodes and text nodes only, never HTML.
// Links go only to the console's own routes (`#/...`): memory text never becomes a URL.

export function h(tag, props, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(props || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name === "on") {
      for (const [event, fn] of Object.entries(value)) el.addEventListener(event, fn);
    } else if (name === "href") {
      el.setAttribute("href", inConsole(value));
    } else if (name.toLowerCase().startsWith("on") || name === "style" || name === "src") {
      throw new Error(`refusing attribute ${name}`);
    } else if (name === "class") {
      el.className = value;
    } else if (name === "dataset") {
      Object.assign(el.dataset, value);
    } else {
      el.setAttribute(name, value === true ? "" : String(value));
    }
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : String(child)); // a string becomes a text node
  }
  return el;
}

export function inConsole(href) {
  const text = String(href);
  if (!text.startsWith("#/")) throw new Error("only links within the console");
  return text;
}

// `#/ns/<namespace>/s/<session>?page=2`: every part encoded
export function route(parts, params) {
  const path = "#/" + parts.map((p) => encodeURIComponent(String(p))).join("/");
  const query = params ? new URLSearchParams(clean(params)).toString() : "";
  return query ? `${path}?${query}` : path;
}

function clean(params) {
  return Object.fromEntries(
    Object.entries(params).filter(([, v]) => v !== undefined && v !== null && v !== ""),
  );
}

export const link = (parts, text, params) => h("a", { href: route(parts, params) }, text);

export function fmtDate(value) {
  if (!value) return "–";
  const d = new Date(value);
  return Number.isNaN(d.getTime()) ? String(value) : d.toISOString().replace("T", " ").slice(0, 16);
}

export function fmtNum(value, digits = 3) {
  if (value === null || value === undefined) return "–";
  return Number.isInteger(value) ? String(value) : Number(value).toFixed(digits);
}

export function table(headers, rows, props) {
  return h(
    "table",
    props,
    h("thead", null, h("tr", null, headers.map((x) => h("th", null, x)))),
    h("tbody", null, rows),
  );
}

export const badge = (text, kind) => h("span", { class: `badge ${kind || ""}` }, text);

export function section(title, ...children) {
  return h("section", null, h("h2", null, title), ...children);
}
