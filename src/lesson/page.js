(function () {
  "use strict";
  window.__lessonErrors = null;
  window.addEventListener("error", function (e) { (window.__lessonErrors = window.__lessonErrors || []).push(String(e.message)); });
  var D = JSON.parse(document.getElementById("lesson-data").textContent);
  var NS = "http://www.w3.org/2000/svg";
  var main = D.main, vs = D.vs;
  var N = main.steps.length;
  var cur = 0, timer = null, zoom = 1;
  var endUs = Math.max(main.end_us, vs ? vs.end_us : 0, 1);
  var LEFT = 150, TOP = 46, LANE = 46, FIT = 860;

  function $(id) { return document.getElementById(id); }
  function svgEl(tag, attrs, text) {
    var e = document.createElementNS(NS, tag);
    for (var k in attrs) { e.setAttribute(k, attrs[k]); }
    if (text !== undefined) { e.textContent = text; }
    return e;
  }
  function htmlEl(tag, text, cls) {
    var e = document.createElement(tag);
    if (text !== undefined) { e.textContent = text; }
    if (cls) { e.className = cls; }
    return e;
  }
  // `code` spans of explain's text as <code>, the rest as text.
  function withCode(parent, text) {
    text.split("`").forEach(function (part, i) {
      parent.appendChild(i % 2 ? htmlEl("code", part) : document.createTextNode(part));
    });
  }
  function px() { return FIT * zoom / endUs; }
  function tx(t) { return LEFT + t * px(); }
  function tickStep() {
    var want = 90 / px(), steps = [1, 2, 5];
    for (var m = 1; ; m *= 10) {
      for (var i = 0; i < 3; i++) { if (steps[i] * m >= want) { return steps[i] * m; } }
    }
  }
  function msText(us) { return (us / 1000).toFixed(us % 1000 === 0 ? 0 : 3).replace(/(\.\d*?)0+$/, "$1").replace(/\.$/, "") + " ms"; }

  function shape(g, kind, x, y, color, cls) {
    var s, r = 6;
    if (kind === "triangle") {
      s = svgEl("path", { d: "M" + x + "," + (y - r - 1) + " L" + (x + r + 1) + "," + (y + r) + " L" + (x - r - 1) + "," + (y + r) + " z" });
    } else if (kind === "square") {
      s = svgEl("rect", { x: x - r, y: y - r, width: 2 * r, height: 2 * r });
    } else if (kind === "diamond") {
      s = svgEl("path", { d: "M" + x + "," + (y - r - 2) + " L" + (x + r + 2) + "," + y + " L" + x + "," + (y + r + 2) + " L" + (x - r - 2) + "," + y + " z" });
    } else if (kind === "bar") {
      s = svgEl("rect", { x: x - 2.5, y: y - r - 2, width: 5, height: 2 * r + 4 });
    } else {
      s = svgEl("circle", { cx: x, cy: y, r: r });
    }
    s.setAttribute("fill", color);
    s.setAttribute("class", cls);
    g.appendChild(s);
    return s;
  }

  // Events at one instant on one lane are spread across the lane's height.
  function offsets(run) {
    var seen = {}, out = [];
    run.steps.forEach(function (s) {
      var k = s.lane + "@" + s.t_us;
      var n = seen[k] || 0;
      seen[k] = n + 1;
      out.push(((n % 4) - 1.5) * 8);
    });
    return out;
  }

  function drawWindow(svg, run, h) {
    var w = run.window;
    if (!w) { return; }
    var x0 = tx(w.from_us), x1 = Math.max(tx(w.to_us), x0 + 3);
    var r = svgEl("rect", { x: x0, y: TOP - 14, width: x1 - x0, height: h - TOP + 6,
      fill: w.closed ? "url(#closed)" : "#F0E442", "fill-opacity": w.closed ? 1 : 0.45,
      stroke: w.closed ? "#009E73" : "#E69F00", "class": w.closed ? "window closed" : "window race" });
    r.appendChild(svgEl("title", {}, w.label));
    svg.appendChild(r);
    svg.appendChild(svgEl("text", { x: x0 + 2, y: TOP - 18, "font-size": 11, fill: w.closed ? "#00543d" : "#6b4a00" },
      (w.closed ? "▣ " : "▲ ") + w.label));
  }

  function drawAxis(svg, h) {
    var step = tickStep();
    for (var t = 0; t <= endUs; t += step) {
      var x = tx(t);
      svg.appendChild(svgEl("line", { x1: x, y1: h - 20, x2: x, y2: h - 14, stroke: "#777" }));
      svg.appendChild(svgEl("text", { x: x, y: h - 3, "text-anchor": "middle", "font-size": 10, fill: "#555" }, msText(t)));
    }
  }

  function drawLanes(svg, run, w) {
    run.lanes.forEach(function (l, i) {
      var y = TOP + i * LANE + LANE / 2;
      svg.appendChild(svgEl("line", { x1: LEFT - 6, y1: y, x2: w - 10, y2: y, stroke: l.color, "stroke-opacity": 0.35, "stroke-width": 2 }));
      var g = svgEl("g", { "class": "lane" });
      shape(g, l.shape, 12, y, l.color, "cue");
      g.appendChild(svgEl("text", { x: 24, y: y + 4, "font-weight": "bold", fill: "#111" }, l.name));
      svg.appendChild(g);
    });
  }

  function markerLabel(svg, x, y, text, color) {
    svg.appendChild(svgEl("text", { x: x + 10, y: y - 12, "font-size": 11, "font-weight": "bold", fill: color }, text));
  }

  function drawSteps(svg, run, upto, isMain) {
    var off = offsets(run), ly = function (s, i) { return TOP + s.lane * LANE + LANE / 2 + off[i]; };
    run.steps.forEach(function (s, i) {
      if (s.to === null) { return; }
      var x0 = tx(s.t_us), y0 = ly(s, i), future = i > upto ? " future" : "";
      if (s.arrive !== null) {
        var a = run.steps[s.arrive];
        svg.appendChild(svgEl("line", { x1: x0, y1: y0, x2: tx(a.t_us), y2: ly(a, s.arrive), stroke: "#444", "stroke-width": 1.2, "marker-end": "url(#arrow)", "class": "ev msg" + future }));
      } else {
        var ym = TOP + s.to * LANE + LANE / 2;
        svg.appendChild(svgEl("line", { x1: x0, y1: y0, x2: x0 + 20, y2: (y0 + ym) / 2, stroke: "#D55E00", "stroke-dasharray": "4,3", "class": "ev msg cut" + future }));
        svg.appendChild(svgEl("text", { x: x0 + 22, y: (y0 + ym) / 2 + 4, fill: "#D55E00", "class": "ev" + future }, "✕ lost"));
      }
    });
    run.steps.forEach(function (s, i) {
      var l = run.lanes[s.lane], x = tx(s.t_us), y = ly(s, i);
      var cls = "ev step" + (i > upto ? " future" : "") + (i === upto && isMain ? " current" : "");
      if (s.fault) { cls += " fault"; }
      var g = svgEl("g", { "class": cls, "data-step": i + 1 });
      var m = shape(g, l.shape, x, y, s.fault ? "#D55E00" : l.color, "mark");
      m.appendChild(svgEl("title", {}, "step " + (i + 1) + " · " + s.time + " · " + l.name + ": " + s.text));
      svg.appendChild(g);
    });
    if (run.violation) {
      var v = run.steps[run.violation.step], vi = run.violation.step;
      var ring = svgEl("circle", { cx: tx(v.t_us), cy: ly(v, vi), r: 12, fill: "none", stroke: "#D55E00", "stroke-width": 3, "class": "violation" + (vi > upto ? " future" : "") });
      ring.appendChild(svgEl("title", {}, run.violation.words));
      svg.appendChild(ring);
      markerLabel(svg, tx(v.t_us), ly(v, vi), "✖ " + run.violation.name, "#A33F00");
    }
    if (run.fix) {
      var f = run.steps[run.fix.step], fi = run.fix.step;
      var sq = svgEl("rect", { x: tx(f.t_us) - 12, y: ly(f, fi) - 12, width: 24, height: 24, fill: "none", stroke: "#009E73", "stroke-width": 3, "class": "fixpoint" });
      sq.appendChild(svgEl("title", {}, run.fix.words));
      svg.appendChild(sq);
      markerLabel(svg, tx(f.t_us), ly(f, fi), "■ " + run.fix.name, "#00543d");
    }
  }

  function draw(run, id, upto, isMain, tNow) {
    var h = TOP + run.lanes.length * LANE + 26, w = LEFT + FIT * zoom + 150;
    var svg = svgEl("svg", { width: w, height: h, viewBox: "0 0 " + w + " " + h, role: "img", "font-size": 11, "aria-labelledby": id + "-title" });
    svg.appendChild(svgEl("title", { id: id + "-title" }, run.alt));
    var defs = svgEl("defs", {});
    var mk = svgEl("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" });
    mk.appendChild(svgEl("path", { d: "M0,0 L10,5 L0,10 z", fill: "#444" }));
    defs.appendChild(mk);
    var pat = svgEl("pattern", { id: "closed", width: 8, height: 8, patternUnits: "userSpaceOnUse", patternTransform: "rotate(45)" });
    pat.appendChild(svgEl("rect", { width: 8, height: 8, fill: "#e8f5f0" }));
    pat.appendChild(svgEl("line", { x1: 0, y1: 0, x2: 0, y2: 8, stroke: "#009E73", "stroke-width": 2, "stroke-opacity": 0.5 }));
    defs.appendChild(pat);
    svg.appendChild(defs);
    drawWindow(svg, run, h - 26);
    drawLanes(svg, run, w);
    drawAxis(svg, h);
    drawSteps(svg, run, upto, isMain);
    var xn = tx(tNow);
    svg.appendChild(svgEl("line", { x1: xn, y1: TOP - 10, x2: xn, y2: h - 22, stroke: "#0072B2", "stroke-width": 1.5, "stroke-dasharray": "2,2", "class": "now" }));
    var box = $(id);
    box.textContent = "";
    box.appendChild(svg);
    return xn;
  }

  function legend(run, id) {
    var box = $(id);
    box.textContent = "";
    run.lanes.forEach(function (l) {
      var s = htmlEl("span");
      s.appendChild(htmlEl("b", { circle: "●", triangle: "▲", square: "■", diamond: "◆", cross: "✚", star: "★", bar: "▮" }[l.shape] || "●"));
      s.firstChild.style.color = l.color;
      s.appendChild(document.createTextNode(" " + l.name + " (" + l.kind + ")"));
      box.appendChild(s);
    });
  }

  function table(box, head, rows) {
    var t = htmlEl("table"), tr = htmlEl("tr");
    head.forEach(function (h) { tr.appendChild(htmlEl("th", h)); });
    t.appendChild(tr);
    rows.forEach(function (r) {
      var row = htmlEl("tr");
      r.forEach(function (c) { row.appendChild(htmlEl("td", String(c))); });
      t.appendChild(row);
    });
    if (!rows.length) { var e = htmlEl("tr"); var td = htmlEl("td", "(empty)"); td.colSpan = head.length; e.appendChild(td); t.appendChild(e); }
    box.appendChild(t);
  }

  // The tables as the run computed them after step s (-1: before any step).
  function db(run, id, s, what) {
    var box = $(id), st = s >= 0 ? run.steps[s] : null;
    box.textContent = "";
    box.appendChild(htmlEl("h3", run.model + " · " + what));
    var c = htmlEl("p");
    var counts = [["rows", st ? st.rows : 0], ["keys done", st ? st.keys_done : 0], ["keys in progress", st ? st.keys_in_progress : 0]];
    counts.forEach(function (p, i) {
      var b = htmlEl("span", String(p[1]), "count");
      b.id = id + "-" + ["rows", "keys", "progress"][i];
      b.setAttribute("data-count", p[1]);
      c.appendChild(document.createTextNode((i ? " · " : "") + p[0] + " "));
      c.appendChild(b);
    });
    box.appendChild(c);
    var tb = st ? st.tables : { rows: [], keys: [] };
    table(box, ["rows.id", "inserted by"], tb.rows.map(function (r) { return [r.id, r.by]; }));
    table(box, ["keys.key", "state", "written by"], tb.keys.map(function (k) { return [k.key, k.state, k.by]; }));
  }

  function vsStepAt(t) {
    var s = -1;
    vs.steps.forEach(function (x, i) { if (x.t_us <= t) { s = i; } });
    return s;
  }

  function update(scroll) {
    var s = main.steps[cur], lane = main.lanes[s.lane];
    $("scrub").value = cur + 1;
    $("stepno").textContent = "step " + (cur + 1) + " of " + N;
    $("cap-time").textContent = "step " + (cur + 1) + " · " + s.time + " ·";
    $("cap-lane").textContent = lane.name;
    $("cap-text").textContent = s.text;
    var cap = $("caption"), mark = $("cap-mark");
    var isV = main.violation && main.violation.step === cur;
    cap.className = "caption" + (isV ? " violating" : "");
    mark.textContent = isV ? "✖ violating step: " + main.violation.words : "";
    var xn = draw(main, "fig-main", cur, true, s.t_us);
    db(main, "db-main", cur, "after step " + (cur + 1));
    if (vs) {
      var vsAt = vsStepAt(s.t_us);
      draw(vs, "fig-vs", vsAt, false, s.t_us);
      db(vs, "db-vs", vsAt, "the fix at " + s.time);
      if (vs.fix && vsAt >= vs.fix.step && !isV) {
        cap.className += " fixpoint";
        mark.textContent = "■ under " + vs.model + ": " + vs.fix.words;
      }
    }
    var now = -1;
    var best = -1;
    D.narrative.forEach(function (p, i) { if (p.step <= cur && p.step >= best) { now = i; best = p.step; } });
    Array.prototype.forEach.call($("story").children, function (li, i) { li.className = i === now ? "now" : ""; });
    var hash = "#step-" + (cur + 1);
    $("permalink").href = hash;
    $("permalink").textContent = hash;
    if (location.hash !== hash) {
      try { history.replaceState(null, "", hash); } catch (e) { location.hash = hash; }
    }
    var box = $("fig-main");
    if (scroll && (xn > box.scrollLeft + box.clientWidth - 60 || xn < box.scrollLeft + LEFT)) {
      box.scrollLeft = Math.max(0, xn - box.clientWidth / 2);
    }
    if (vs) { $("fig-vs").scrollLeft = box.scrollLeft; }
  }

  function go(n, scroll) { cur = Math.max(0, Math.min(N - 1, n)); update(scroll !== false); }
  function play() {
    if (timer) { clearInterval(timer); timer = null; $("play").textContent = "▶ play"; return; }
    if (cur >= N - 1) { go(0); }
    $("play").textContent = "❚❚ pause";
    timer = setInterval(function () { if (cur >= N - 1) { play(); } else { go(cur + 1); } }, 900);
  }
  function fromHash() {
    var m = /^#step-(\d+)$/.exec(location.hash);
    return m ? parseInt(m[1], 10) - 1 : null;
  }

  function init() {
    FIT = Math.max(360, $("fig-main").clientWidth - LEFT - 160);
    $("verdict").textContent = main.verdict + (main.violation ? " — violating step " + (main.violation.step + 1) + ": " + main.violation.words : "");
    $("main-h").textContent = "The run: " + main.model + " · " + D.sim + " · seed " + D.seed;
    legend(main, "legend-main");
    if (vs) {
      $("run-vs").hidden = false;
      $("db-vs").hidden = false;
      $("vs-h").textContent = "The same client schedule under " + vs.model + " (same sim, same seed, same time axis): " + vs.verdict;
      legend(vs, "legend-vs");
    }
    D.narrative.forEach(function (p) {
      var li = htmlEl("li");
      withCode(li, p.text + " ");
      var a = htmlEl("a", "step " + (p.step + 1));
      a.href = "#step-" + (p.step + 1);
      li.appendChild(a);
      $("story").appendChild(li);
    });
    $("replay").textContent = D.replay;
    $("scrub").max = N;
    $("prev").onclick = function () { go(cur - 1); };
    $("next").onclick = function () { go(cur + 1); };
    $("play").onclick = play;
    $("scrub").oninput = function () { go(parseInt(this.value, 10) - 1); };
    $("zoom").oninput = function () { zoom = parseInt(this.value, 10); $("zoomno").textContent = "×" + zoom; update(true); };
    $("zoomno").textContent = "×1";
    document.addEventListener("keydown", function (e) {
      if (e.target && e.target.tagName === "INPUT") { return; }
      if (e.key === "ArrowRight" || e.key === "ArrowDown") { go(cur + 1); e.preventDefault(); }
      else if (e.key === "ArrowLeft" || e.key === "ArrowUp") { go(cur - 1); e.preventDefault(); }
      else if (e.key === "Home") { go(0); e.preventDefault(); }
      else if (e.key === "End") { go(N - 1); e.preventDefault(); }
      else if (e.key === " " && (!e.target || e.target.tagName !== "BUTTON")) { play(); e.preventDefault(); }
    });
    window.addEventListener("hashchange", function () { var n = fromHash(); if (n !== null && n !== cur) { go(n); } });
    var n = fromHash();
    go(n === null ? 0 : n);
  }
  init();
})();
