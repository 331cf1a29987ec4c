// perfcast report: draws the views of one campaign from the JSON in #perfcast-data.
// Every element is built with createElement/textContent: names from the data are text,
// never markup. Plots are SVG drawn here (see perfcast/report/html.py for why).
// The URL fragment drives the page (#view=tree&search=sweep&expand=all&path=main->sweep),
// so a view can be linked to, and tests and screenshots can open it without clicking.
"use strict";
(function () {
  const data = JSON.parse(document.getElementById("perfcast-data").textContent);
  const P = data.parameters;
  const nodes = data.nodes;
  const children = nodes.map(() => []);
  const roots = [];
  nodes.forEach((node, i) => (node.parent < 0 ? roots : children[node.parent]).push(i));
  const modelOf = nodes.map(() => ({}));
  data.models.forEach((record) => { modelOf[record.node][record.metric] = record; });
  const metricIndex = (name) => data.metrics.findIndex((m) => m.name === name);
  const SHOWN = 15;
  const state = {
    view: "summary",
    metric: Math.max(0, metricIndex(data.ranked[0])),
    selected: null,
    expanded: new Set(roots),
    search: "",
    showAll: {},
    pair: data.comparison && data.comparison.rows.length ? 0 : null,  // the largest change
  };
  const costliest = data.models.filter((r) => r.metric === state.metric && !r.unfit.length)
    .sort((a, b) => (b.at_target ?? -Infinity) - (a.at_target ?? -Infinity))[0];
  if (costliest) state.selected = costliest.node;  // the plots of the hot spot, at once

  // -- elements -------------------------------------------------------------------------
  function el(tag, props, ...content) {
    const element = document.createElement(tag);
    for (const [key, value] of Object.entries(props || {})) {
      if (key === "onclick") element.addEventListener("click", value);
      else if (key === "className") element.className = value;
      else element.setAttribute(key, String(value));
    }
    append(element, content);
    return element;
  }
  function append(element, content) {
    for (const item of content.flat(Infinity)) {
      if (item === null || item === undefined || item === false) continue;
      element.appendChild(typeof item === "object" ? item : document.createTextNode(String(item)));
    }
    return element;
  }
  const SVG = "http://www.w3.org/2000/svg";
  function svg(tag, attributes, text) {
    const element = document.createElementNS(SVG, tag);
    for (const [key, value] of Object.entries(attributes || {})) element.setAttribute(key, String(value));
    if (text !== undefined) element.textContent = text;
    return element;
  }
  function clear(element) { while (element.firstChild) element.removeChild(element.firstChild); return element; }

  // -- numbers --------------------------------------------------------------------------
  function num(value) {
    if (value === null || value === undefined || !isFinite(value)) return "-";
    if (value === 0) return "0";
    const size = Math.abs(value);
    if (Number.isInteger(value) && size < 1e6) return String(value);
    if (size >= 1e5 || size < 1e-3) return value.toExponential(2).replace("e+", "e");
    return String(Number(value.toPrecision(3)));
  }
  function withUnit(value, unit) { const text = num(value); return unit && text !== "-" ? text + " " + unit : text; }
  function share(value, total) {
    return total > 0 && value !== null && isFinite(value) ? (100 * value / total).toFixed(1) + " %" : "";
  }
  function pointText(point) { return P.map((p) => p + "=" + num(point[p])).join(", "); }
  const metric = () => data.metrics[state.metric];

  // -- models ---------------------------------------------------------------------------
  function evaluate(record, point) {
    let value = record.constant;
    for (const [coefficient, factors] of record.terms) {
      let basis = 1;
      for (const [parameter, exponent, logExponent] of factors) {
        const x = point[P[parameter]];
        if (exponent) basis *= Math.pow(x, exponent);
        if (logExponent) basis *= Math.pow(Math.log2(x), logExponent);
      }
      value += coefficient * basis;
    }
    return value;
  }
  function modelParameters(record) {
    const used = new Set();
    record.terms.forEach(([, factors]) => factors.forEach(([parameter]) => used.add(P[parameter])));
    return P.filter((p) => used.has(p));
  }

  // -- layout ---------------------------------------------------------------------------
  const VIEWS = [["summary", "Scalability"], ["tree", "Call tree"],
    ...(data.comparison ? [["diff", "Comparison"]] : []),
    ...(data.simulations && data.simulations.length ? [["simulation", "Simulation"]] : []),
    ...(data.efficiency ? [["efficiency", "Efficiency"]] : []),
    ["campaign", "Campaign"], ["notes", "Notes"]];
  const tabs = {};
  const select = el("select", { id: "metric", "aria-label": "metric" });
  data.metrics.forEach((m, i) => select.appendChild(el("option", { value: i }, m.name + (m.unit ? " [" + m.unit + "]" : ""))));
  select.value = String(state.metric);
  select.addEventListener("change", () => { state.metric = Number(select.value); render(); });
  const nav = el("nav", {}, VIEWS.map(([key, label]) => {
    tabs[key] = el("button", { type: "button", onclick: () => { state.view = key; render(); } }, label);
    return tabs[key];
  }));
  const header = el("header", {},
    el("h1", {}, "perfcast report"),
    el("span", { className: "source", title: data.source }, data.source),
    nav,
    el("label", { className: "metric" }, "metric ", select));
  const view = el("section", { id: "view" });
  const detail = el("aside", { id: "detail" });
  document.body.appendChild(header);
  document.body.appendChild(el("main", {}, view, detail));

  function render() {
    for (const [key, button] of Object.entries(tabs)) button.className = key === state.view ? "active" : "";
    select.value = String(state.metric);
    clear(view);
    ({ summary: renderSummary, tree: renderTree, diff: renderComparison, simulation: renderSimulation,
      efficiency: renderEfficiency, campaign: renderCampaign, notes: renderNotes })[state.view]();
    renderDetail();
  }
  function choose(node) { state.selected = node; renderDetail(); detail.scrollTop = 0; }
  function pathCell(node) {
    return el("td", { className: "path", title: nodes[node].path },
      el("a", { href: "#", onclick: (event) => { event.preventDefault(); choose(node); } }, nodes[node].short));
  }

  // -- scalability summary --------------------------------------------------------------
  function renderSummary() {
    const m = metric();
    let records = data.models.filter((r) => r.metric === state.metric);
    view.appendChild(el("p", { className: "lead" },
      "Largest measured point: " + pointText(data.largest) + ". Target: " + pointText(data.target) +
      " (" + data.target_how + "). Values are the models' values of " + m.name +
      (m.kind === "max" ? " (a maximum over ranks: no shares, maxima of different ranks do not add up)" : "") + "."));
    if (data.notes.length) view.appendChild(el("ul", { className: "notes" }, data.notes.map((n) => el("li", {}, n))));
    const total = m.total.target;
    const byTarget = (a, b) => (b.at_target ?? -Infinity) - (a.at_target ?? -Infinity);
    const unfit = records.filter((r) => r.unfit.length).sort(byTarget);
    records = records.filter((r) => !r.unfit.length);  // ranked at the target: fit models only
    const costly = records.slice().sort(byTarget);
    ranking("cost", "Costliest call paths at the target", costly,
      ["call path", "at target", "share", "now", "growth", "leading"],
      (r) => [withUnit(r.at_target, m.unit), m.kind === "max" ? "" : shareBar(r.at_target, total),
        withUnit(r.at_largest, m.unit), growth(r), r.lead]);
    const floor = data.growth_floor * (total || 0);
    const growing = records.filter((r) => isFinite(growthOf(r)) && (r.at_target ?? 0) >= floor)
      .sort((a, b) => growthOf(b) - growthOf(a));
    ranking("growth", "Fastest growing call paths towards the target (with at least " +
      (100 * data.growth_floor) + " % of the total there: " + growing.length + " of " + records.length + ")", growing,
      ["call path", "growth", "leading", "now", "at target", "share"],
      (r) => [growth(r), r.lead, withUnit(r.at_largest, m.unit), withUnit(r.at_target, m.unit),
        m.kind === "max" ? "" : shareBar(r.at_target, total)]);
    if (unfit.length) {
      ranking("unfit", "Not ranked at the target: " + unfit.length + " model(s) not fit to extrapolate there " +
        "(left out of the total there), each with the runs that would fix it", unfit,
        ["call path", "at target", "growth", "why not, and what would fix it"],
        (r) => [withUnit(r.at_target, m.unit), growth(r), el("ul", { className: "unfit" }, r.unfit.map((u) => el("li", {}, u)))]);
    }
  }
  function growthOf(r) { return r.at_largest > 0 && r.at_target !== null ? r.at_target / r.at_largest : NaN; }
  function growth(r) { const g = growthOf(r); return isFinite(g) ? "x" + num(g) : "-"; }
  function shareBar(value, total) {
    const text = share(value, total);
    if (!text) return "";
    const bar = el("span", { className: "bar" });
    bar.style.width = Math.max(0, Math.min(100, 100 * value / total)).toFixed(1) + "%";
    return el("span", { className: "share" }, el("span", { className: "track" }, bar), text);
  }
  function ranking(key, title, records, headings, cells) {
    const all = state.showAll[key];
    const shown = all ? records : records.slice(0, SHOWN);
    const body = el("tbody", {}, shown.map((r) => el("tr", { className: state.selected === r.node ? "selected" : "" },
      pathCell(r.node), cells(r).map((cell) => el("td", {}, cell)))));
    view.appendChild(el("h2", {}, title));
    view.appendChild(el("table", { className: "ranking", "data-ranking": key },
      el("thead", {}, el("tr", {}, headings.map((h) => el("th", {}, h)))), body));
    if (records.length > SHOWN) {
      view.appendChild(el("button", { type: "button", className: "more",
        onclick: () => { state.showAll[key] = !all; render(); } },
      all ? "show the first " + SHOWN : "show all " + records.length));
    }
  }

  // -- call tree ------------------------------------------------------------------------
  function renderTree() {
    const search = el("input", { type: "search", id: "search", placeholder: "search call paths by name", value: state.search });
    search.addEventListener("input", () => { state.search = search.value; drawRows(); });
    view.appendChild(el("div", { className: "tools" }, search,
      el("button", { type: "button", onclick: () => { nodes.forEach((_, i) => state.expanded.add(i)); drawRows(); } }, "expand all"),
      el("button", { type: "button", onclick: () => { state.expanded = new Set(); drawRows(); } }, "collapse all")));
    const m = metric();
    const count = el("p", { className: "count" });
    const body = el("tbody", { id: "tree-rows" });
    const unit = m.unit ? " [" + m.unit + "]" : "";
    view.appendChild(count);
    view.appendChild(el("table", { className: "tree" },
      el("thead", {},
        el("tr", {}, el("th", {}, ""), el("th", { colspan: 2 }, "now" + unit), el("th", { colspan: 2 }, "at target" + unit)),
        el("tr", {}, el("th", {}, "call path (" + m.name + ")"), ["exclusive", "inclusive", "exclusive", "inclusive"].map((h) => el("th", {}, h)))),
      body));
    function drawRows() {
      clear(body);
      const rows = visibleRows();
      count.textContent = rows.note;
      for (const [node, depth, open] of rows.rows) {
        const record = modelOf[node][state.metric];
        const toggle = children[node].length
          ? el("button", { type: "button", className: "toggle", "aria-expanded": open,
            onclick: () => { if (state.expanded.has(node)) state.expanded.delete(node); else state.expanded.add(node); drawRows(); } },
          open ? "\u25be" : "\u25b8")
          : el("span", { className: "toggle" }, "");
        const name = el("a", { href: "#", title: nodes[node].path, onclick: (event) => { event.preventDefault(); choose(node); } }, nodes[node].name);
        const cell = el("td", { className: "path" }, toggle, name);
        cell.style.paddingLeft = (0.3 + 1.1 * depth).toFixed(1) + "em";
        const values = record
          ? [record.exclusive, record.inclusive, record.exclusive_target, record.inclusive_target].map((v) => el("td", {}, num(v)))
          : [el("td", { colspan: 4, className: "none" }, "no model of " + m.name)];
        body.appendChild(el("tr", { className: state.selected === node ? "selected" : "", "data-node": node }, cell, values));
      }
    }
    drawRows();
  }
  function visibleRows() {
    const rows = [];
    const query = state.search.trim().toLowerCase();
    if (!query) {
      const walk = (node, depth) => {
        const open = state.expanded.has(node);
        rows.push([node, depth, open]);
        if (open) children[node].forEach((child) => walk(child, depth + 1));
      };
      roots.forEach((root) => walk(root, 0));
      return { rows, note: nodes.length + " call paths; click a name for its models and plots." };
    }
    const LIMIT = 500;
    const keep = new Set();
    let matches = 0;
    nodes.forEach((node, i) => {
      if (matches >= LIMIT || !(node.frame.toLowerCase().includes(query) || node.short.toLowerCase().includes(query))) return;
      matches += 1;
      for (let n = i; n >= 0 && !keep.has(n); n = nodes[n].parent) keep.add(n);
    });
    const walk = (node, depth) => {
      if (!keep.has(node)) return;
      rows.push([node, depth, true]);
      children[node].forEach((child) => walk(child, depth + 1));
    };
    roots.forEach((root) => walk(root, 0));
    return { rows, note: (matches >= LIMIT ? "the first " + LIMIT : matches) + " call path(s) match \u201c" + state.search + "\u201d, shown with their callers." };
  }

  // -- one call path --------------------------------------------------------------------
  function renderDetail() {
    clear(detail);
    if (state.view === "diff" && state.pair !== null) { renderPair(data.comparison.rows[state.pair]); return; }
    if (state.selected === null) {
      detail.appendChild(el("p", { className: "hint" }, "Choose a call path (in a ranking or the call tree) to see its models, " +
        "every repetition against them, and the prediction beyond the measured range."));
      return;
    }
    const node = nodes[state.selected];
    detail.appendChild(el("h2", { title: node.path }, node.short));
    detail.appendChild(el("details", {}, el("summary", {}, "full call path"), el("code", { className: "full" }, node.path)));
    const available = data.metrics.map((m, i) => [m, i]).filter(([, i]) => modelOf[state.selected][i]);
    if (!available.length) { detail.appendChild(el("p", {}, "No models: a caller of modeled call paths.")); return; }
    detail.appendChild(el("div", { className: "metrics" }, available.map(([m, i]) =>
      el("button", { type: "button", className: i === state.metric ? "active" : "", onclick: () => { state.metric = i; render(); } }, m.name))));
    const record = modelOf[state.selected][state.metric];
    if (!record) { detail.appendChild(el("p", {}, "No model of " + metric().name + " here: choose a metric above.")); return; }
    const unit = metric().unit;
    const stats = record.stats;
    detail.appendChild(el("dl", { className: "model" },
      el("dt", {}, "model"), el("dd", {}, el("code", {}, record.formula)),
      el("dt", {}, "grows as"), el("dd", {}, record.lead),
      el("dt", {}, "now / at target"), el("dd", {}, withUnit(record.at_largest, unit) + " / " + withUnit(record.at_target, unit) + " (" + growth(record) + ")"),
      el("dt", {}, "fit"), el("dd", {}, "SMAPE " + num(stats.smape) + " %, adj. R\u00b2 " + num(stats.adjusted_r2) +
        ", CV error " + num(stats.cv_error) + ", " + stats.points + " points"),
      el("dt", {}, "prior"), el("dd", {}, record.prior || "none: the black-box search chose the terms"),
      record.alternative && [el("dt", {}, "black-box"), el("dd", {}, el("code", {}, record.alternative.formula),
        " (SMAPE " + num(record.alternative.smape) + " % without the prior, " + num(stats.smape) + " % with it)")],
      record.taint && [el("dt", {}, "taint prior"), el("dd", {}, record.taint.prior + ", matched " + record.taint.matched,
        record.taint.functions.length ? el("ul", { className: "dependencies" }, record.taint.functions.map(([name, dependency]) =>
          el("li", {}, el("code", {}, name), ": " + (dependency || "constant")))) : null)]));
    const said = [
      ...record.warnings.map((w) => ["fit", w]),
      ...record.findings.map((f) => [f.stage, f.message]),
      ...record.unfit.map((u) => ["not ranked", u]),
      ...(record.shared_cores ? [["provenance", "fitted on wall time of runs with more ranks than cores: growth in the ranks is partly waiting for a core"]] : []),
    ];
    if (said.length) {
      detail.appendChild(el("ul", { className: "findings" }, said.map(([stage, text]) =>
        el("li", {}, el("span", { className: "stage" }, stage), " ", text))));
    }
    const plotted = P.filter((p) => data.axes[p].grid.length > 1);
    plotted.forEach((p) => detail.appendChild(linePlot(record, p, unit)));
    const used = modelParameters(record).filter((p) => plotted.includes(p));
    if (used.length >= 2) detail.appendChild(heatMap(record, used[0], used[1], unit));
    P.filter((p) => !plotted.includes(p)).forEach((p) =>
      detail.appendChild(el("p", { className: "note" }, p + " was not varied (" + p + " = " + num(data.largest[p]) + "): no plot along it.")));
  }

  // -- plots ----------------------------------------------------------------------------
  const W = 460, H = 250, M = { left: 62, right: 14, top: 14, bottom: 38 };
  function scale(domain, range, log) {
    const [d0, d1] = log ? domain.map(Math.log) : domain;
    const f = (v) => range[0] + ((log ? Math.log(v) : v) - d0) / ((d1 - d0) || 1) * (range[1] - range[0]);
    f.domain = domain; f.log = log;
    return f;
  }
  function ticks(domain, log) {
    const [lo, hi] = domain;
    if (log) {
      const base = hi / lo > 1e4 ? 10 : 2;
      const out = [];
      for (let e = Math.ceil(Math.log(lo) / Math.log(base) - 1e-9); Math.pow(base, e) <= hi * (1 + 1e-9); e++) out.push(Math.pow(base, e));
      while (out.length > 8) { const thinned = out.filter((_, i) => i % 2 === 0); out.length = 0; out.push(...thinned); }
      return out;
    }
    const step0 = (hi - lo) / 5 || 1;
    const magnitude = Math.pow(10, Math.floor(Math.log10(step0)));
    const step = [1, 2, 5, 10].map((k) => k * magnitude).find((s) => s >= step0);
    const out = [];
    for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) out.push(Number(v.toPrecision(12)));
    return out;
  }
  function spaced(lo, hi, n, log) {
    return Array.from({ length: n }, (_, i) => log ? lo * Math.pow(hi / lo, i / (n - 1)) : lo + (hi - lo) * i / (n - 1));
  }
  function axes(plot, x, y, xLabel, yLabel) {
    const [x0, x1] = [M.left, W - M.right], [y0, y1] = [H - M.bottom, M.top];
    plot.appendChild(svg("line", { x1: x0, y1: y0, x2: x1, y2: y0, class: "axis" }));
    plot.appendChild(svg("line", { x1: x0, y1: y0, x2: x0, y2: y1, class: "axis" }));
    for (const t of ticks(x.domain, x.log)) {
      plot.appendChild(svg("line", { x1: x(t), y1: y0, x2: x(t), y2: y0 + 4, class: "axis" }));
      plot.appendChild(svg("text", { x: x(t), y: y0 + 15, class: "tick", "text-anchor": "middle" }, num(t)));
    }
    for (const t of ticks(y.domain, false)) {
      plot.appendChild(svg("line", { x1: x0 - 4, y1: y(t), x2: x1, y2: y(t), class: "grid" }));
      plot.appendChild(svg("text", { x: x0 - 6, y: y(t) + 3, class: "tick", "text-anchor": "end" }, num(t)));
    }
    plot.appendChild(svg("text", { x: (x0 + x1) / 2, y: H - 4, class: "label", "text-anchor": "middle" }, xLabel));
    plot.appendChild(svg("text", { x: 12, y: (y0 + y1) / 2, class: "label", "text-anchor": "middle", transform: "rotate(-90 12 " + (y0 + y1) / 2 + ")" }, yLabel));
  }
  const LINES = 12;
  // The frame every line plot shares: a y range over the finite values drawn (from 0 when
  // that costs less than half the height), the scales, and the measured range shaded.
  function plotFrame(values, [lo, hi], log, p, cls) {
    const finite = values.filter((v) => v !== null && isFinite(v));
    let yLo = Math.min(...finite), yHi = Math.max(...finite);
    if (yLo > 0 && yLo < 0.5 * yHi) yLo = 0;
    if (yHi === yLo) { yHi = yLo + (Math.abs(yLo) || 1); yLo -= (Math.abs(yLo) || 1) * 0.1; }
    const x = scale([lo, hi], [M.left, W - M.right], log);
    const y = scale([yLo, yHi + 0.04 * (yHi - yLo)], [H - M.bottom, M.top], false);
    const plot = svg("svg", { viewBox: "0 0 " + W + " " + H, class: cls, role: "img", "data-parameter": p });
    const [mLo, mHi] = data.ranges[p];
    plot.appendChild(svg("rect", { x: x(mLo), y: M.top, width: Math.max(1, x(mHi) - x(mLo)), height: H - M.bottom - M.top, class: "measured" }));
    return { plot, x, y };
  }

  function measuredLines(record, p) {
    // The repetitions grouped by the values of the other parameters: one line each, the one
    // through the largest measured point first; every repetition is on some line.
    const index = P.indexOf(p);
    const lines = new Map([[null, { fixed: Object.assign({}, data.largest), observed: [], main: true }]]);
    for (let i = 0; i + 1 < record.observed.length; i += 2) {
      const point = data.points[record.observed[i]], value = record.observed[i + 1];
      if (value === null) continue;
      const main = P.every((q, k) => q === p || point[k] === data.largest[q]);
      const key = main ? null : point.filter((_, k) => k !== index).join(",");
      if (!lines.has(key)) {
        const fixed = Object.assign({}, data.largest);
        P.forEach((q, k) => { if (q !== p) fixed[q] = point[k]; });
        lines.set(key, { fixed, observed: [], main: false });
      }
      lines.get(key).observed.push([point[index], value]);
    }
    return [...lines.values()];
  }
  function linePlot(record, p, unit) {
    const axis = data.axes[p];
    const grid = axis.grid;
    const lo = grid[0], hi = grid[grid.length - 1];
    const xs = spaced(lo, hi, 80, axis.log);
    const allLines = measuredLines(record, p);
    const lines = allLines.slice(0, LINES);
    lines.forEach((line) => { line.curve = xs.map((x) => [x, evaluate(record, Object.assign({}, line.fixed, { [p]: x }))]); });
    const band = record.bands[p];
    const observed = lines[0].observed;
    const curve = lines[0].curve;
    const values = [...lines.flatMap((l) => [...l.curve.map((c) => c[1]), ...l.observed.map((o) => o[1])]), ...(band ? band.flat() : [])];
    const { plot, x, y } = plotFrame(values, [lo, hi], axis.log, p, "plot");
    const [mLo, mHi] = data.ranges[p];
    plot.appendChild(svg("text", { x: x(mLo) + 4, y: M.top + 11, class: "zone" }, "measured"));
    if (hi > mHi) plot.appendChild(svg("text", { x: x(mHi) + 4, y: M.top + 11, class: "zone" }, "extrapolated"));
    axes(plot, x, y, p + (P.length > 1 ? " (" + P.filter((q) => q !== p).map((q) => q + "=" + num(data.largest[q])).join(", ") + ")" : ""),
      metric().name + (unit ? " [" + unit + "]" : ""));
    if (band) {
      const upper = grid.map((g, i) => [g, band[1][i]]).filter((b) => b[1] !== null);
      const lower = grid.map((g, i) => [g, band[0][i]]).filter((b) => b[1] !== null).reverse();
      if (upper.length > 1) {
        const d = [...upper, ...lower].map(([gx, gy], i) => (i ? "L" : "M") + x(gx).toFixed(1) + " " + y(Math.max(gy, y.domain[0])).toFixed(1)).join(" ") + " Z";
        plot.appendChild(svg("path", { d, class: "band" }, undefined));
      }
    }
    const target = data.target[p];
    if (target >= lo && target <= hi) {
      plot.appendChild(svg("line", { x1: x(target), y1: M.top, x2: x(target), y2: H - M.bottom, class: "target" }));
      plot.appendChild(svg("text", { x: x(target) - 4, y: M.top + 24, class: "zone", "text-anchor": "end" }, "target"));
    }
    for (const line of lines.slice().reverse()) {  // the main line last: on top
      const kind = line.main ? "" : " other";
      const d = line.curve.filter((c) => isFinite(c[1])).map(([cx, cy], i) => (i ? "L" : "M") + x(cx).toFixed(1) + " " + y(cy).toFixed(1)).join(" ");
      const where = P.filter((q) => q !== p).map((q) => q + "=" + num(line.fixed[q])).join(", ");
      const path = svg("path", { d, class: "model" + kind });
      path.appendChild(svg("title", {}, "the model" + (where ? " at " + where : "")));
      plot.appendChild(path);
      for (const [ox, oy] of line.observed) {
        const dot = svg("circle", { cx: x(ox).toFixed(1), cy: y(oy).toFixed(1), r: 2.6, class: "repetition" + kind });
        dot.appendChild(svg("title", {}, p + "=" + num(ox) + (where ? ", " + where : "") + ": " + withUnit(oy, unit)));
        plot.appendChild(dot);
      }
    }
    const caption = [];
    const others = allLines.slice(1).reduce((n, l) => n + l.observed.length, 0);
    caption.push(observed.length ? observed.length + " repetitions on this line (dots), the model (line)" :
      data.has_measurements ? "no repetitions measured on this line; the model (line)" : "the model (line); the input holds no measurements");
    if (allLines.length > 1) {
      caption.push((allLines.length > LINES ? LINES - 1 + " of " : "") + (allLines.length - 1) + " other line(s) in grey, at other values of " +
        P.filter((q) => q !== p).join(", ") + " (" + others + " repetitions; hover for their values)");
    }
    caption.push(band ? "band: " + Math.round(100 * data.level) + " % prediction interval of one new repetition"
      : "no band: this model stores no uncertainty (fitted before perfcast kept it, or read from another tool's file)");
    return el("figure", {}, plot, el("figcaption", {}, caption.join("; ") + "."));
  }
  function color(t) {  // 0..1 -> light yellow to dark blue
    const stops = [[255, 255, 204], [161, 218, 180], [65, 182, 196], [44, 127, 184], [37, 52, 148]];
    const s = Math.max(0, Math.min(1, t)) * (stops.length - 1), i = Math.min(stops.length - 2, Math.floor(s)), f = s - i;
    return "rgb(" + stops[i].map((c, k) => Math.round(c + f * (stops[i + 1][k] - c))).join(",") + ")";
  }
  function heatMap(record, a, b, unit) {
    const N = 20;
    const [ga, gb] = [data.axes[a], data.axes[b]];
    const xa = spaced(ga.grid[0], ga.grid[ga.grid.length - 1], N, ga.log), xb = spaced(gb.grid[0], gb.grid[gb.grid.length - 1], N, gb.log);
    const cells = [];
    xa.forEach((va, i) => xb.forEach((vb, j) => cells.push([i, j, va, vb, evaluate(record, Object.assign({}, data.largest, { [a]: va, [b]: vb }))])));
    const finite = cells.map((c) => c[4]).filter((v) => isFinite(v));
    const lo = Math.min(...finite), hi = Math.max(...finite);
    const logColor = lo > 0 && hi / lo > 10;
    const t = (v) => logColor ? Math.log(v / lo) / Math.log(hi / lo) : (v - lo) / ((hi - lo) || 1);
    const plot = svg("svg", { viewBox: "0 0 " + W + " " + (H + 20), class: "plot heat", role: "img" });
    const cw = (W - M.left - M.right) / N, ch = (H - M.top - M.bottom) / N;
    for (const [i, j, va, vb, v] of cells) {
      const r = svg("rect", { x: (M.left + i * cw).toFixed(1), y: (H - M.bottom - (j + 1) * ch).toFixed(1), width: (cw + 0.5).toFixed(1), height: (ch + 0.5).toFixed(1), fill: isFinite(v) ? color(t(v)) : "#ccc" });
      r.appendChild(svg("title", {}, a + "=" + num(va) + ", " + b + "=" + num(vb) + ": " + withUnit(v, unit)));
      plot.appendChild(r);
    }
    const x = scale([xa[0], xa[N - 1]], [M.left + cw / 2, W - M.right - cw / 2], ga.log);
    const y = scale([xb[0], xb[N - 1]], [H - M.bottom - ch / 2, M.top + ch / 2], gb.log);
    const [a0, a1] = data.ranges[a], [b0, b1] = data.ranges[b];
    plot.appendChild(svg("rect", { x: x(a0), y: y(b1), width: Math.max(1, x(a1) - x(a0)), height: Math.max(1, y(b0) - y(b1)), class: "measured-outline" }));
    const ia = P.indexOf(a), ib = P.indexOf(b);
    const seen = new Set();
    for (const point of data.points) {
      const keyText = point[ia] + "," + point[ib];
      if (seen.has(keyText)) continue;
      seen.add(keyText);
      plot.appendChild(svg("circle", { cx: x(point[ia]).toFixed(1), cy: y(point[ib]).toFixed(1), r: 2, class: "measured-point" }));
    }
    [[ticks([xa[0], xa[N - 1]], ga.log), (v) => svg("text", { x: x(v), y: H - M.bottom + 14, class: "tick", "text-anchor": "middle" }, num(v))],
      [ticks([xb[0], xb[N - 1]], gb.log), (v) => svg("text", { x: M.left - 6, y: y(v) + 3, class: "tick", "text-anchor": "end" }, num(v))]]
      .forEach(([values, label]) => values.forEach((v) => plot.appendChild(label(v))));
    plot.appendChild(svg("text", { x: (M.left + W - M.right) / 2, y: H - 8, class: "label", "text-anchor": "middle" }, a));
    plot.appendChild(svg("text", { x: 12, y: H / 2, class: "label", "text-anchor": "middle", transform: "rotate(-90 12 " + H / 2 + ")" }, b));
    for (let k = 0; k <= 10; k++) plot.appendChild(svg("rect", { x: M.left + k * 20, y: H + 4, width: 20, height: 10, fill: color(k / 10) }));
    plot.appendChild(svg("text", { x: M.left + 226, y: H + 13, class: "tick" }, withUnit(lo, unit) + " to " + withUnit(hi, unit) + (logColor ? " (log scale)" : "")));
    return el("figure", {}, plot, el("figcaption", {}, "The model over " + a + " and " + b +
      (P.length > 2 ? " (others at the largest measured point)" : "") + "; the outline is the measured range, dots the measured points."));
  }

  // -- comparison of two campaigns ------------------------------------------------------
  function renderComparison() {
    const c = data.comparison;
    const level = Math.round(100 * data.level);
    view.appendChild(el("p", { className: "lead" }, "A = " + c.before + " (before), B = " + data.source + " (after), at the target " +
      pointText(data.target) + ". A cost changed where the two fits' means at the target differ beyond their standard " +
      "errors, across every model each fit could not tell from its own, and the difference survives the test of all call " +
      "paths together (" + c.rule + ", so that about " + (100 - level) + " % of the call paths shown as changed are " +
      "expected to be false alarms, not " + (100 - level) + " % of every unchanged one); the rest is within noise. A model " +
      "changed where its terms differ (leading term, exponents), the cost test says the models part, and neither fit had " +
      "the other's terms among the rivals it could not tell from its own; other terms that agree are \u201cother " +
      "terms\u201d, noise in the selection."));
    const counted = {};
    c.rows.forEach((r) => { counted[r.verdict] = (counted[r.verdict] || 0) + 1; });
    const changedModels = c.rows.filter((r) => r.model_changed).length;
    view.appendChild(el("p", { className: "count" }, changedModels + " changed model(s); " +
      Object.entries(counted).map(([verdict, n]) => n + " " + verdict).join(", ") + "."));
    const all = state.showAll.diff;
    const shown = all ? c.rows : c.rows.slice(0, SHOWN);
    view.appendChild(el("table", { className: "ranking", "data-ranking": "diff" },
      el("thead", {}, el("tr", {}, ["call path", "metric", "cost", "model", "A at target", "B at target", "B / A"].map((h) => el("th", {}, h)))),
      el("tbody", {}, shown.map((r, i) => el("tr", { className: state.pair === i ? "selected" : "", "data-verdict": r.verdict, "data-path": r.callpath },
        el("td", { className: "path", title: r.callpath }, el("a", { href: "#", onclick: (event) => { event.preventDefault(); state.pair = i; render(); } }, r.short)),
        el("td", {}, r.metric), el("td", { className: "verdict" }, r.verdict),
        el("td", {}, r.model_changed ? "changed" : r.terms_differ ? "other terms" : r.before && r.after ? "same terms" : ""),
        el("td", {}, num(r.value_before)), el("td", {}, num(r.value_after)), el("td", {}, r.ratio === null ? "-" : "x" + num(r.ratio)))))));
    if (c.rows.length > SHOWN) {
      view.appendChild(el("button", { type: "button", className: "more", onclick: () => { state.showAll.diff = !all; render(); } },
        all ? "show the first " + SHOWN : "show all " + c.rows.length));
    }
  }
  function renderPair(r) {
    detail.appendChild(el("h2", { title: r.callpath }, r.short + " [" + r.metric + "]"));
    detail.appendChild(el("details", {}, el("summary", {}, "full call path"), el("code", { className: "full" }, r.callpath)));
    const interval = (i) => i[0] === null ? "" : " [" + num(i[0]) + ", " + num(i[1]) + "]";
    const side = (label, s, value, i) => [el("dt", {}, label), el("dd", {}, s ? [el("code", {}, s.formula),
      " (SMAPE " + num(s.smape) + " %); at the target " + num(value) + interval(i)] : "no model: not measured there")];
    detail.appendChild(el("dl", { className: "model" },
      side("A (before)", r.before, r.value_before, r.interval_before),
      side("B (after)", r.after, r.value_after, r.interval_after),
      el("dt", {}, "verdict"), el("dd", {}, r.verdict + (r.ratio === null ? "" : " (B / A = x" + num(r.ratio) +
        (r.p_value === null || r.p_value === undefined ? "" : ", p = " + r.p_value.toExponential(1)) + ")") +
        (r.model_changed ? "; the model changed" : r.terms_differ ? "; other terms, but they agree within the intervals or were rivals the fits could not tell apart" : ""))));
    P.filter((p) => data.axes[p].grid.length > 1).forEach((p) => detail.appendChild(overlayPlot(r, p)));
  }
  function overlayPlot(r, p) {
    const axis = data.axes[p];
    const lo = axis.grid[0], hi = axis.grid[axis.grid.length - 1];
    const xs = spaced(lo, hi, 80, axis.log);
    const sides = [["before", r.before], ["after", r.after]].filter(([, s]) => s);
    const curves = sides.map(([kind, s]) => [kind, s, xs.map((v) => [v, evaluate(s, Object.assign({}, data.largest, { [p]: v }))])]);
    const values = curves.flatMap(([, s, curve]) => [...curve.map((c) => c[1]), ...(s.bands[p] ? s.bands[p].flat() : [])]);
    const { plot, x, y } = plotFrame(values, [lo, hi], axis.log, p, "plot compare");
    const before = data.comparison.ranges_before && data.comparison.ranges_before[p];
    if (before) {
      plot.appendChild(svg("rect", { x: x(Math.max(lo, before[0])), y: M.top, width: Math.max(1, x(Math.min(hi, before[1])) - x(Math.max(lo, before[0]))),
        height: H - M.bottom - M.top, class: "measured-before" }));
    }
    axes(plot, x, y, p + (P.length > 1 ? " (" + P.filter((q) => q !== p).map((q) => q + "=" + num(data.largest[q])).join(", ") + ")" : ""),
      r.metric);
    for (const [kind, s, curve] of curves) {
      const b = s.bands[p];
      if (b) {
        const upper = axis.grid.map((g, i) => [g, b[1][i]]).filter((v) => v[1] !== null);
        const lower = axis.grid.map((g, i) => [g, b[0][i]]).filter((v) => v[1] !== null).reverse();
        if (upper.length > 1) {
          plot.appendChild(svg("path", { class: "band " + kind,
            d: [...upper, ...lower].map(([gx, gy], i) => (i ? "L" : "M") + x(gx).toFixed(1) + " " + y(Math.max(gy, y.domain[0])).toFixed(1)).join(" ") + " Z" }));
        }
      }
      const path = svg("path", { class: "model " + kind, d: curve.filter((c) => isFinite(c[1])).map(([cx, cy], i) => (i ? "L" : "M") + x(cx).toFixed(1) + " " + y(cy).toFixed(1)).join(" ") });
      path.appendChild(svg("title", {}, (kind === "before" ? "A: " : "B: ") + s.formula));
      plot.appendChild(path);
    }
    const target = data.target[p];
    if (target >= lo && target <= hi) plot.appendChild(svg("line", { x1: x(target), y1: M.top, x2: x(target), y2: H - M.bottom, class: "target" }));
    return el("figure", {}, plot, el("figcaption", {}, "A (before) dashed grey, B (after) blue, each with its " + Math.round(100 * data.level) +
      " % prediction band; shaded: B's measured range" + (before ? ", dashed outline: A's" : "") + "; red: the target."));
  }

  // -- simulation results ---------------------------------------------------------------
  function renderSimulation() {
    view.appendChild(el("p", { className: "lead" }, "Predicted run time of traced runs on simulated platforms (perfcast simulate), " +
      "compute and communication stacked (waiting for other ranks counts as communication); the measured native time where " +
      "perfcast simulate was given it (--native)."));
    data.simulations.forEach((run) => {
      view.appendChild(el("h2", { title: run.trace }, run.trace + ": " + run.ranks + " rank(s), traced run " + num(run.trace_seconds) + " s"));
      view.appendChild(el("table", { className: "simulation" },
        el("thead", {}, el("tr", {}, ["platform", "predicted s", "compute s", "communication s", "measured s", "predicted / measured"].map((h) => el("th", {}, h)))),
        el("tbody", {}, run.platforms.map((pl) => el("tr", {}, el("td", { className: "path" }, pl.name), el("td", {}, num(pl.time)),
          el("td", {}, num(pl.compute)), el("td", {}, num(pl.communication)), el("td", {}, run.native === null ? "-" : num(run.native)),
          el("td", {}, run.native ? "x" + num(pl.time / run.native) : "-"))))));
      view.appendChild(stackedBars(run));
    });
  }
  function stackedBars(run) {
    const rowH = 22, left = 130, right = 16, top = 8;
    const height = top + run.platforms.length * rowH + 34;
    const largest = Math.max(...run.platforms.map((pl) => Math.max(pl.time, pl.compute + pl.communication)), run.native || 0) || 1;
    const x = scale([0, largest], [left, W - right], false);
    const plot = svg("svg", { viewBox: "0 0 " + W + " " + height, class: "plot bars", role: "img" });
    run.platforms.forEach((pl, i) => {
      const y0 = top + i * rowH;
      plot.appendChild(svg("text", { x: left - 6, y: y0 + 14, class: "tick", "text-anchor": "end" }, pl.name.length > 20 ? pl.name.slice(0, 19) + "\u2026" : pl.name));
      [["compute", 0, pl.compute], ["communication", pl.compute, pl.communication]].forEach(([kind, start, width]) => {
        const bar = svg("rect", { x: x(start).toFixed(1), y: y0 + 3, width: Math.max(0, x(start + width) - x(start)).toFixed(1), height: rowH - 6, class: kind });
        bar.appendChild(svg("title", {}, pl.name + ": " + kind + " " + num(width) + " s of " + num(pl.time) + " s"));
        plot.appendChild(bar);
      });
    });
    const bottom = top + run.platforms.length * rowH;
    if (run.native) {
      plot.appendChild(svg("line", { x1: x(run.native), y1: top, x2: x(run.native), y2: bottom, class: "native" }));
      plot.appendChild(svg("text", { x: x(run.native) - 3, y: bottom + 12, class: "zone", "text-anchor": "end" }, "measured " + num(run.native) + " s"));
    }
    plot.appendChild(svg("line", { x1: left, y1: bottom, x2: W - right, y2: bottom, class: "axis" }));
    for (const t of ticks([0, largest], false)) plot.appendChild(svg("text", { x: x(t), y: bottom + 26, class: "tick", "text-anchor": "middle" }, num(t) + " s"));
    return el("figure", {}, plot, el("figcaption", {}, "Blue: compute, orange: communication" + (run.native ? "; the line: the measured native time" : "") + "."));
  }

  // -- speedup and parallel efficiency (perfcast report --efficiency) -------------------
  function renderEfficiency() {
    const e = data.efficiency;
    view.appendChild(el("p", { className: "lead" }, e.heading + ". Measured at each number of ranks; the last row from the " +
      "models, with the efficiency at the ends of the value's " + Math.round(100 * data.level) + " % prediction interval."));
    const pct = (v) => (v === null ? "-" : (100 * v).toFixed(1) + " %");
    view.appendChild(el("table", { className: "ranking" },
      el("thead", {}, el("tr", {}, [e.ranks, "value", "speedup", "efficiency", "from"].map((h) => el("th", {}, h)))),
      el("tbody", {}, e.rows.map((r) => el("tr", {}, el("td", {}, num(r.ranks)), el("td", {}, r.value === null ? "-" : num(r.value)),
        el("td", {}, r.speedup === null ? "-" : num(r.speedup)), el("td", {}, pct(r.efficiency)),
        el("td", {}, r.measured ? "measured" : "model" + (r.low !== null && r.high !== null ? " [" + pct(r.low) + ", " + pct(r.high) + "]" : "")))))));
    const top = e.largest;
    view.appendChild(el("p", { className: "note" }, "The largest single call path under it at the target: " + top.callpath + ", " +
      (top.value === null ? "-" : num(top.value)) + (top.low !== null && top.high !== null ? " [" + num(top.low) + ", " + num(top.high) + "]" : "") + "."));
  }

  // -- campaign and notes ---------------------------------------------------------------
  function renderCampaign() {
    const c = data.campaign;
    if (!c) {
      view.appendChild(el("p", {}, "The input is a model file: the campaign (design, cost, failed runs) is in its store; " +
        "give the store (perfcast report STORE --models " + data.source + ") to see it here."));
      return;
    }
    const hours = (s) => s >= 3600 ? num(s / 3600) + " h" : s >= 60 ? num(s / 60) + " min" : num(s) + " s";
    view.appendChild(el("h2", {}, "Campaign " + c.name));
    view.appendChild(el("dl", { className: "facts" },
      [["store", c.store], ["parameters", c.parameters.join(", ")], ["backends", c.backends.join(", ")],
        ["points", c.points], ["runs", c.runs_ok + " ok, " + c.runs_failed + " failed, " + c.retried_attempts + " attempts retried"],
        ["cost", hours(c.seconds) + " of runs, " + hours(c.rank_seconds) + " rank-time (seconds times ranks)"]]
        .map(([k, v]) => [el("dt", {}, k), el("dd", {}, String(v))])));
    view.appendChild(el("h2", {}, "Failed runs"));
    if (!c.failed.length) view.appendChild(el("p", {}, "None."));
    else {
      view.appendChild(el("table", { className: "failed" },
        el("thead", {}, el("tr", {}, ["run", "why", "exit", "attempts", "end of stderr"].map((h) => el("th", {}, h)))),
        el("tbody", {}, c.failed.map((f) => el("tr", {}, el("td", {}, f.key), el("td", {}, f.reason || ""),
          el("td", {}, f.exit_code === null ? "" : String(f.exit_code)), el("td", {}, String(f.attempts)), el("td", {}, el("pre", {}, f.stderr_tail)))))));
    }
    if (c.retried.length) {
      view.appendChild(el("h2", {}, "Attempts that failed and were retried"));
      view.appendChild(el("ul", {}, c.retried.map(([key, attempt, reason]) => el("li", {}, key + " attempt " + attempt + ": " + (reason || "")))));
    }
    if (c.spec_text) {
      view.appendChild(el("h2", {}, "Design (perfcast.toml as measured)"));
      view.appendChild(el("pre", { className: "spec" }, c.spec_text));
    }
  }
  function renderNotes() {
    view.appendChild(el("h2", {}, "What to know about these models"));
    view.appendChild(el("ul", {}, [...data.notes, "Measured ranges: " + P.map((p) => p + " " + num(data.ranges[p][0]) + " to " + num(data.ranges[p][1])).join(", ") + ".",
      "Prediction intervals (the bands) are those of perfcast.modeling.intervals at " + Math.round(100 * data.level) + " %: the fit's coefficient uncertainty and the repetitions' noise; they assume the chosen terms are right, so they do not cover a wrong exponent."]
      .map((n) => el("li", {}, n))));
  }

  // -- the URL fragment -----------------------------------------------------------------
  function fromFragment() {
    const args = new URLSearchParams(location.hash.slice(1));
    if (args.has("view") && VIEWS.some(([key]) => key === args.get("view"))) state.view = args.get("view");
    if (args.has("metric") && metricIndex(args.get("metric")) >= 0) state.metric = metricIndex(args.get("metric"));
    if (args.has("search")) { state.search = args.get("search"); state.view = "tree"; }
    if (args.get("expand") === "all") nodes.forEach((_, i) => state.expanded.add(i));
    if (args.has("path")) {
      const node = nodes.findIndex((n) => n.path === args.get("path"));
      if (node >= 0) state.selected = node;
    }
    if (args.has("pair") && data.comparison) {
      const rows = data.comparison.rows;
      const pair = rows.findIndex((r) => r.callpath === args.get("pair") && r.metric === metric().name);
      const any = rows.findIndex((r) => r.callpath === args.get("pair"));
      if (pair >= 0 || any >= 0) { state.pair = pair >= 0 ? pair : any; state.view = "diff"; state.showAll.diff = true; }
    }
    render();
  }
  window.addEventListener("hashchange", fromFragment);
  fromFragment();
  document.body.setAttribute("data-ready", "true");
})();
