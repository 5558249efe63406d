"""The report: summary table, anomalies with the operations around them, and plots.

Written to the report directory::

    history.jsonl      the history (one operation per line, see weir.verify.history)
    results.json       the checker's result (counts, anomalies, fault windows, stats)
    summary.md         the summary table and the anomalies, as text
    latency.png        send latency over time, fault windows shaded
    throughput.png     acknowledged sends per second, fault windows shaded
    index.html         all of the above on one page
"""

from __future__ import annotations

import html
import json
from collections import Counter
from pathlib import Path
from typing import Any

from weir.verify.checker import CheckResult, FaultWindow
from weir.verify.history import Op, pair_ops

CONTEXT = 3  # operations shown on either side of an anomaly's operations
FAULT_COLORS = {"kill": "tab:red", "pause": "tab:orange", "partition": "tab:purple",
                "disk-full": "tab:brown", "controller": "tab:pink", "zookeeper": "tab:olive"}


def _fmt(x: float | None, unit: str = "s") -> str:
    return "never" if x is None else f"{x:.2f} {unit}"


def summary_lines(result: CheckResult, meta: dict[str, Any]) -> list[str]:
    s = result.stats
    nemesis = ",".join(meta.get("nemesis") or []) or "none"
    lines = ["# weir verify", "",
             (f"workload `{meta.get('workload')}`, nemesis `{nemesis}`,"
              f" seed {meta.get('seed')}, {s['duration_s']:.0f} s"), "",
             f"**{'VALID' if result.valid else 'ANOMALIES FOUND'}**", "",
             "| figure | value |", "|---|---|",
             f"| operations (invocations) | {s['operations']} |",
             f"| sends | {s['sends']} |", f"| acks (ok) | {s['acks']} |",
             f"| sends indeterminate (info) | {s['send_info']} |",
             f"| sends failed | {s['send_fail']} |",
             f"| sends never completed | {s['send_pending']} |",
             f"| records read | {s['records_read']} |"]
    for f, n in sorted(s["by_function"].items()):
        lines.append(f"| `{f}` invocations | {n} |")
    lines += ["", "| anomaly | count |", "|---|---|"]
    lines += [f"| {kind} | {n} |" for kind, n in result.counts.items()]
    lines += ["", "| window | fault | target | start | duration | unavailability |",
              "|---|---|---|---|---|---|"]
    for w in result.windows:
        dur = None if w.end is None else w.end - w.start
        lines.append(f"| {w.window} | {w.fault} | {w.target} | {w.start:.1f} s | "
                     f"{_fmt(dur)} | {_fmt(w.unavailable_s)} |")
    per_fault = unavailability_by_fault(result.windows)
    if per_fault:
        lines += ["", "| fault | windows | max unavailability | mean unavailability |",
                  "|---|---|---|---|"]
        for fault, (n, worst, mean) in sorted(per_fault.items()):
            lines.append(f"| {fault} | {n} | {_fmt(worst)} | {_fmt(mean)} |")
    return lines


def unavailability_by_fault(windows: list[FaultWindow]
                            ) -> dict[str, tuple[int, float | None, float | None]]:
    out: dict[str, tuple[int, float | None, float | None]] = {}
    for fault in sorted({w.fault for w in windows}):
        ws = [w for w in windows if w.fault == fault]
        vals = [w.unavailable_s for w in ws if w.unavailable_s is not None]
        out[fault] = (len(ws), max(vals) if vals else None,
                      round(sum(vals) / len(vals), 3) if vals else None)
    return out


def anomaly_context(result: CheckResult, history: list[Op], limit: int = 50) -> list[str]:
    """Each anomaly (up to ``limit``) with the operations around the ones it names."""
    lines: list[str] = []
    by_index = {op["index"]: op for op in history}
    for a in result.anomalies[:limit]:
        lines += ["", f"## {a.kind}: {a.message}", "", "```"]
        shown: set[int] = set()
        for i in a.ops:
            shown.update(range(max(i - CONTEXT, 0), i + CONTEXT + 1))
        for i in sorted(shown):
            op = by_index.get(i)
            if op is not None:
                mark = ">>" if i in a.ops else "  "
                lines.append(f"{mark} {_short(op)}")
        lines.append("```")
    if len(result.anomalies) > limit:
        lines.append(f"\n... {len(result.anomalies) - limit} more in results.json")
    return lines


