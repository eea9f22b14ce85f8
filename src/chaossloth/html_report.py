"""The JSON report (``Result.to_json()``) as one self-contained HTML page (``--html PATH``).

The page needs no network: CSS and the script are inline, the plot is inline SVG, no font or
image is loaded, and its Content-Security-Policy forbids every fetch (``default-src 'none'``) and
runs only the page's own script (``script-src`` is that script's sha256).  It shows the stages
and their timings, the failure, the findings with their source lines, a timeline of the failing
schedule (one lane per task, built by the script; the accesses the diagnosis names are
highlighted, the source line shows on hover), the collision-window plot and, when stage 6 ran,
the diff of the patch.

Escaping (every value comes from user code: names, source lines, messages): text written by
Python goes through :func:`html.escape` (quotes too, so it is safe in attributes); the
timeline's data is embedded as JSON in a ``<script type="application/json">`` element with
``<``, ``>`` and ``&`` written as ``\\u003c``, ``\\u003e``, ``\\u0026`` (so ``</script>``
inside a string cannot end the element) and non-finite numbers as null; the script puts it in
the page with ``textContent`` and ``setAttribute`` only, never as markup.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
from html import escape
from typing import Any

from chaossloth import __version__
from chaossloth import report as rp
from chaossloth.jitter import human_seconds

#: steps of the failing schedule the timeline draws (a longer schedule is cut, and says so)
MAX_TIMELINE_STEPS = 1000

_CSS = """
:root{--fg:#1d2330;--muted:#5f6b7a;--line:#d8dde5;--bg:#f6f7f9;--card:#fff;--bad:#b3261e;
--good:#1b7f3b;--hl:#ffe08a;--rd:#2f6fdf;--wr:#c2410c}
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--fg);
background:var(--bg)}
main{max-width:1180px;margin:0 auto;padding:20px}
h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:0 0 10px}
section{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:14px 16px;
margin:14px 0}
code,pre,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12.5px}
pre{white-space:pre-wrap;word-break:break-word;margin:6px 0;background:var(--bg);padding:8px;
border-radius:6px}
.muted{color:var(--muted)}
.badge{display:inline-block;padding:2px 9px;border-radius:12px;font-weight:600;color:#fff}
.fail{background:var(--bad)}.pass{background:var(--good)}
.tag{display:inline-block;padding:1px 7px;border-radius:10px;background:#eef1f6;
border:1px solid var(--line);font-size:12px}
table{border-collapse:collapse;width:100%}
td,th{text-align:left;padding:3px 8px;border-bottom:1px solid var(--line);vertical-align:top}
th{font-weight:600;color:var(--muted)}
td.mono{white-space:nowrap}
.bar{height:10px;background:#8aa6d6;border-radius:3px;min-width:1px}
.stats{display:flex;flex-wrap:wrap;gap:18px;margin-top:8px}
.stats div b{display:block;font-size:16px}
.finding{border-left:4px solid var(--bad);padding-left:10px;margin:10px 0}
.tl-wrap{overflow:auto;max-height:560px;border:1px solid var(--line);border-radius:6px}
.tl-grid{display:grid;gap:0;width:max-content;min-width:100%}
.tl-grid>div{border-bottom:1px solid var(--line);border-right:1px solid #eef0f3;padding:4px;
min-height:30px}
.tl-head{position:sticky;top:0;background:#eef1f6;font-weight:600;z-index:2;text-align:center}
.tl-lane{position:sticky;left:0;background:#fff;font-weight:600;z-index:1;max-width:220px;
white-space:nowrap;overflow:hidden;text-overflow:ellipsis}
.tl-lane.cb{color:var(--muted);font-weight:400}
.tl-corner{z-index:3;left:0}
.acc,.aw{display:block;margin:2px 0;padding:1px 5px;border-radius:4px;white-space:nowrap;
max-width:12em;overflow:hidden;text-overflow:ellipsis;cursor:default;font-size:12px;font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
.acc.read{border:1px solid var(--rd);color:var(--rd)}
.acc.write{border:1px solid var(--wr);color:var(--wr)}
.acc.hl{background:var(--hl);font-weight:700;box-shadow:0 0 0 2px #e0a800}
.aw{color:var(--muted);border:1px dashed var(--line)}
.ran{background:#fafbfd}
#tip{position:fixed;display:none;z-index:10;max-width:640px;background:#1d2330;color:#fff;
padding:6px 8px;border-radius:6px;white-space:pre-wrap;pointer-events:none;
font:12px/1.4 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
.diff .add{color:#116329;background:#e6ffec;display:block}
.diff .del{color:#82071e;background:#ffebe9;display:block}
.diff .hunk{color:#0550ae;display:block}
.diff .ctx{display:block}
svg text{font:11px system-ui,sans-serif;fill:#1d2330}
.legend span{margin-right:14px}
"""

# The script builds the timeline from the embedded data; user values go in with textContent
# and setAttribute only.  It marks <body data-timeline="..."> when done (the tests read it).
_SCRIPT = """
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("cs-data").textContent);
  var root = document.getElementById("timeline");
  var tip = document.getElementById("tip");
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) { e.className = cls; }
    if (text !== undefined && text !== null) { e.textContent = String(text); }
    return e;
  }
  function where(site) {
    return site.file + ":" + site.line + "\\n" + (site.text || "");
  }
  function withTip(e, text) {
    e.setAttribute("data-tip", text);
    return e;
  }
  // a callback's step that touched no shared state and did not suspend is not drawn
  var all = data.timeline || [];
  var steps = all.filter(function (s) {
    return s.is_task || (s.accesses || []).length > 0 || s.await;
  });
  if (!all.length) {
    root.appendChild(el("p", "muted", data.timeline_note));
    document.body.setAttribute("data-timeline", "empty");
    return;
  }
  var lanes = [];
  var laneOf = new Map();
  steps.forEach(function (s) {
    if (!laneOf.has(s.task)) { laneOf.set(s.task, lanes.length); lanes.push(s); }
  });
  var wrap = el("div", "tl-wrap");
  var grid = el("div", "tl-grid");
  grid.style.gridTemplateColumns =
    "max-content repeat(" + steps.length + ", minmax(4em, max-content))";
  grid.appendChild(el("div", "tl-head tl-lane tl-corner", "task"));
  steps.forEach(function (s) { grid.appendChild(el("div", "tl-head", s.step)); });
  lanes.forEach(function (lane, li) {
    var label = el("div", "tl-lane" + (lane.is_task ? "" : " cb"), lane.task);
    label.setAttribute("title", lane.task);
    grid.appendChild(label);
    steps.forEach(function (s) {
      var cell = el("div", laneOf.get(s.task) === li ? "ran" : "");
      if (laneOf.get(s.task) === li) {
        (s.accesses || []).forEach(function (a) {
          var cls = "acc " + (a.kind === "write" ? "write" : "read") + (a.highlight ? " hl" : "");
          var label = (a.kind === "write" ? "W " : "R ") + a.resource;
          cell.appendChild(withTip(el("span", cls, label), a.kind + " " + a.resource + "\\n" +
            where(a)));
        });
        if (s.await) {
          cell.appendChild(withTip(el("span", "aw", s.await.text || "await"),
            "suspends at " + where(s.await)));
        }
      }
      grid.appendChild(cell);
    });
  });
  wrap.appendChild(grid);
  root.appendChild(wrap);
  if (data.timeline_note) { root.appendChild(el("p", "muted", data.timeline_note)); }
  if (steps.length < all.length) {
    root.appendChild(el("p", "muted", (all.length - steps.length) + " of " + all.length +
      " steps not drawn: callbacks that touched no shared state"));
  }
  root.setAttribute("data-lanes", String(lanes.length));
  document.addEventListener("mouseover", function (ev) {
    var t = ev.target.closest ? ev.target.closest("[data-tip]") : null;
    if (!t) { tip.style.display = "none"; return; }
    tip.textContent = t.getAttribute("data-tip");
    tip.style.display = "block";
  });
  document.addEventListener("mousemove", function (ev) {
    tip.style.left = Math.min(ev.clientX + 12, window.innerWidth - 300) + "px";
    tip.style.top = (ev.clientY + 14) + "px";
  });
  document.body.setAttribute("data-timeline", "rendered");
})();
"""


def _e(value: Any) -> str:
    """Text for the page: escaped, quotes included (safe in an attribute too)."""
    return escape("" if value is None else str(value), quote=True)


def _finite(x: Any) -> Any:
    """`x` with every non-finite float replaced by None (JSON.parse rejects NaN)."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {str(k): _finite(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_finite(v) for v in x]
    return x


def embed_json(value: Any) -> str:
    """`value` as JSON text safe inside a <script> element: no '<', '>' or '&' appears in it
    (each is a \\u escape inside a JSON string; outside strings JSON has none), and
    json.dumps's default ensure_ascii writes U+2028/U+2029 as escapes."""
    text = json.dumps(_finite(value), allow_nan=False, default=str)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _where(site: dict[str, Any] | None) -> str:
    if not site:
        return ""
    return f"{rp.relative_path(str(site.get('file', '')))}:{site.get('line', '')}"


def _num(x: Any) -> float | None:
    ok = isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
    return float(x) if ok else None


# ------------------------------------------------------------------ sections


def _header(report: dict[str, Any]) -> str:
    prog = report.get("program") or {}
    path = rp.relative_path(str(prog.get("path", "")))
    what = prog.get("scenario") or ".".join(str(prog[k]) for k in ("cls", "method") if prog.get(k))
    failed = report.get("verdict") == "fail"
    hazard = report.get("hazard") or ""
    badge = (
        f'<span class="badge fail">FAIL: {_e(rp.HAZARD_TITLE.get(hazard, hazard))}</span>'
        if failed
        else '<span class="badge pass">PASS</span>'
    )
    stats = [
        ("executions", report.get("executions")),
        ("distinct traces", report.get("distinct_traces")),
        ("exploration", "complete" if report.get("complete") else "incomplete"),
        ("strategy", report.get("strategy")),
        ("timers", report.get("timers")),
    ]
    if failed:
        stats += [
            ("failing schedule", f"{report.get('schedule_steps')} steps"),
            ("deviations", report.get("deviations")),
            (
                "replay reproduces",
                {True: "yes", False: "no"}.get(report.get("replay_reproduces"), "-"),
            ),
        ]
    rate = report.get("natural_failure_rate") or {}
    if _num(rate.get("estimate")) is not None:
        stats.append(
            (
                "stock-loop failure rate",
                f"{100 * rate['estimate']:.1f}% ({rate.get('failures')}/{rate.get('runs')})",
            )
        )
    cells = "".join(f"<div><span class=muted>{_e(k)}</span><b>{_e(v)}</b></div>" for k, v in stats)
    replay = ""
    if report.get("schedule_file"):
        replay = f"<p>replay: <code>chaossloth replay {_e(report['schedule_file'])}</code></p>"
    return (
        f"<section id=summary><h1>ChaosSloth: <span class=mono>{_e(path)}</span> "
        f"<span class=mono>{_e(what)}</span></h1>{badge}"
        f'<div class="stats">{cells}</div>{replay}</section>'
    )


def _stages(report: dict[str, Any]) -> str:
    stages = report.get("stages") or []
    if not stages:
        return ""
    longest = max((_num(s.get("seconds")) or 0.0 for s in stages), default=0.0) or 1.0
    rows = []
    for i, s in enumerate(stages, 1):
        secs = _num(s.get("seconds")) or 0.0
        note = ""
        if s.get("reran"):
            note = f"re-ran {_e(s['reran'])}: {_e(s.get('note', ''))}"
        width = 100.0 * secs / longest
        rows.append(
            f"<tr><td>{i}</td><td>{_e(s.get('name'))}</td><td class=mono>{secs:.3f} s</td>"
            f'<td style="width:40%"><div class=bar style="width:{width:.1f}%"></div></td>'
            f"<td class=muted>{note}</td></tr>"
        )
    return (
        "<section id=stages><h2>Stages</h2><table><tr><th>#</th><th>stage</th><th>time</th>"
        f"<th></th><th></th></tr>{''.join(rows)}</table></section>"
    )


def _failure(report: dict[str, Any]) -> str:
    f = report.get("failure")
    if not f:
        return ""
    tb = f"<pre>{_e(f['traceback'])}</pre>" if f.get("traceback") else ""
    return (
        f"<section id=failure><h2>Failure</h2><p>in <b>{_e(f.get('task'))}</b>: "
        f"<code>{_e(f.get('type'))}: {_e(f.get('message'))}</code></p>{tb}</section>"
    )


def _findings(report: dict[str, Any]) -> str:
    findings = report.get("findings") or []
    if not findings:
        if report.get("verdict") != "fail":
            return ""
        return "<section id=findings><h2>Findings</h2><p class=muted>none</p></section>"
    parts = []
    for f in findings:
        rows = "".join(
            f"<tr><td>{_e(s.get('role'))}</td><td class=mono>{_e(_where(s))}</td>"
            f"<td><code>{_e(s.get('text'))}</code></td></tr>"
            for s in f.get("lines") or []
        )
        table = f"<table>{rows}</table>" if rows else ""
        causal = " <span class=tag>causal</span>" if f.get("causal") else ""
        parts.append(
            f'<div class="finding"><p><span class=tag>{_e(f.get("hazard"))}</span> '
            f"<span class=tag>{_e(f.get('pattern'))}</span>{causal} on "
            f"<code>{_e(f.get('resource'))}</code></p><p>{_e(f.get('text'))}</p>{table}</div>"
        )
    return f"<section id=findings><h2>Findings</h2>{''.join(parts)}</section>"


def _timeline_data(report: dict[str, Any]) -> dict[str, Any]:
    """The data the script draws: the steps with relative paths, cut at MAX_TIMELINE_STEPS."""
    steps = report.get("timeline") or []
    note = ""
    if not steps:
        note = (
            "no failing schedule: every explored schedule passed"
            if report.get("verdict") != "fail"
            else "the report has no failing schedule to draw (the failure was seen on the stock "
            "loop only)"
        )
    elif len(steps) > MAX_TIMELINE_STEPS:
        note = f"the first {MAX_TIMELINE_STEPS} of {len(steps)} steps"
        steps = steps[:MAX_TIMELINE_STEPS]

    def site(s: dict[str, Any]) -> dict[str, Any]:
        return dict(s, file=rp.relative_path(str(s.get("file", ""))))

    out = []
    for s in steps:
        aw = s.get("await")
        out.append(
            {
                "step": s.get("step"),
                "task": str(s.get("task", "")),
                "is_task": bool(s.get("is_task", True)),
                "accesses": [site(a) for a in s.get("accesses") or []],
                "await": site(aw) if aw else None,
            }
        )
    return {"timeline": out, "timeline_note": note}


def _plot(report: dict[str, Any]) -> str:
    """The collision-window sweep: the share of failing runs at each offset (log scale), the
    credible interval shaded and the estimate as a line when the data bound the window."""
    cw = report.get("collision_window") or {}
    points = [
        (d, p["failures"] / p["runs"], p)
        for p in cw.get("per_offset") or []
        if (d := _num(p.get("offset_seconds"))) is not None
        and d > 0
        and isinstance(p.get("runs"), int)
        and p["runs"] > 0
    ]
    sentence = f"<p>{_e(cw.get('sentence'))}</p>" if cw.get("sentence") else ""
    if not points:
        why = cw.get("error") or "not measured (stage 4 did not run, or the program has one worker)"
        return (
            f"<section id=window><h2>Collision window</h2>{sentence}"
            f"<p class=muted>{_e(why)}</p></section>"
        )
    w, h, left, right, top, bottom = 680, 250, 52, 16, 14, 40
    lo, hi = math.log10(points[0][0]), math.log10(points[-1][0])
    if hi - lo < 1e-9:
        lo, hi = lo - 0.5, hi + 0.5

    def x(d: float) -> float:
        t = (math.log10(d) - lo) / (hi - lo)
        return left + min(1.0, max(0.0, t)) * (w - left - right)

    def y(share: float) -> float:
        return top + (1 - share) * (h - top - bottom)

    parts = [
        (
            f'<svg id="window-plot" xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
            f'viewBox="0 0 {w} {h}" role="img" aria-label="failing share of runs by offset">'
        )
    ]
    est, low, high = (_num(cw.get(k)) for k in ("estimate_seconds", "low_seconds", "high_seconds"))
    if low is not None and high is not None and low > 0 and high > 0:
        x0, x1 = x(low), x(high)
        parts.append(
            f'<rect x="{x0:.1f}" y="{top}" width="{max(1.0, x1 - x0):.1f}" '
            f'height="{h - top - bottom}" fill="#ffe08a" opacity="0.6"/>'
        )
    if est is not None and est > 0:
        xe = x(est)
        parts.append(
            f'<line x1="{xe:.1f}" x2="{xe:.1f}" y1="{top}" y2="{h - bottom}" stroke="#b3261e" '
            'stroke-width="2" stroke-dasharray="4 3"/>'
        )
    for share in (0.0, 0.5, 1.0):
        yy = y(share)
        parts.append(
            f'<line x1="{left}" x2="{w - right}" y1="{yy:.1f}" y2="{yy:.1f}" stroke="#d8dde5"/>'
            f'<text x="{left - 6}" y="{yy + 4:.1f}" text-anchor="end">{share:.0%}</text>'
        )
    for k in range(math.ceil(lo - 1e-9), math.floor(hi + 1e-9) + 1):
        xx = x(10.0**k)
        parts.append(
            f'<line x1="{xx:.1f}" x2="{xx:.1f}" y1="{h - bottom}" y2="{h - bottom + 4}" '
            f'stroke="#5f6b7a"/><text x="{xx:.1f}" y="{h - bottom + 16}" text-anchor="middle">'
            f"{_e(human_seconds(10.0**k))}</text>"
        )
    parts.append(
        f'<text x="{(left + w - right) / 2:.0f}" y="{h - 6}" text-anchor="middle">'
        "offset between the two requests' arrivals (log scale)</text>"
    )
    for d, share, p in points:
        colour = "#b3261e" if share > 0.5 else "#2f6fdf"
        parts.append(
            f'<circle class="obs" cx="{x(d):.1f}" cy="{y(share):.1f}" r="4" fill="{colour}">'
            f"<title>{_e(human_seconds(d))}: {p['failures']}/{p['runs']} runs failed</title>"
            "</circle>"
        )
    parts.append("</svg>")
    legend = (
        '<p class="legend muted"><span>dots: share of runs that failed at each offset</span>'
        + (
            "<span>dashed line: the window's estimate; shaded: its 95% credible interval</span>"
            if est is not None
            else ""
        )
        + "</p>"
    )
    return (
        f"<section id=window><h2>Collision window</h2>{sentence}{''.join(parts)}{legend}</section>"
    )


def _diff(report: dict[str, Any]) -> str:
    rep = report.get("repair")
    if not rep:
        return ""
    if rep.get("verified"):
        scope = "complete" if rep.get("complete") else "incomplete"
        status = f"verified on {rep.get('executions', 0)} schedules ({scope})"
    else:
        status = f"NOT verified ({rep.get('status', '')})"
    locks = ", ".join(
        f"{lk.get('owner', '')}.{lk.get('name', '')} "
        f"({', '.join(str(r) for r in lk.get('resources') or ())})"
        for lk in rep.get("locks") or []
    )
    locks_p = f"<p>locks: <code>{_e(locks)}</code></p>" if locks else ""
    diff = rep.get("diff") or ""
    lines = []
    for line in diff.splitlines():
        cls = ""
        if line.startswith(("+++", "---")):
            cls = "hunk"
        elif line.startswith("+"):
            cls = "add"
        elif line.startswith("-"):
            cls = "del"
        elif line.startswith("@@"):
            cls = "hunk"
        lines.append(f'<span class="{cls or "ctx"}">{_e(line) or " "}</span>')
    body = (
        f'<pre class="diff">{"".join(lines)}</pre>'
        if diff
        else f"<p class=muted>{_e(rep.get('explanation') or 'no diff')}</p>"
    )
    return f"<section id=diff><h2>Patch: {_e(status)}</h2>{locks_p}{body}</section>"


def to_html(report: dict[str, Any]) -> str:
    """The page of a JSON report (``Result.to_json()``), as text."""
    script_hash = base64.b64encode(hashlib.sha256(_SCRIPT.encode("utf-8")).digest()).decode()
    csp = (
        "default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
        f"script-src 'sha256-{script_hash}'"
    )
    prog = report.get("program") or {}
    title = f"ChaosSloth report: {rp.relative_path(str(prog.get('path', '')))}"
    timeline = (
        "<section id=timeline-section><h2>Timeline of the failing schedule</h2>"
        '<p class="muted">one lane per task; R/W: read/write of a resource, highlighted: the '
        "accesses the diagnosis names; hover an access for its source line</p>"
        "<div id=timeline><noscript>the timeline needs JavaScript</noscript></div></section>"
    )
    body = "".join(
        (
            _header(report),
            _failure(report),
            _findings(report),
            timeline,
            _plot(report),
            _diff(report),
            _stages(report),
        )
    )
    return (
        "<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8>"
        f'<meta http-equiv="Content-Security-Policy" content="{_e(csp)}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<meta name=generator content="chaossloth {_e(__version__)}">'
        f"<title>{_e(title)}</title><style>{_CSS}</style></head>\n<body><main>{body}</main>"
        '<div id="tip"></div>\n'
        f'<script type="application/json" id="cs-data">{embed_json(_timeline_data(report))}'
        f"</script>\n<script>{_SCRIPT}</script>\n</body></html>\n"
    )


def write_html(report: dict[str, Any], path: str) -> str:
    """Writes the page of `report` to `path` (report.write_output's rules: atomic, a symlink
    followed, the program's own files refused; "-": stdout); returns the file written."""
    return rp.write_report_file(path, to_html(report))
