// jobq's dashboard: a small single-page app on the public API, in plain ES modules.
// Every value from the API reaches the page as text (textContent), never as HTML.
// The API key lives in sessionStorage only: never in a URL, a cookie or a log.

const KEY = "jobq.apiKey";
const REFRESH_MS = 2000; // polling, while the event stream is down
const EVENT_REFRESH_MS = 300; // while events stream in: at most one refresh this often
const STREAM_RETRY_MS = 5000; // a dropped event stream is opened again after this
const view = document.getElementById("view");
const statusBar = document.getElementById("status");
let canAct = false;
let refusal = null; // why the last key given cannot be used, shown until another is
let timer = null;

// ---- talking to the API ------------------------------------------------------------------

class ApiError extends Error {
  constructor(status, problem) {
    super(problem.detail || problem.title || `HTTP ${status}`);
    this.status = status;
    this.problem = problem;
  }
}

async function api(method, path, body) {
  const headers = { Accept: "application/json" };
  const key = sessionStorage.getItem(KEY);
  if (key) headers.Authorization = `Bearer ${key}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, {
    method, headers, body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (response.status === 204) return null;
  const data = await response.json().catch(() => ({}));
  if (!response.ok) throw new ApiError(response.status, data);
  return data;
}

// ---- building the page ---------------------------------------------------------------------

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat(Infinity)) { // a cell may hold lists of [", ", link]
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function svg(tag, attrs = {}, ...children) {
  const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [name, value] of Object.entries(attrs)) node.setAttribute(name, String(value));
  for (const child of children) node.append(child);
  return node;
}

const fmt = (n) => (n === null || n === undefined ? "–" : Number(n).toLocaleString("en"));
const link = (href, text) => el("a", { href }, text);
const state = (s) => el("span", { class: `badge state-${s}` }, s);
const queueHref = (q) => `#/queue/${encodeURIComponent(q)}`;
const jobHref = (id) => `#/job/${id}`;

function ago(iso) {
  if (!iso) return "–";
  const seconds = (Date.now() - Date.parse(iso)) / 1000;
  const abs = Math.abs(seconds);
  const text = abs < 60 ? `${abs.toFixed(0)}s` : abs < 3600 ? `${(abs / 60).toFixed(0)}m`
    : abs < 172800 ? `${(abs / 3600).toFixed(1)}h` : `${(abs / 86400).toFixed(0)}d`;
  return seconds >= 0 ? `${text} ago` : `in ${text}`;
}

function duration(seconds) {
  if (seconds === null || seconds === undefined) return "–";
  return seconds < 1 ? `${(seconds * 1000).toFixed(0)}ms`
    : seconds < 60 ? `${seconds.toFixed(1)}s` : `${(seconds / 60).toFixed(1)}m`;
}

// `narrow`: the columns a phone-sized screen leaves out
function table(headers, rows, numeric = [], narrow = []) {
  const cls = (i) => [numeric.includes(i) ? "num" : "", narrow.includes(i) ? "hide-narrow" : ""]
    .join(" ").trim() || null;
  return el("div", { class: "scroll" }, el("table", {},
    el("thead", {}, el("tr", {}, headers.map((h, i) => el("th", { class: cls(i) }, h)))),
    el("tbody", {}, rows.map((cells) => el("tr", {}, cells.map((c, i) =>
      el("td", { class: cls(i) }, c)))))));
}

function kv(rows) {
  return el("div", { class: "scroll" }, el("table", { class: "kv" }, el("tbody", {},
    rows.map(([name, value]) => el("tr", {}, el("th", {}, name), el("td", {}, value))))));
}

const MAX_SHOWN = 4000; // characters of a payload or result shown before folding

function json(value) {
  const text = JSON.stringify(value, null, 2) ?? "null";
  if (text.length <= MAX_SHOWN) return el("pre", {}, text);
  return el("details", {}, el("summary", {}, `${fmt(text.length)} characters: show all`),
    el("pre", {}, text));
}

let keepStatus = false; // the next page was opened by an action: its outcome stays shown

// Open `hash` after an action, keeping the action's outcome in the status line.
function goKeepingStatus(hash) {
  if (location.hash === hash) render();
  else { keepStatus = true; location.hash = hash; }
}

function say(message, error = false) {
  statusBar.hidden = !message;
  statusBar.className = error ? "error" : "";
  statusBar.textContent = message || "";
}

// An action: confirmed when destructive, its answer (or the API's refusal) shown.
// Whether the API did it; `then` runs only if it did, instead of showing the page again.
async function act(label, method, path, body, { confirm: question, then } = {}) {
  if (question && !window.confirm(question)) return false;
  try {
    const answer = await api(method, path, body);
    say(`${label}: done${answer && answer.state ? ` (now ${answer.state})` : ""}`);
  } catch (error) {
    say(`${label}: ${error.status} ${error.problem?.code || ""}: ${error.message}`, true);
    await render();
    return false;
  }
  if (then) then(); else await render();
  return true;
}

function button(label, onclick, danger = false) {
  return canAct ? el("button", { class: danger ? "danger" : null, onclick }, label) : null;
}

// ---- charts ----------------------------------------------------------------------------------

// The queue chart's ranges: minutes asked of the series (its step grows with the range)
const RANGES = { hour: 60, day: 1440, week: 10080 };

function per(step) {
  return step === 1 ? "min" : step % 60 === 0 ? `${step / 60} h` : `${step} min`;
}

function chart(minutes, backlogNow, step = 1, range = "hour") {
  const w = 360, h = 100;
  const enq = minutes.map((m) => m.enqueued);
  const done = minutes.map((m) => m.succeeded + m.failed);
  const failed = minutes.map((m) => m.failed);
  // the backlog a minute ago was what it is now, less what came since, plus what left
  const backlog = new Array(minutes.length).fill(0);
  let level = backlogNow;
  for (let i = minutes.length - 1; i >= 0; i--) {
    backlog[i] = Math.max(level, 0);
    level = level - enq[i] + done[i];
  }
  const top = Math.max(1, ...enq, ...done);
  const topBacklog = Math.max(1, ...backlog);
  const line = (values, max, color) => svg("polyline", {
    fill: "none", stroke: color, "stroke-width": 1.5,
    points: values.map((v, i) => `${(i / Math.max(values.length - 1, 1)) * w},${h - (v / max) * (h - 6) - 3}`).join(" "),
  });
  return el("div", {},
    svg("svg", { class: "chart", viewBox: `0 0 ${w} ${h}`, preserveAspectRatio: "none",
      role: "img", "aria-label": `throughput and backlog over the last ${range}` },
    line(backlog, topBacklog, "#9a6700"), line(enq, top, "#8250df"),
    line(done, top, "#1a7f37"), line(failed, top, "#cf222e")),
    el("div", { class: "legend muted" },
      el("span", { class: "enq" }, `■ enqueued/${per(step)} (max ${fmt(Math.max(...enq))})`),
      el("span", { class: "done" }, `■ finished/${per(step)}`),
      el("span", { class: "fail" }, `■ failed/${per(step)}`),
      el("span", { class: "backlog" }, `■ backlog (max ${fmt(topBacklog)})`)));
}

// ---- pages -----------------------------------------------------------------------------------

const SPARKLINES = 20; // queues charted on the overview (each costs a call per refresh)

function spark(minutes) {
  const w = 120, h = 24;
  const top = Math.max(1, ...minutes.map((m) => Math.max(m.enqueued, m.succeeded + m.failed)));
  const line = (values, color) => svg("polyline", {
    fill: "none", stroke: color, "stroke-width": 1.2,
    points: values.map((v, i) => `${(i / Math.max(values.length - 1, 1)) * w},${h - (v / top) * (h - 2) - 1}`).join(" "),
  });
  return svg("svg", { class: "spark", viewBox: `0 0 ${w} ${h}`, preserveAspectRatio: "none",
    role: "img", "aria-label": "jobs in and out per minute, last hour" },
  line(minutes.map((m) => m.enqueued), "#8250df"),
  line(minutes.map((m) => m.succeeded + m.failed), "#1a7f37"));
}

async function queuesPage() {
  const data = await api("GET", "/v1/queues");
  const charted = data.queues.slice(0, SPARKLINES);
  const series = await Promise.all(charted.map((q) =>
    api("GET", `/v1/queues/${encodeURIComponent(q.queue)}/series?minutes=60`)));
  const sparks = new Map(series.map((s) => [s.queue, spark(s.minutes)]));
  const rows = data.queues.map((q) => [
    link(queueHref(q.queue), q.queue), sparks.get(q.queue) || "",
    q.paused ? el("span", { class: "badge" }, "paused") : "active",
    fmt(q.counts.due), fmt(q.counts.queued - q.counts.due), fmt(q.counts.running),
    fmt(q.counts.waiting), fmt(q.counts.failed), fmt(q.last_hour.succeeded),
    duration(q.oldest_due_age_seconds),
    pair(fmt(q.last_minute.enqueued), fmt(q.last_minute.succeeded + q.last_minute.failed)),
    pair(duration(q.last_hour.wait_seconds.p50), duration(q.last_hour.wait_seconds.p95)),
    pair(duration(q.last_hour.run_seconds.p50), duration(q.last_hour.run_seconds.p95)),
    limitsLines(q.limits),
  ]);
  const db = data.database;
  return [
    el("h1", {}, "Queues"),
    rows.length ? table(["queue", "last hour", "state", "due", "scheduled", "running", "waiting",
      "failed", "succeeded 1h", "oldest due", "in/out per min", "wait p50/p95", "run p50/p95",
      "limits"], rows, [3, 4, 5, 6, 7, 8], [1, 4, 6, 8, 10, 11, 12, 13])
      : el("p", { class: "muted" }, "No queues yet: enqueue a job."),
    el("h2", {}, "Database"),
    el("div", { class: "cards" },
      card("dead tuples", fmt(db.jobs_dead_tuples)), card("live tuples", fmt(db.jobs_live_tuples)),
      card("last autovacuum", ago(db.jobs_last_autovacuum)),
      card("oldest transaction", duration(db.oldest_transaction_age_seconds)),
      card("reaper's last pass", ago(db.reaper_last_pass))),
  ];
}

const pair = (a, b) => el("span", { class: "nowrap" }, `${a} / ${b}`);
const card = (label, value) => el("div", { class: "card" }, el("b", {}, value), label);

// The limits in force, and the jobs they hold back: [limits, held back or null]
function limitsParts(limits) {
  const parts = [];
  if (limits.max_running !== null) parts.push(`max_running ${limits.max_running}`);
  if (limits.max_running_per_key !== null) parts.push(`per key ${limits.max_running_per_key}`);
  if (limits.rate_limit) parts.push(`rate ${limits.rate_limit.jobs}/${limits.rate_limit.per_seconds}s (${limits.rate_limit.used}\u00a0used)`);
  const held = Object.values(limits.throttled).reduce((a, b) => a + b, 0);
  return [parts, held ? `${fmt(held)} held back` : null];
}

function limitsText(limits) {
  if (!limits) return "–";
  const [parts, held] = limitsParts(limits);
  return `${parts.join(", ")}${held ? `; ${held}` : ""}`;
}

// In a table's cell: a limit a line, so the column stays narrow
function limitsLines(limits) {
  if (!limits) return "–";
  const [parts, held] = limitsParts(limits);
  return el("span", { class: "limits" }, parts.map((part) => el("span", {}, part)),
    held ? el("span", { class: "held" }, held) : null);
}

async function queuePage(queue, params) {
  const q = encodeURIComponent(queue);
  const range = RANGES[params.get("range")] ? params.get("range") : "hour";
  const [stats, series, groups] = await Promise.all([
    api("GET", `/v1/queues/${q}`), api("GET", `/v1/queues/${q}/series?minutes=${RANGES[range]}`),
    api("GET", `/v1/queues/${q}/failed/groups`),
  ]);
  const c = stats.counts;
  const FILTERS = ["state", "type", "error_type", "key_contains", "created_after", "created_before"];
  const filters = {};
  for (const name of FILTERS) filters[name] = params.get(name) || "";
  filters.after = params.get("after") || "0";
  const query = new URLSearchParams({ queue, limit: "50", after: filters.after });
  for (const name of FILTERS) {
    if (!filters[name]) continue;
    // a time picked in the browser is local: the API takes it with its offset
    query.set(name, name.startsWith("created_") ? new Date(filters[name]).toISOString() : filters[name]);
  }
  const page = await api("GET", `/v1/jobs?${query}`);
  const go = (changes) => {
    const next = new URLSearchParams({ ...filters, range, ...changes });
    if (next.get("range") === "hour") next.delete("range");
    for (const [k, v] of [...next]) if (!v || (k === "after" && v === "0")) next.delete(k);
    location.hash = `${queueHref(queue)}${next.toString() ? `?${next}` : ""}`;
  };
  const form = el("form", { class: "filters", onsubmit: (event) => {
    event.preventDefault();
    const data = new FormData(event.target);
    go({ state: data.get("state"), type: data.get("type").trim(),
      error_type: data.get("error_type").trim(), key_contains: data.get("key_contains").trim(),
      created_after: data.get("created_after"), created_before: data.get("created_before"),
      after: "0" });
  } },
  el("select", { name: "state", "aria-label": "state" },
    ["", "waiting", "queued", "running", "succeeded", "failed", "cancelled"].map((s) =>
      el("option", { value: s, selected: s === filters.state }, s || "any state"))),
  el("input", { name: "type", placeholder: "type", value: filters.type, "aria-label": "type" }),
  el("input", { name: "error_type", placeholder: "error type", value: filters.error_type,
    "aria-label": "error type" }),
  el("input", { name: "key_contains", placeholder: "text in idempotency key",
    value: filters.key_contains, "aria-label": "idempotency key contains" }),
  el("label", {}, "created from ", el("input", { name: "created_after", type: "datetime-local",
    value: filters.created_after, "aria-label": "created from" })),
  el("label", {}, "to ", el("input", { name: "created_before", type: "datetime-local",
    value: filters.created_before, "aria-label": "created before" })),
  el("button", { type: "submit" }, "Filter"));
  const backlog = c.queued + c.running + c.waiting;
  return [
    el("h1", {}, `Queue ${queue} `, stats.paused ? el("span", { class: "badge" }, "paused") : null),
    el("div", { class: "cards" }, card("due", fmt(c.due)), card("scheduled", fmt(c.queued - c.due)),
      card("running", fmt(c.running)), card("waiting", fmt(c.waiting)), card("failed", fmt(c.failed)),
      card("oldest due", duration(stats.oldest_due_age_seconds))),
    stats.limits ? el("p", {}, `Limits: ${limitsText(stats.limits)}`) : null,
    stats.push ? pushView(stats.push) : null,
    el("div", { class: "actions" },
      stats.paused ? button("Resume", () => act("resume", "POST", `/v1/queues/${q}/resume`, {}))
        : button("Pause", () => act("pause", "POST", `/v1/queues/${q}/pause`, {})),
      button("Purge queued jobs", () => act("purge", "POST", `/v1/queues/${q}/purge`,
        { confirm: queue }, { confirm: `Delete every queued job of ${queue}?` }), true),
      button("Redrive all failed", () => act("redrive", "POST", `/v1/queues/${q}/failed/retry`,
        {}, { confirm: `Run the failed jobs of ${queue} again?` }))),
    stats.fair_keys && stats.fair_keys.length ? [el("h2", {}, "Busiest fairness keys"),
      table(["key", "queued", "due", "running"], stats.fair_keys.map((k) => [
        k.fairness_key || "(none)", fmt(k.queued), fmt(k.due), fmt(k.running)]), [1, 2, 3])]
      : null,
    el("h2", {}, `Last ${range} `, ...Object.keys(RANGES).map((r) => r === range
      ? el("span", { class: "badge" }, r)
      : el("button", { class: "range", onclick: () => go({ range: r }) }, r))),
    chart(series.minutes, backlog, series.step_minutes, range),
    el("h2", {}, "Failed, by type and error"),
    groups.groups.length ? table(["type", "error type", "jobs", "latest message", "latest", ""],
      groups.groups.map((g) => [g.type, g.error_type || "–", fmt(g.jobs), g.latest_message || "",
        ago(g.latest_failed_at),
        button("Redrive", () => act("redrive", "POST", `/v1/queues/${q}/failed/retry`,
          { type: g.type, ...(g.error_type ? { error_type: g.error_type } : {}) },
          { confirm: `Run ${g.jobs} failed ${g.type} jobs (${g.error_type}) again?` }))]), [2])
      : el("p", { class: "muted" }, "No failed jobs."),
    el("h2", {}, "Jobs"), form,
    table(["id", "type", "state", "attempt", "run at", "updated", "error"], page.jobs.map((j) => [
      link(jobHref(j.id), String(j.id)), j.type, state(j.state), `${j.attempt}/${j.max_attempts}`,
      ago(j.run_at), ago(j.updated_at), j.last_error ? j.last_error.type : ""]), [0]),
    el("div", { class: "actions" },
      filters.after !== "0" ? el("button", { onclick: () => go({ after: "0" }) }, "First page") : null,
      page.next_after !== null ? el("button", { onclick: () => go({ after: String(page.next_after) }) },
        "Next page") : null),
  ];
}

// A pushed attempt's HTTP status, as the dispatcher recorded it in the error's details
// (`http_503`, say); a worker's attempt has none.
function httpStatus(a) {
  const status = a.error && a.error.details ? a.error.details.status : null;
  return status === null || status === undefined ? "–" : String(status);
}

// A pushed queue's deliveries, every replica's, by outcome class, and its breaker.
const PUSH_CLASSES = ["2xx", "202", "retry_later", "4xx", "5xx", "timeout", "connection",
  "refused", "too_large"];
function pushView(push) {
  const b = push.breaker;
  const windows = [["last minute", push.last_minute], ["last hour", push.last_hour]];
  return el("section", { class: "push", "aria-label": "push deliveries" },
    el("h2", {}, `Push deliveries to ${push.target_host} `,
      el("span", { class: "badge", "data-breaker": b.state }, `breaker ${b.state.replace("_", "-")}`
        + (b.state === "open" && b.open_until ? `, reopens ${ago(b.open_until)}` : ""))),
    table(["window", "deliveries", ...PUSH_CLASSES.map((c) => c.replace("_", " ")), "p50", "p95"],
      windows.map(([name, w]) => [name, fmt(w.deliveries),
        ...PUSH_CLASSES.map((c) => fmt(w.classes[c] || 0)),
        duration(w.latency_seconds.p50), duration(w.latency_seconds.p95)]),
      PUSH_CLASSES.map((_, i) => i + 2).concat([1])));
}

// Where workers put a stack trace in an error's details: Python's SDK sends `traceback`,
// JavaScript's errors carry `stack`.
const TRACE_KEYS = ["traceback", "stack"];

// An error as an operator reads it: its type and message, the stack trace as the lines it
// is, and whatever else the worker sent in its details as JSON.
function errorView(error) {
  let details = error.details ?? null;
  let trace = null;
  if (typeof details === "string" && details.includes("\n")) [trace, details] = [details, null];
  else if (details && typeof details === "object" && !Array.isArray(details)) {
    const key = TRACE_KEYS.find((name) => typeof details[name] === "string");
    if (key) {
      trace = details[key];
      const { [key]: _, ...rest } = details;
      details = Object.keys(rest).length ? rest : null;
    }
  }
  return el("div", { class: "last-error" },
    el("p", { class: "error-head" }, el("b", {}, error.type || "error"),
      error.message ? el("span", {}, error.message) : null),
    trace ? el("pre", { class: "traceback", "aria-label": "stack trace" }, trace.trimEnd()) : null,
    details !== null ? [el("h3", {}, "Details"), json(details)] : null);
}

// A job's uniqueness in one line: key, period (and its start), the states it holds it in.
function uniqueText(unique) {
  if (!unique) return "–";
  const period = unique.period ? `, one per ${unique.period} s from ${unique.since}` : "";
  return `${unique.key}${period}, while ${unique.states.join(" / ")}`;
}

// Why a job is not running (GET /v1/jobs/{id}/explain): each reason, the blocking ones
// marked, with when it ends and the parents it waits for.
function explainView(why) {
  if (!why.reasons.length) {
    return el("p", { class: "explain-none" }, why.leasable
      ? "Nothing holds it back: the next lease of its queue takes it." : "–");
  }
  return el("ul", { class: "explain", "aria-label": "reasons" }, why.reasons.map((r) =>
    el("li", { class: r.blocking ? "blocking" : "muted", "data-code": r.code },
      el("b", {}, r.code), " ", r.message,
      r.until ? ` (until ${r.until}, ${ago(r.until)})` : null,
      r.parents.length ? el("span", {}, ": ", r.parents.map((q, i) =>
        [i ? ", " : "", link(jobHref(q.id), String(q.id)), ` ${q.state}`])) : null)));
}

async function jobPage(id) {
  const [job, deps, why] = await Promise.all([
    api("GET", `/v1/jobs/${id}`), api("GET", `/v1/jobs/${id}/dependencies`),
    api("GET", `/v1/jobs/${id}/explain`)]);
  const p = job.progress;
  const bar = el("div", { class: "progress", role: "progressbar",
    "aria-valuenow": p && p.percent !== null ? p.percent : 0 }, el("span"));
  if (p && p.percent !== null) bar.firstChild.style.width = `${Math.min(100, p.percent)}%`;
  const related = (list) => list.length ? table(["id", "queue", "type", "state"],
    list.map((r) => [link(jobHref(r.id), String(r.id)), r.queue, r.type, state(r.state)])) : "–";
  return [
    el("h1", {}, `Job ${job.id} `, state(job.state)),
    el("div", { class: "actions" },
      ["waiting", "queued", "running"].includes(job.state)
        ? button("Cancel", () => act("cancel", "POST", `/v1/jobs/${id}/cancel`, {},
          { confirm: `Cancel job ${id}?` }), true) : null,
      ["failed", "cancelled"].includes(job.state)
        ? button("Retry", () => act("retry", "POST", `/v1/jobs/${id}/retry`, {})) : null,
      job.state !== "running" ? button("Delete", () => act("delete", "DELETE", `/v1/jobs/${id}`,
        undefined, { confirm: `Delete job ${id}?`,
          then: () => goKeepingStatus(queueHref(job.queue)) }), true) : null),
    kv([
      ["queue", link(queueHref(job.queue), job.queue)], ["type", job.type],
      ["attempt", `${job.attempt} of ${job.max_attempts}`], ["priority", String(job.priority)],
      ["run at", `${job.run_at} (${ago(job.run_at)})`], ["created", job.created_at],
      ["finished", job.finished_at || "–"], ["idempotency key", job.idempotency_key || "–"],
      ["concurrency key", job.concurrency_key || "–"],
      ["unique", uniqueText(job.unique)],
      ["lease", job.worker_id ? `${job.worker_id}, ends ${ago(job.lease_expires_at)}` : "–"],
      ["cancel requested", job.cancel_requested ? "yes" : "no"],
      ["timeout", job.timeout_seconds == null ? "none" : `${job.timeout_seconds} s an attempt`],
      ["start by", job.start_by ? `${job.start_by} (${ago(job.start_by)})` : "none"],
      ["snoozes", String(job.snoozes ?? 0)],
      // the trace id a collector finds the producer's trace by (traceparent's second field)
      ["trace", job.trace ? job.trace.traceparent.split("-")[1] : "none"],
    ]),
    el("h2", {}, "Why"), explainView(why),
    el("h2", {}, "Progress"),
    p ? el("div", {}, bar, `${p.percent ?? "–"}% ${p.stage || ""} ${p.message || ""} (${ago(p.updated_at)})`)
      : el("p", { class: "muted" }, "No progress reported."),
    el("h2", {}, "Payload"), json(job.payload),
    el("h2", {}, "Result"), json(job.result),
    job.last_error ? [el("h2", {}, "Last error"), errorView(job.last_error)] : null,
    el("h2", {}, "Attempts"),
    job.attempts.length ? table(["#", "worker", "started", "finished", "outcome", "HTTP", "error"],
      job.attempts.map((a) => [String(a.attempt), a.worker_id || "–", a.started_at || "–",
        a.finished_at, a.outcome, httpStatus(a),
        a.error ? `${a.error.type}: ${a.error.message || ""}` : ""]), [0])
      : el("p", { class: "muted" }, "None finished yet."),
    el("h2", {}, "Waits for"), related(deps.parents),
    el("h2", {}, "Waited for by"), related(deps.children),
  ];
}

// A worker's state: live or gone (unseen for JOBQ_WORKER_GONE_SECONDS), and quiet
function workerState(w) {
  return el("span", {}, el("span", { class: `badge state-${w.status}` }, w.status),
    w.quiet ? [" ", el("span", { class: "badge state-quiet", title: w.quieted_by
      ? `quieted by ${w.quieted_by} ${ago(w.quiet_at)}` : `quiet since ${ago(w.quiet_at)}` }, "quiet")]
      : null);
}

function workerActions(w) {
  const path = `/v1/workers/${encodeURIComponent(w.worker_id)}`;
  return w.quiet
    ? button("Resume", () => act(`resume ${w.worker_id}`, "POST", `${path}/resume`, {}))
    : w.status === "live" ? button("Quiet", () => act(`quiet ${w.worker_id}`, "POST", `${path}/quiet`, {},
      { confirm: `Quiet worker ${w.worker_id}? It finishes the jobs it holds, then leases no more.` }), true)
      : null;
}

async function workersPage() {
  const data = await api("GET", "/v1/workers");
  const headers = ["worker", "state", "sdk", "host", "queues", "types", "running", "per min",
    "last seen", "next lease end", ...(canAct ? [""] : []), "jobs"];
  return [
    el("h1", {}, "Workers"),
    data.workers.length ? table(headers,
      data.workers.map((w) => [w.worker_id, workerState(w),
        w.sdk ? `${w.sdk}${w.version ? ` ${w.version}` : ""}` : "–", w.host || "–",
        w.queues.join(", ") || "–", w.types.join(", ") || "any", fmt(w.running),
        w.finished_per_minute.toFixed(1), ago(w.last_seen), ago(w.next_expiry),
        ...(canAct ? [workerActions(w)] : []),
        el("span", {}, w.job_ids.map((id, i) => [i ? ", " : "", link(jobHref(id), String(id))]))]),
      [6, 7], [2, 3, 5, 9])
      : el("p", { class: "muted" }, "No worker seen lately."),
    data.next_after !== null ? el("p", { class: "muted" },
      `The first ${data.workers.length} workers by id; jobq workers list shows them all.`) : null,
  ];
}

async function schedulesPage() {
  const data = await api("GET", "/v1/schedules");
  return [
    el("h1", {}, "Schedules"),
    data.schedules.length ? table(["name", "cron", "queue", "type", "state", "next runs", "last jobs"],
      // an interval ticks on the epoch's multiples, whatever the zone
      data.schedules.map((s) => [s.name, s.cron.startsWith("@every") ? s.cron : `${s.cron} ${s.timezone}`, link(queueHref(s.queue), s.queue),
        s.type, s.paused ? "paused" : "active", s.next_runs.slice(0, 3).map(ago).join(", ") || "–",
        s.recent_runs.length ? el("span", {}, s.recent_runs.slice(0, 5).map((r, i) => [i ? ", " : "",
          r.job_id ? link(jobHref(r.job_id), `${r.job_id}`) : (r.refused || "–")])) : "–"]))
      : el("p", { class: "muted" }, "No schedules: PUT /v1/schedules/{name} makes one."),
    data.next_after !== null ? el("p", { class: "muted" },
      `The first ${data.schedules.length} schedules by name; jobq schedules list shows them all.`) : null,
  ];
}

const AUDIT_PAGE = 100; // entries a page of the audit log shows

// Who did which admin action when (GET /v1/audit, admin keys only), newest first, filtered
// by key and action; refused attempts (401, 403) stand out.
async function auditPage(params) {
  const filters = { key: params.get("key") || "", action: params.get("action") || "" };
  const before = params.get("before") || "";
  const query = new URLSearchParams({ limit: String(AUDIT_PAGE) });
  for (const [name, value] of Object.entries({ ...filters, before })) if (value) query.set(name, value);
  const go = (changes) => {
    const next = new URLSearchParams({ ...filters, before, ...changes });
    for (const [k, v] of [...next]) if (!v) next.delete(k);
    location.hash = `#/audit${next.toString() ? `?${next}` : ""}`;
  };
  const form = el("form", { class: "filters", onsubmit: (event) => {
    event.preventDefault();
    const data = new FormData(event.target);
    go({ key: data.get("key").trim(), action: data.get("action").trim(), before: "" });
  } },
  el("input", { name: "key", placeholder: "key name", value: filters.key, "aria-label": "key" }),
  el("input", { name: "action", placeholder: "action (purgeQueue)", value: filters.action,
    "aria-label": "action" }),
  el("button", { type: "submit" }, "Filter"));
  let page;
  try {
    page = await api("GET", `/v1/audit?${query}`);
  } catch (error) {
    if (error.status !== 403 && error.status !== 422) throw error;
    return [el("h1", {}, "Audit log"), form,
      el("p", { class: "refusal", role: "alert" }, error.status === 403
        ? `Only an admin key reads the audit log: ${error.message}` : error.message)];
  }
  const target = (e) => el("span", {}, [
    e.queue ? link(queueHref(e.queue), e.queue) : null,
    e.job_id !== null ? link(jobHref(e.job_id), `job ${e.job_id}`) : null,
    e.target].filter(Boolean).map((part, i) => [i ? " " : "", part]));
  const status = (s) => el("span", { class: s === 401 || s === 403 ? "badge refused"
    : s >= 400 ? "badge failed" : "badge" }, String(s));
  const detail = (d) => Object.keys(d).length ? el("code", {}, JSON.stringify(d)) : "–";
  return [
    el("h1", {}, "Audit log"), form,
    page.entries.length ? table(["when", "key", "action", "target", "status", "detail", "request id"],
      page.entries.map((e) => [el("span", { title: e.at }, ago(e.at)), e.key || "–", e.action,
        target(e), status(e.status), detail(e.detail), e.request_id]), [4], [5, 6])
      : el("p", { class: "muted" }, "No admin action recorded (with these filters)."),
    el("div", { class: "actions" },
      before ? el("button", { onclick: () => go({ before: "" }) }, "Newest") : null,
      page.next_before !== null
        ? el("button", { onclick: () => go({ before: String(page.next_before) }) }, "Older") : null),
  ];
}

// `refused`: the reason is why the key just given cannot be used, shown as an error
function signInPage(reason, refused = false) {
  return [
    el("h1", {}, "Sign in"),
    reason ? el("p", refused ? { class: "refusal", role: "alert" } : { class: "muted" }, reason)
      : null,
    el("form", { class: "signin", onsubmit: async (event) => {
      event.preventDefault();
      refusal = null;
      sessionStorage.setItem(KEY, new FormData(event.target).get("key").trim());
      say("");
      await start();
    } },
    el("label", {}, "API key (kept in this tab's session storage only)"),
    el("input", { name: "key", type: "password", autocomplete: "off", required: true,
      "aria-label": "API key" }),
    el("button", { type: "submit" }, "Sign in")),
  ];
}

// ---- routing and refresh ---------------------------------------------------------------------

let renders = 0; // renders started: only the latest may fill the view

// a refresh never replaces a form the user is filling in
const typing = () => document.activeElement && ["INPUT", "SELECT"].includes(document.activeElement.tagName);

async function render({ refresh = false } = {}) {
  const mine = ++renders;
  const [path, query] = location.hash.replace(/^#/, "").split("?");
  const params = new URLSearchParams(query || "");
  const parts = (path || "/").split("/").filter(Boolean).map(decodeURIComponent);
  let content;
  try {
    if (parts[0] === "queue" && parts[1]) content = await queuePage(parts[1], params);
    else if (parts[0] === "job" && /^\d+$/.test(parts[1] || "")) content = await jobPage(parts[1]);
    else if (parts[0] === "workers") content = await workersPage();
    else if (parts[0] === "schedules") content = await schedulesPage();
    else if (parts[0] === "audit") content = await auditPage(params);
    else content = await queuesPage();
  } catch (error) {
    if (error.status === 401) content = signedOut(error);
    else if (error.status === 404) content = [el("h1", {}, "Not found"), el("p", {}, error.message)];
    else content = [el("h1", {}, "Error"), el("p", {}, `${error.status || ""} ${error.message}`)];
  }
  if (mine !== renders) return; // a later navigation or action answered (or will)
  if (refresh && typing()) return; // the user started typing while this refresh was loading
  view.replaceChildren(...[content].flat(2).filter(Boolean));
}

// The sign-in page after a 401: the key given (if any) is forgotten, with the API's reason.
function signedOut(error) {
  if (sessionStorage.getItem(KEY) !== null) {
    refusal = `The service refused this key: ${error.message}`;
    sessionStorage.removeItem(KEY);
    showWho();
  }
  return refusal ? signInPage(refusal, true) : signInPage("This service needs an API key.");
}

// Why the dashboard cannot use the key GET /v1/keys just refused with `error`, or null if
// it can. Every page reads, so a key without the `read` scope (nor `admin`) would only
// ever see 403s: it is refused here, with the reason, rather than signed in.
async function unusable(error) {
  if (error.status !== 403) return null; // 401 and the rest: the page's call will say
  try {
    await api("GET", "/v1/queues");
    return null;
  } catch (readError) {
    if (readError.status !== 403) return null;
    return `This key cannot be used here: ${readError.message}. It is a key for producers or `
      + "workers; the dashboard needs a key with the read or admin scope.";
  }
}

function showWho() {
  const key = sessionStorage.getItem(KEY);
  document.getElementById("who").replaceChildren(
    key ? `signed in (${canAct ? "admin" : "read only"}) ` : canAct ? "open service " : "",
    key ? el("button", { onclick: () => { sessionStorage.removeItem(KEY); start(); } }, "Sign out") : "");
}

async function start() {
  try {
    await api("GET", "/v1/keys"); // admin keys (and an open service) may act
    canAct = true;
  } catch (error) {
    canAct = false;
    if (sessionStorage.getItem(KEY) !== null) refusal = await unusable(error);
  }
  if (refusal) sessionStorage.removeItem(KEY); // the sign-in page shows why, until the next
  showWho();
  follow(); // with this key
  await render();
}

window.addEventListener("hashchange", () => {
  if (!keepStatus) say(""); // a page the user opened starts with no old outcome shown
  keepStatus = false;
  render();
});
document.addEventListener("visibilitychange", () => {
  if (!document.hidden) render({ refresh: true });
});

// ---- live updates ------------------------------------------------------------------------
// The page follows GET /v1/events (Server-Sent Events, read with fetch so that the key
// goes in a header) and refreshes when something changed; while the stream is down it
// polls every REFRESH_MS instead, and opens the stream again.

let stream = null; // the AbortController of the event stream being followed
let soon = null; // the refresh an event asked for, not yet run

function refreshSoon() {
  if (soon !== null) return;
  soon = setTimeout(() => {
    soon = null;
    if (!document.hidden && !typing()) render({ refresh: true });
  }, EVENT_REFRESH_MS);
}

function polling(on) {
  document.body.dataset.live = on ? "polling" : "stream";
  if (on && timer === null) {
    timer = setInterval(() => {
      if (!document.hidden && !typing()) render({ refresh: true });
    }, REFRESH_MS);
  } else if (!on && timer !== null) {
    clearInterval(timer);
    timer = null;
  }
}

// Reads one stream until it ends; true once it was open (a refresh is then due).
async function readEvents(signal) {
  const headers = { Accept: "text/event-stream" };
  const key = sessionStorage.getItem(KEY);
  if (key) headers.Authorization = `Bearer ${key}`;
  const response = await fetch("/v1/events", { headers, signal });
  if (!response.ok || !response.body) return false;
  polling(false);
  refreshSoon(); // what changed while the stream was down
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return true;
    buffer += value.replaceAll("\r\n", "\n");
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const frame = buffer.slice(0, end).split("\n");
      buffer = buffer.slice(end + 2);
      if (frame.includes("event: error")) return true; // the server ends it: open another
      if (frame.some((line) => line.startsWith("data:"))) refreshSoon();
    }
  }
}

async function follow() {
  stream?.abort();
  const mine = new AbortController();
  stream = mine;
  while (!mine.signal.aborted) {
    try {
      await readEvents(mine.signal);
    } catch {
      if (mine.signal.aborted) return;
    }
    polling(true);
    await new Promise((resolve) => setTimeout(resolve, STREAM_RETRY_MS));
  }
}

polling(true);
start();