def _short(op: Op, width: int = 220) -> str:
    text = json.dumps(op, separators=(",", ":"))
    return text if len(text) <= width else text[:width] + "..."


def plot(history: list[Op], windows: list[FaultWindow], out_dir: Path) -> list[str]:
    """latency.png and throughput.png; returns the file names written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sends = [(inv, done) for inv, done in pair_ops(history) if inv["f"] == "send"]
    end = history[-1]["time"] if history else 1.0
    written = []

    fig, ax = plt.subplots(figsize=(11, 4))
    for kind, color in (("ok", "tab:blue"), ("info", "tab:red"), ("fail", "black")):
        pts = [(inv["time"], (done["time"] - inv["time"]) * 1000) for inv, done in sends
               if done is not None and done["type"] == kind]
        if pts:
            ax.scatter([p[0] for p in pts], [p[1] for p in pts], s=3, color=color,
                       label=f"send {kind}", alpha=0.6)
    ax.set_yscale("log")
    ax.set_xlabel("time (s)")
    ax.set_ylabel("latency (ms)")
    ax.set_title("send latency (acks=all)")
    _shade(ax, windows, end)
    ax.legend(loc="upper right", fontsize=7, markerscale=3)
    fig.tight_layout()
    fig.savefig(out_dir / "latency.png", dpi=100)
    plt.close(fig)
    written.append("latency.png")

    fig, ax = plt.subplots(figsize=(11, 4))
    acked = Counter(int(done["time"]) for _, done in sends
                    if done is not None and done["type"] == "ok")
    reads = Counter()
    for op in history:
        if op.get("f") == "poll" and op["type"] == "ok" and op["process"] != "final":
            reads[int(op["time"])] += len(op["value"].get("records", []))
    xs = list(range(int(end) + 1))
    ax.plot(xs, [acked.get(x, 0) for x in xs], label="acks/s", color="tab:blue")
    ax.plot(xs, [reads.get(x, 0) for x in xs], label="records read/s", color="tab:green",
            alpha=0.6)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("per second")
    ax.set_title("throughput")
    _shade(ax, windows, end)
    ax.legend(loc="upper right", fontsize=7)
    fig.tight_layout()
    fig.savefig(out_dir / "throughput.png", dpi=100)
    plt.close(fig)
    written.append("throughput.png")
    return written


def _shade(ax: Any, windows: list[FaultWindow], end: float) -> None:
    labelled: set[str] = set()
    for w in windows:
        color = FAULT_COLORS.get(w.fault, "tab:gray")
        label = None if w.fault in labelled else w.fault
        labelled.add(w.fault)
        ax.axvspan(w.start, w.end if w.end is not None else end, color=color, alpha=0.15,
                   label=label)


def write_report(out_dir: str | Path, history: list[Op], result: CheckResult,
                 meta: dict[str, Any]) -> Path:
    """Everything listed in the module doc; returns the path of index.html."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps({"meta": meta, **result.to_json()}, indent=1))
    text = summary_lines(result, meta) + anomaly_context(result, history)
    (out / "summary.md").write_text("\n".join(text) + "\n")
    try:
        images = plot(history, result.windows, out)
    except ImportError:
        images = []
    body = [f"<h1>weir verify: {'valid' if result.valid else 'anomalies found'}</h1>",
            "<pre>" + html.escape("\n".join(summary_lines(result, meta)[2:])) + "</pre>"]
    body += [f'<p><img src="{name}" alt="{name}"></p>' for name in images]
    if not images:
        body.append("<p>(matplotlib is not installed: no plots; pip install weir[verify])</p>")
    ctx = anomaly_context(result, history)
    if ctx:
        body.append("<h2>Anomalies</h2><pre>" + html.escape("\n".join(ctx)) + "</pre>")
    body.append('<p>Files: <a href="history.jsonl">history.jsonl</a>, '
                '<a href="results.json">results.json</a>, '
                '<a href="summary.md">summary.md</a></p>')
    index = out / "index.html"
    index.write_text("<!doctype html><html><head><meta charset=utf-8><title>weir verify"
                     "</title><style>body{font-family:sans-serif;margin:2em}pre{font-size:12px}"
                     "</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n")
    return index
