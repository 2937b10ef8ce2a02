// epg-orchestrate view: the index, a Run and a suite, drawn from the server's JSON and drawn again when its
// server-sent events say the records changed. Every text from the records goes through textContent (el() below):
// nothing here parses text as HTML, so no record can add markup or script to the page.
"use strict";

(function () {
  const main = document.getElementById("main");
  const live = document.getElementById("live");
  const state = { sortKey: "started", sortUp: false, filter: "", status: "", open: new Set(), closed: new Set() };

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === undefined || value === null) continue;
      if (key === "text") node.textContent = String(value);
      else if (key === "className") node.className = value;
      else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else node.setAttribute(key, String(value));
    }
    for (const child of children) if (child !== null && child !== undefined) node.append(child);
    return node;
  }
  const svgNS = "http://www.w3.org/2000/svg";
  function svg(tag, attrs, text) {
    const node = document.createElementNS(svgNS, tag);
    for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, String(value));
    if (text !== undefined) node.textContent = String(text);
    return node;
  }
  function num(value) {
    if (value === null || value === undefined || value === "") return "-";
    if (typeof value !== "number") return String(value);
    return Number.isInteger(value) ? String(value) : value.toPrecision(5).replace(/\.?0+$/, "");
  }
  function duration(seconds) {
    if (seconds === null || seconds === undefined) return "-";
    const s = Math.round(seconds);
    return s >= 3600 ? `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min` : s >= 60 ? `${Math.floor(s / 60)} min ${s % 60} s` : `${s} s`;
  }
  function when(time) {
    return typeof time === "number" ? new Date(time * 1000).toISOString().replace("T", " ").slice(0, 19) : "-";
  }
  function link(kind, path, text) {
    return el("a", { href: `/${kind}?path=${encodeURIComponent(path)}`, text: text });
  }
  function table(head, rows, attrs) {
    return el("table", attrs || {}, el("tr", {}, ...head.map((h) => (h instanceof Node ? h : el("th", { text: h })))), ...rows);
  }
  function td(value, className) {
    return value instanceof Node ? el("td", { className: className }, value) : el("td", { text: value, className: className });
  }

  async function fetchJSON(url) {
    const response = await fetch(url, { credentials: "same-origin", cache: "no-store" });
    const body = await response.json();
    if (!response.ok) throw new Error(body.error || response.statusText);
    return body;
  }

  // The page ------------------------------------------------------------------------------------------------------
  const params = new URLSearchParams(window.location.search);
  const route = window.location.pathname;
  const path = params.get("path") || ".";
  const what = route === "/run" ? "run" : route === "/suite" ? "suite" : "index";
  const renderers = { index: renderIndex, run: renderRun, suite: renderSuite };
  let drawing = false;
  let pending = false;

  async function refresh() {
    if (drawing) { pending = true; return; }
    drawing = true;
    try {
      const data = await fetchJSON(`/api/${what}?path=${encodeURIComponent(path)}`);
      const scroll = window.scrollY;
      const focused = document.activeElement && document.activeElement.id;  // the filter being typed in keeps its focus
      const caret = focused === "filter" ? document.activeElement.selectionStart : null;
      main.replaceChildren(...renderers[what](data));
      window.scrollTo(0, scroll);
      const again = focused && document.getElementById(focused);
      if (again) {
        again.focus();
        if (caret !== null) again.setSelectionRange(caret, caret);
      }
    } catch (error) {
      main.replaceChildren(el("p", { className: "problem", text: String(error.message || error) }));
    } finally {
      drawing = false;
      if (pending) { pending = false; refresh(); }
    }
  }

  function connect() {
    const source = new EventSource(`/api/watch?what=${what}&path=${encodeURIComponent(path)}`);
    source.addEventListener("open", () => { live.textContent = "live"; live.className = "live on"; });
    source.addEventListener("error", () => { live.textContent = "reconnecting"; live.className = "live"; });
    source.addEventListener("change", () => refresh());
  }

  // The index -----------------------------------------------------------------------------------------------------
  let indexData = null;
  function renderIndex(data) {
    indexData = data;
    const columns = [
      ["kind", "kind"], ["name", "Run or suite"], ["benchmark", "Benchmark"], ["agent", "agent"], ["phase", "phase"],
      ["episodes_left", "budget left"], ["submissions", "Submissions"], ["best_score", "best score"],
      ["assessment_score", "Assessment score"], ["started", "started"], ["seconds", "duration"], ["status", "status"],
    ];
    const filter = el("input", { type: "search", placeholder: "filter: name, Benchmark, agent", value: state.filter, id: "filter" });
    filter.addEventListener("input", () => { state.filter = filter.value; drawRows(); });
    const status = el("select", { id: "status-filter" }, ...["", "running", "finished", "pending", "unreadable"].map(
      (s) => el("option", { value: s, text: s || "every status" })));
    status.value = state.status;
    status.addEventListener("change", () => { state.status = status.value; drawRows(); });
    const head = columns.map(([key, label]) => el("th", {
      className: "sortable", text: label + (state.sortKey === key ? (state.sortUp ? " \u25b2" : " \u25bc") : ""),
      onclick: () => { state.sortUp = state.sortKey === key ? !state.sortUp : true; state.sortKey = key; main.replaceChildren(...renderIndex(indexData)); },
    }));
    const body = el("tbody", { id: "index-rows" });
    const out = [el("h1", { text: `Runs and suites in ${data.root}` }), el("div", { className: "controls" }, filter, status),
      el("table", { id: "index" }, el("thead", {}, el("tr", {}, ...head)), body)];
    for (const problem of data.problems) out.push(el("p", { className: "problem", text: problem }));
    function drawRows() {
      const needle = state.filter.toLowerCase();
      const rows = data.rows.filter((row) => (!state.status || row.status === state.status) &&
        (!needle || [row.path, row.name, row.benchmark, row.agent].some((t) => String(t).toLowerCase().includes(needle))));
      rows.sort((a, b) => compare(a[state.sortKey], b[state.sortKey]) * (state.sortUp ? 1 : -1));
      body.replaceChildren(...rows.map((row) => el("tr", { "data-path": row.path, className: `row-${row.kind}` },
        td(row.kind), td(link(row.kind, row.path, row.path)), td(row.benchmark), td(row.agent), td(row.phase || "-"),
        td(row.episodes_left === null ? "-" : `${row.episodes_left} of ${row.budget_episodes}`, "num"),
        td(row.kind === "suite" ? `${row.done} of ${row.runs} Runs done` : num(row.submissions), "num"),
        td(num(row.best_score), "num"), td(num(row.assessment_score), "num"), td(when(row.started)), td(duration(row.seconds), "num"),
        el("td", { className: `status status-${row.status}`, text: row.status, title: row.problem || row.terminal_reason || "" }))));
      if (!rows.length) body.append(el("tr", {}, el("td", { colspan: columns.length, className: "muted", text: "No Run or suite here yet." })));
    }
    drawRows();
    return out;
  }
  function compare(a, b) {
    if (a === b) return 0;
    if (a === null || a === undefined || a === "") return -1;
    if (b === null || b === undefined || b === "") return 1;
    return typeof a === "number" && typeof b === "number" ? a - b : String(a).localeCompare(String(b));
  }

  // A Run ---------------------------------------------------------------------------------------------------------
  function renderRun(data) {
    const row = data.row;
    const out = [el("h1", { text: `Run ${row.path === "." ? row.name : row.path}` })];
    out.push(el("div", { className: "gauges" }, phaseGauge(row.phase), budgetGauge("Episodes", row.episodes_spent, row.budget_episodes),
      budgetGauge("Submissions", row.submissions, row.max_submissions)));
    out.push(table(["Benchmark", "agent", "status", "primary metric", "best score", "Assessment score", "selected", "terminal reason", "started", "duration"],
      [el("tr", {}, td(row.benchmark), td(row.agent), el("td", { id: "run-status", className: `status-${row.status}`, text: row.status }),
        td(`${data.primary_metric} (${data.direction})`), td(num(row.best_score), "num"), td(num(row.assessment_score), "num"),
        td(data.selected || "-"), td(row.terminal_reason || "-"), td(when(row.started)), td(duration(row.seconds), "num"))], { id: "run-summary" }));
    for (const problem of data.problems) out.push(el("p", { className: "problem", text: problem }));
    out.push(el("h2", { text: "Scores against Episodes spent" }), plot(data.curve, row.budget_episodes, data.direction));
    out.push(el("h2", { text: `Submissions (${data.submissions.length})` }));
    out.push(table(["id", "selector", "Episodes", "score", "best so far", "failure codes"], data.submissions.map((s) => el("tr", { className: "submission-row", "data-id": s.id,
      title: "open its panel", onclick: () => openPanel(s.id) },
      td(s.id), td(s.selector), td(num(s.episodes_count), "num"), td(num(s.score), "num"), td(num(s.best), "num"),
      td(s.error ? `unreadable: ${s.error}` : Object.entries(s.failure_codes).map(([k, v]) => `${k} ${v}`).join(", ") || "none"))), { id: "submissions" }));
    const latest = data.submissions.length ? data.submissions[data.submissions.length - 1].id : null;
    for (const submission of data.submissions) out.push(submissionDetails(submission, row.path, submission.id === latest));
    if (data.validation) out.push(...validation(data.validation));
    if (data.assessment) out.push(...assessment(data.assessment));
    out.push(...conversation(data.exchanges));
    out.push(el("h2", { text: "Event log (latest)" }), table(["time", "event", "fields"],
      data.events.slice().reverse().slice(0, 60).map((e) => el("tr", {}, td(when(e.time)), td(e.type), td(e.fields))), { id: "events" }));
    return out;
  }
  function openPanel(id) {
    const panel = Array.from(document.querySelectorAll("details.submission")).find((d) => d.dataset.id === id);
    if (panel) { panel.open = true; panel.scrollIntoView({ block: "start" }); }
  }
  function phaseGauge(phase) {
    const phases = ["agent", "validation", "assessment", "done"];
    const at = phases.indexOf(phase);
    return el("div", {}, el("div", { className: "gauge-label", text: "phase" }), el("div", { className: "steps", id: "phase-gauge" },
      ...phases.map((p, i) => el("span", { className: `step ${i < at ? "past" : i === at ? "current" : ""}`, text: p === "done" ? "finished" : p }))));
  }
  function budgetGauge(label, used, total) {
    const share = total ? Math.min(1, used / total) : 0;
    const fill = el("div", {});
    fill.style.width = `${Math.round(share * 100)}%`;  // through the CSSOM: the CSP allows no style attribute
    return el("div", { className: "budget-gauge" }, el("div", { className: "gauge-label", text: `${label}: ${used} of ${total ?? "?"} spent` }),
      el("div", { className: "bar" }, fill));
  }
  function plot(curve, budget, direction) {
    const width = 720, height = 260, left = 56, right = 16, top = 14, bottom = 34;
    const box = svg("svg", { class: "plot", width, height, viewBox: `0 0 ${width} ${height}`, id: "score-plot", role: "img" });
    const scored = curve.filter((p) => p.score !== null);
    if (!scored.length) {
      box.append(svg("text", { x: left, y: height / 2 }, "No scored Submission yet."));
      return box;
    }
    const xs = Math.max(budget || 0, ...curve.map((p) => p.spent), 1);
    const values = scored.flatMap((p) => [p.score, p.best]).filter((v) => v !== null);
    let low = Math.min(...values), high = Math.max(...values);
    if (low === high) { low -= 1; high += 1; }
    const x = (v) => left + (v / xs) * (width - left - right);
    const y = (v) => top + (1 - (v - low) / (high - low)) * (height - top - bottom);
    box.append(svg("line", { class: "axis", x1: left, y1: height - bottom, x2: width - right, y2: height - bottom }),
      svg("line", { class: "axis", x1: left, y1: top, x2: left, y2: height - bottom }),
      svg("text", { x: left, y: height - 8 }, "0"), svg("text", { x: width - right - 30, y: height - 8 }, String(xs)),
      svg("text", { x: (width - 120) / 2, y: height - 8 }, "Episodes spent"),
      svg("text", { x: 4, y: top + 10 }, num(high)), svg("text", { x: 4, y: height - bottom }, num(low)));
    let d = "";
    let previous = null;
    for (const p of curve) {
      if (p.best === null) continue;
      d += previous === null ? `M ${x(p.spent)} ${y(p.best)}` : ` H ${x(p.spent)} V ${y(p.best)}`;
      previous = p;
    }
    if (d) box.append(svg("path", { class: "best", d }));
    for (const p of scored) {
      const dot = svg("circle", { class: "score", cx: x(p.spent), cy: y(p.score), r: 5 });
      dot.append(svg("title", {}, `${p.id}: score ${num(p.score)}, best so far ${num(p.best)} after ${p.spent} Episodes`));
      box.append(dot);
    }
    return el("figure", { className: "plot" }, box,
      el("figcaption", { className: "muted", text: `Dots: each Submission's score (hover for its numbers); line: the best so far (${direction}).` }));
  }
  function submissionDetails(s, runPath, isLatest) {
    const details = el("details", { className: "submission", "data-id": s.id });
    // Open: the ones opened before, and the latest unless it was closed; drawing again keeps what the reader chose.
    if (state.open.has(s.id) || (isLatest && !state.closed.has(s.id))) details.open = true;
    details.addEventListener("toggle", () => {
      if (details.open) { state.open.add(s.id); state.closed.delete(s.id); } else { state.open.delete(s.id); state.closed.add(s.id); }
    });
    details.append(el("summary", { text: `${s.id}: selector ${s.selector}, score ${num(s.score)}` }));
    if (s.error) details.append(el("p", { className: "problem", text: `unreadable record: ${s.error}` }));
    details.append(el("div", { className: "muted", text: `Program ${s.program_digest}` }));
    details.append(el("h3", { text: "Program change against the one before" }));
    details.append(diffView(s.diff));
    details.append(el("h3", { text: `Episodes (${s.episodes.length}${s.episodes_left_out ? `, ${s.episodes_left_out} more not shown` : ""})` }));
    details.append(episodesTable(s.episodes));
    if (s.artifacts.length) {
      details.append(el("h3", { text: "Artifacts" }));
      const list = el("ul", { className: "artifacts" });
      for (const a of s.artifacts) {
        const item = el("li", {}, el("span", { className: "artifact-name", text: a.shown_name }),
          el("span", { className: "muted", text: ` ${a.media_type || ""} ${a.bytes ?? ""} bytes${a.evicted ? " (evicted)" : ""}` }));
        if (a.image) {
          item.append(el("img", { className: "artifact-image", alt: a.shown_name,
            src: `/api/image?path=${encodeURIComponent(runPath)}&submission=${encodeURIComponent(s.id)}&name=${encodeURIComponent(a.name)}` }));
        }
        list.append(item);
      }
      details.append(list);
    }
    if (s.values) details.append(el("h3", { text: "Feedback values" }), el("pre", { className: "values", text: s.values }));
    return details;
  }
  function episodesTable(episodes) {
    return table(["index", "status", "failure", "steps", "reward", "policy s", "reason", "policy output", "traceback"], episodes.map((e) => el("tr", { className: "episode" },
      td(num(e.index), "num"), td(e.status), td(e.failure || ""), td(num(e.steps), "num"), td(num(e.reward), "num"), td(num(e.policy_seconds), "num"),
      td(e.reason || ""), td(e.output_tail ? el("pre", { className: "output-tail", text: e.output_tail }) : ""),
      td(e.traceback ? el("pre", { text: e.traceback }) : ""))), { className: "episodes" });
  }
  function diffView(diff) {
    if (!diff) return el("p", { className: "muted", text: "No diff: a Program could not be read." });
    if (diff.same || !diff.files.length) return el("p", { className: "muted", text: "The same Program as the one before." });
    const out = el("div", { className: "diff" });
    for (const f of diff.files) {
      out.append(el("div", { className: "diff-file", text: `${f.path}: +${f.lines_added} -${f.lines_removed}${f.added ? " (new)" : ""}${f.removed ? " (removed)" : ""}${f.summarised ? " (too large to diff: lines counted)" : ""}${f.text ? "" : " (binary)"}` }));
      if (f.lines.length) {
        const pre = el("pre", { className: "diff-lines" });
        for (const line of f.lines) {
          const kind = line.startsWith("+") && !line.startsWith("+++") ? "add" : line.startsWith("-") && !line.startsWith("---") ? "del" : line.startsWith("@@") ? "hunk" : "";
          pre.append(el("span", { className: kind, text: line + "\n" }));
        }
        if (f.lines_left_out > 0) pre.append(el("span", { className: "muted", text: `[${f.lines_left_out} more lines]` }));
        out.append(pre);
      }
    }
    return out;
  }
  function validation(v) {
    return [el("h2", { text: "Validation" }), el("p", { text: `rule ${v.rule || "-"}, ${v.episodes ?? "?"} Episodes each, selected ${v.selected || "none"}` }),
      table(["candidate", "Validation score", "policy failures"], v.results.map((r) => el("tr", { className: r.submission_id === v.selected ? "cell-best" : "" },
        td(r.submission_id), td(num(r.score), "num"), td(num(r.policy_failures), "num"))), { id: "validation" })];
  }
  function assessment(a) {
    return [el("h2", { text: "Assessment" }), el("p", { id: "assessment-score", text: `${a.submission_id || "the selected Program"}: score ${num(a.score)}` +
      (a.initial_program_score !== null ? `; the starting Program on the same Episodes: ${num(a.initial_program_score)}` : "") }),
      episodesTable(a.episodes)];
  }
  function conversation(exchanges) {
    const out = [el("h2", { text: `Model exchanges (${exchanges.items.length}${exchanges.total > exchanges.items.length ? ` latest of ${exchanges.total}` : ""})` })];
    if (exchanges.problem) out.push(el("p", { className: "problem", text: exchanges.problem }));
    if (!exchanges.items.length) out.push(el("p", { className: "muted", text: "No model exchange recorded (the agent used no model, or not yet)." }));
    const list = el("div", { id: "exchanges" });
    for (const x of exchanges.items) {
      const box = el("div", { className: "exchange" });
      box.append(el("div", { className: "meta", text: `#${x.seq} (attempt ${x.attempt}) ${when(x.time)} ${x.method} ${x.path} \u2192 ${x.status ?? "-"}, ` +
        `${num(x.seconds)} s, ${num(x.tokens)} tokens, ${x.request_bytes} bytes sent, ${x.response_bytes} received` }));
      if (x.refused) box.append(el("div", { className: "problem", text: `refused: ${x.refused}` }));
      if (x.error) box.append(el("div", { className: "problem", text: `error: ${x.error}` }));
      if (x.omitted) box.append(el("div", { className: "muted", text: `omitted: ${x.omitted}` }));
      for (const m of x.messages) box.append(el("div", { className: "role", text: m.role }), el("pre", { className: "message", text: m.text }));
      for (const r of x.reply) {
        box.append(el("div", { className: `role ${r.kind === "tool_call" ? "tool" : ""}`, text: r.kind === "tool_call" ? `reply: call ${r.name}` : "reply" }),
          el("pre", { className: "reply", text: r.text }));
      }
      list.append(box);
    }
    out.push(list);
    return out;
  }

  // A suite -------------------------------------------------------------------------------------------------------
  function renderSuite(data) {
    const out = [el("h1", { text: `Suite ${data.name || data.path}` })];
    if (!data.complete) out.push(el("p", { className: "muted", id: "suite-provisional", text: `Provisional: ${data.runs.filter((r) => !r.complete).length} of ${data.runs.length} Runs have not finished.` }));
    for (const note of data.notes) out.push(el("p", { className: "problem", text: note }));
    out.push(el("h2", { text: "Aggregate rank score" }), table(["place", "agent", "rank score", "wins", "top 2", "Benchmarks"],
      data.standings.map((s) => el("tr", { className: "standing" }, td(num(s.position), "num"), td(s.agent), td(num(s.rank_score), "num"),
        td(num(s.wins), "num"), td(num(s.top2), "num"), td(num(s.benchmarks), "num"))), { id: "standings" }));
    out.push(el("h2", { text: "Held-out scores (mean over repeats; rank)" }));
    const rows = data.benchmarks.map((b) => el("tr", {}, td(`${b.id} (${b.direction})`), ...data.agents.map((agent) => {
      const cell = data.table.find((c) => c.benchmark === b.id && c.agent === agent);
      if (!cell) return td("-");
      const box = el("td", { className: cell.rank === 1 && cell.score !== null ? "cell-best num" : "num" },
        el("div", { text: `${num(cell.score)}${cell.score !== null ? ` (rank ${cell.rank})` : ""}` }));
      for (const run of cell.runs) box.append(el("div", {}, link("run", run.path, run.name), el("span", { className: "muted", text: ` ${run.phase}` })));
      return box;
    })));
    out.push(table(["Benchmark", ...data.agents], rows, { id: "suite-table" }));
    out.push(el("h2", { text: "Runs" }), table(["Run", "Benchmark", "agent", "repeat", "phase", "held-out score", "records"],
      data.runs.map((r) => el("tr", {}, td(link("run", r.path, r.name)), td(r.benchmark), td(r.agent), td(num(r.repeat), "num"), td(r.phase),
        td(num(r.score), "num"), td(r.complete ? "complete" : r.problems.join("; ")))), { id: "suite-runs" }));
    return out;
  }

  refresh();
  connect();
})();
