// The status page's script. It polls the page's JSON once a second and
// draws the list of queries, or one query's charts as inline SVG.
//
// Each chart keeps its points in the DOM, for people (a tooltip per point)
// and for tests: every point, a circle or a bar segment, carries
// data-batch (the batch id) and data-value (the number drawn, as the JSON
// gave it; data-phase too in the duration chart); a batch without a value
// (no watermark yet) has no point. window.statusPage.charts holds what
// each chart was last drawn from, and window.statusPage.updates counts the
// updates drawn.
"use strict";

(() => {
  const POLL_MS = 1000;
  const SVG = "http://www.w3.org/2000/svg";
  const W = 600, H = 220;
  const PAD = { left: 60, right: 14, top: 14, bottom: 34 };
  const PHASE_COLORS = ["#8da0cb", "#66c2a5", "#fc8d62", "#e78ac3", "#a6d854", "#e5c494", "#b3b3b3"];

  const page = (window.statusPage = { charts: {}, updates: 0, data: null });

  // --- DOM helpers ---------------------------------------------------------

  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    for (const c of children) e.append(c);
    return e;
  }

  function svg(tag, attrs, text) {
    const e = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function tooltip(node, text) {
    node.append(svg("title", {}, text));
    return node;
  }

  function setText(id, text) {
    const e = document.getElementById(id);
    if (e) e.textContent = text;
  }

  function problem(text) {
    const p = document.getElementById("problem");
    p.hidden = !text;
    p.textContent = text || "";
  }

  // --- formatting ----------------------------------------------------------

  // trim drops a fixed number's trailing zeros: 2.50 -> 2.5, 3.0 -> 3.
  const trim = (s) => (s.includes(".") ? s.replace(/\.?0+$/, "") : s);

  function fmtNum(v) {
    if (v === null || v === undefined) return "–";
    const a = Math.abs(v);
    if (a >= 1e9) return trim((v / 1e9).toFixed(a >= 1e10 ? 0 : 1)) + "G";
    if (a >= 1e6) return trim((v / 1e6).toFixed(a >= 1e7 ? 0 : 1)) + "M";
    if (a >= 1e3) return trim((v / 1e3).toFixed(a >= 1e4 ? 0 : 1)) + "k";
    if (a >= 100 || Number.isInteger(v)) return String(Math.round(v));
    return trim(v.toPrecision(3));
  }

  function fmtMs(v) {
    if (v === null || v === undefined) return "–";
    const a = Math.abs(v);
    if (a >= 864e5) return trim((v / 864e5).toFixed(1)) + " d";
    if (a >= 36e5) return trim((v / 36e5).toFixed(1)) + " h";
    if (a >= 6e4) return trim((v / 6e4).toFixed(1)) + " min";
    if (a >= 1e3) return trim((v / 1e3).toFixed(2)) + " s";
    return Math.round(v) + " ms";
  }

  // fmtClock is a time of day, hh:mm:ss UTC, as fmtTime's.
  function fmtClock(s) {
    const t = new Date(s);
    return isNaN(t) ? "" : t.toISOString().slice(11, 19);
  }

  function fmtTime(s) {
    const d = new Date(s);
    if (isNaN(d)) return s;
    return d.toISOString().replace("T", " ").replace(/(\.\d+)?Z$/, " UTC");
  }

  // --- charts --------------------------------------------------------------

  // Round steps of a time axis, in milliseconds.
  const TIME_STEPS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1e3, 2e3, 5e3, 1e4, 15e3, 3e4, 6e4, 12e4, 3e5, 6e5, 9e5,
    18e5, 36e5, 72e5, 108e5, 216e5, 432e5, 864e5];

  // scale returns a y domain [lo, hi] holding 0 and every value, cut in
  // about four even steps of a round size: a round number, at least 1 for
  // a count, or a round time for milliseconds.
  function scale(values, kind) {
    let lo = Math.min(0, ...values), hi = Math.max(0, ...values);
    if (lo === hi) hi = 1;
    const raw = (hi - lo) / 4;
    const round = (r) => {
      const p = Math.pow(10, Math.floor(Math.log10(r)));
      return [1, 2, 2.5, 5, 10].map((m) => m * p).find((s) => s >= r);
    };
    let step;
    if (kind === "ms") {
      const day = TIME_STEPS[TIME_STEPS.length - 1];
      step = raw <= day ? TIME_STEPS.find((s) => s >= raw) : round(raw / day) * day;
    } else {
      step = round(raw);
      if (kind === "count") step = Math.max(1, Math.ceil(step));
    }
    return { lo: Math.floor(lo / step) * step, hi: Math.ceil(hi / step) * step, step };
  }

  // frame clears the chart and draws its axes for n batches; it returns
  // the band of each batch and the y of each value.
  function frame(chart, batches, values, fmt, kind) {
    chart.replaceChildren();
    const plotW = W - PAD.left - PAD.right, plotH = H - PAD.top - PAD.bottom;
    const { lo, hi, step } = scale(values, kind);
    const y = (v) => PAD.top + plotH - ((v - lo) / (hi - lo)) * plotH;
    const band = plotW / Math.max(1, batches.length);
    const x = (i) => PAD.left + band * (i + 0.5);
    const axes = svg("g", { class: "axes" });
    for (let v = lo; v <= hi + step / 2; v += step) {
      axes.append(svg("line", { class: v === 0 ? "zero" : "grid", x1: PAD.left, x2: W - PAD.right, y1: y(v), y2: y(v) }));
      axes.append(svg("text", { class: "tick", x: PAD.left - 6, y: y(v) + 4, "text-anchor": "end" }, fmt(v)));
    }
    // Up to about six batch ids along the bottom, evenly spread, the
    // last always (in place of a neighbour too close to it).
    const every = Math.max(1, Math.ceil(batches.length / 6));
    const labelled = [];
    for (let i = 0; i < batches.length; i += every) labelled.push(i);
    const last = batches.length - 1;
    if (last > 0 && labelled[labelled.length - 1] !== last) {
      if (last - labelled[labelled.length - 1] <= every / 2) labelled.pop();
      labelled.push(last);
    }
    // Each label is the time the batch started (its id without one).
    const times = page.times && page.times.length === batches.length ? page.times : null;
    for (const i of labelled) {
      const label = times ? fmtClock(times[i]) : String(batches[i]);
      axes.append(svg("text", { class: "tick", x: x(i), y: H - PAD.bottom + 15, "text-anchor": "middle" }, label));
    }
    axes.append(svg("text", { class: "axis-title", x: PAD.left + plotW / 2, y: H - 4, "text-anchor": "middle" }, times ? "batch start (UTC)" : "batch"));
    chart.append(axes);
    if (batches.length === 0) {
      chart.append(svg("text", { class: "empty", x: PAD.left + plotW / 2, y: PAD.top + plotH / 2, "text-anchor": "middle" }, "No batch yet"));
    }
    return { x, y, band };
  }

  // lineChart draws values (null: none for that batch) as a line with a
  // point per batch. kind is "rate", "count" or "ms".
  function lineChart(name, kind, batches, values) {
    const chart = document.getElementById("chart-" + name);
    page.charts[name] = { batches, values };
    const fmt = kind === "ms" ? fmtMs : fmtNum;
    const { x, y } = frame(chart, batches, values.filter((v) => v !== null), fmt, kind);
    let d = "", pen = "M";
    values.forEach((v, i) => {
      if (v === null) {
        pen = "M";
        return;
      }
      d += `${pen}${x(i).toFixed(1)},${y(v).toFixed(1)}`;
      pen = "L";
    });
    chart.append(svg("path", { class: "line", d }));
    const points = svg("g", { class: "points" });
    values.forEach((v, i) => {
      if (v === null) return;
      const dot = svg("circle", { cx: x(i), cy: y(v), r: 3, "data-batch": batches[i], "data-value": v });
      points.append(tooltip(dot, `batch ${batches[i]}: ${fmt(v)}`));
    });
    chart.append(points);
  }

  // stackedChart draws a bar per batch, a segment per phase, bottom up.
  function stackedChart(name, batches, phases, rows) {
    const chart = document.getElementById("chart-" + name);
    page.charts[name] = { batches, phases, values: rows };
    const totals = rows.map((r) => r.reduce((a, b) => a + b, 0));
    const { x, y, band } = frame(chart, batches, totals, fmtMs, "ms");
    const bars = svg("g", { class: "points" });
    const w = Math.max(1, band * 0.75);
    rows.forEach((r, i) => {
      const bar = svg("g", { class: "bar" });
      const lines = phases.map((p, j) => `${p}: ${fmtMs(r[j])}`).filter((_, j) => r[j] > 0);
      let base = 0;
      r.forEach((v, j) => {
        const seg = svg("rect", {
          x: x(i) - w / 2, width: w, y: y(base + v), height: y(base) - y(base + v),
          fill: PHASE_COLORS[j % PHASE_COLORS.length],
          "data-batch": batches[i], "data-phase": phases[j], "data-value": v,
        });
        bar.append(seg);
        base += v;
      });
      bars.append(tooltip(bar, `batch ${batches[i]}: ${fmtMs(totals[i])}\n${lines.join("\n")}`));
    });
    chart.append(bars);
    const legend = document.getElementById("legend-" + name);
    legend.replaceChildren(...phases.map((p, j) =>
      el("span", { class: "key" }, el("i", { class: "swatch c" + (j % PHASE_COLORS.length) }), p)));
  }

  // --- pages ---------------------------------------------------------------

  function queryLink(q) {
    return el("a", { href: "query?run=" + encodeURIComponent(q.runId) }, q.name || "(unnamed)");
  }

  function statusBadge(q) {
    return el("span", { class: "status " + q.status }, q.status);
  }

  function queryRow(q, withError) {
    const cells = [
      el("td", {}, queryLink(q)),
      el("td", {}, statusBadge(q)),
      el("td", { class: "id" }, q.id),
      el("td", { class: "id" }, q.runId),
      el("td", {}, fmtTime(q.started)),
      el("td", { class: "num" }, String(q.numBatches)),
      el("td", { class: "num" }, q.latest ? String(q.latest.batchId) : "–"),
      el("td", { class: "num" }, q.latest ? fmtNum(q.latest.inputRowsPerSecond) : "–"),
      el("td", { class: "num" }, q.latest ? fmtNum(q.latest.processedRowsPerSecond) : "–"),
    ];
    if (withError) cells.push(el("td", { class: "error" }, q.error || ""));
    return el("tr", { "data-run": q.runId, "data-status": q.status }, ...cells);
  }

  function renderList(d) {
    const active = d.queries.filter((q) => q.status === "active");
    const ended = d.queries.filter((q) => q.status !== "active");
    const fill = (id, qs, withError, cols) => {
      const body = document.querySelector(`#${id} tbody`);
      body.replaceChildren(...qs.map((q) => queryRow(q, withError)));
      if (qs.length === 0) body.append(el("tr", {}, el("td", { colspan: cols, class: "muted" }, "None")));
      setText(id + "-count", `(${qs.length})`);
    };
    fill("active", active, false, 9);
    fill("completed", ended, true, 10);
    const panels = document.getElementById("panels");
    if (panels) {
      panels.replaceChildren(...(d.panels || []).map((p) =>
        el("section", { class: "panel" }, el("h2", {}, p.title), el("pre", { class: "progress" }, JSON.stringify(p.data, null, 2)))));
    }
    return true;
  }

  function renderQuery(d) {
    const name = d.name || "(unnamed)";
    document.title = name + " · streaming query";
    setText("title", name);
    const status = document.getElementById("status");
    status.className = "status " + d.status;
    status.textContent = d.status;
    setText("fact-id", d.id);
    setText("fact-run", d.runId);
    setText("fact-started", fmtTime(d.started));
    setText("fact-batches", String(d.numBatches));
    setText("fact-charted", d.batches.length ? `the last ${d.batches.length}: ${d.batches[0].batchId} to ${d.batches[d.batches.length - 1].batchId}` : "none yet");
    const error = document.getElementById("error");
    error.hidden = !d.error;
    error.textContent = d.error ? "Failed: " + d.error : "";

    const bs = d.batches, ids = bs.map((b) => b.batchId);
    page.times = bs.map((b) => b.timestamp);
    lineChart("inputRate", "rate", ids, bs.map((b) => b.inputRowsPerSecond));
    lineChart("processRate", "rate", ids, bs.map((b) => b.processedRowsPerSecond));
    stackedChart("duration", ids, d.phases, bs.map((b) => b.durationMs));
    lineChart("stateRows", "count", ids, bs.map((b) => b.stateRows));
    lineChart("outputRows", "count", ids, bs.map((b) => b.numOutputRows));
    lineChart("lateRows", "count", ids, bs.map((b) => b.lateRows));
    lineChart("deadLetters", "count", ids, bs.map((b) => b.numDeadLetters));
    lineChart("diskMiB", "rate", ids, bs.map((b) => Math.round(b.diskBytes / 1048576 * 100) / 100));
    lineChart("lag", "count", ids, bs.map((b) => b.lag));
    lineChart("watermarkDelay", "ms", ids, bs.map((b) => b.watermarkDelayMs));
    setText("last-progress", d.lastProgress ? JSON.stringify(d.lastProgress, null, 2) : "No batch yet.");
    return d.status === "active"; // an ended query changes no more
  }

  // poll fetches url and renders it, again every POLL_MS while render
  // says the data may still change.
  function poll(url, render) {
    const tick = async () => {
      let again = true;
      try {
        const r = await fetch(url, { cache: "no-store" });
        const body = await r.json().catch(() => null);
        if (!r.ok) throw new Error((body && body.error) || `${r.status} ${r.statusText}`);
        page.data = body;
        again = render(body);
        page.updates++;
        problem(null);
        setText("updated", "updated " + new Date().toLocaleTimeString() + (again ? "" : " · ended"));
      } catch (e) {
        problem("Cannot update: " + e.message);
      }
      if (again) setTimeout(tick, POLL_MS);
    };
    tick();
  }

  if (document.body.dataset.page === "query") {
    poll("api/query" + location.search, renderQuery);
  } else {
    poll("api/queries", renderList);
  }
})();
