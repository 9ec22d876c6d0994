// Calls to the gateway's own /v1 routes with the caller's key (asked once, kept for this tab).

const KEY = "lychee.console.key";

export class AuthRequired extends Error {}

export class ApiError extends Error {
  constructor(status, problem) {
    super((problem && (problem.detail || problem.title)) || `HTTP ${status}`);
    this.status = status;
  }
}

export const hasKey = () => Boolean(sessionStorage.getItem(KEY));
export const setKey = (key) => sessionStorage.setItem(KEY, key);
export const clearKey = () => sessionStorage.removeItem(KEY);

export async function api(path, { method = "GET", body } = {}) {
  const headers = { Accept: "application/json" };
  const key = sessionStorage.getItem(KEY);
  if (key) headers.Authorization = `Bearer ${key}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(`v1/${path}`, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    cache: "no-store",
    credentials: "omit",
  });
  let data = null;
  try {
    data = await response.json();
  } catch {
    data = null;
  }
  if (response.status === 401) {
    clearKey();
    throw new AuthRequired((data && data.detail) || "an API key is required");
  }
  if (!response.ok) throw new ApiError(response.status, data);
  return data;
}

// `namespaces/<ns>/...`, each name encoded
export function nsPath(namespace, ...rest) {
  return ["namespaces", namespace, ...rest].map(encodeURIComponent).join("/");
}
