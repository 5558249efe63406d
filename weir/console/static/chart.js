// A small SVG line chart: drawLines(svg, times, [{name, values, color}], formatValue).
// No library: the console ships static files only.
(() => {
"use strict";

const SVG_NS = "http://www.w3.org/2000/svg";
const PALETTE = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2"];

function svgEl(tag, attrs, text) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, String(v));
  if (text !== undefined) el.textContent = text;
  return el;
}

function humanNumber(v) {
  if (v === null || v === undefined || Number.isNaN(v)) return "–";
  const abs = Math.abs(v);
  if (abs >= 1e9) return (v / 1e9).toFixed(1) + "G";
  if (abs >= 1e6) return (v / 1e6).toFixed(1) + "M";
  if (abs >= 1e3) return (v / 1e3).toFixed(1) + "k";
  if (abs >= 10 || abs === 0) return v.toFixed(0);
  return v.toFixed(2);
}

function drawLines(svg, times, series, format) {
  const fmt = format || humanNumber;
  const width = svg.clientWidth || 400;
  const height = svg.clientHeight || 150;
  const left = 44, right = 8, top = 8, bottom = 18;
  while (svg.firstChild) svg.removeChild(svg.firstChild);
  svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
  const values = series.flatMap((s) => s.values.filter((v) => v !== null && v !== undefined));
  const maxY = Math.max(1e-9, ...values) * 1.1;
  const n = times.length;
  const x = (i) => left + (n <= 1 ? 0 : (i * (width - left - right)) / (n - 1));
  const y = (v) => top + (height - top - bottom) * (1 - v / maxY);
  svg.appendChild(svgEl("line", {x1: left, x2: width - right, y1: y(0), y2: y(0), class: "axis"}));
  svg.appendChild(svgEl("line", {x1: left, x2: left, y1: top, y2: y(0), class: "axis"}));
  svg.appendChild(svgEl("text", {x: 2, y: top + 8}, fmt(maxY / 1.1)));
  svg.appendChild(svgEl("text", {x: 2, y: y(0)}, "0"));
  if (n === 0) {
    svg.appendChild(svgEl("text", {x: left + 10, y: height / 2}, "waiting for samples…"));
    return;
  }
  const span = n > 1 ? Math.round(times[n - 1] - times[0]) : 0;
  svg.appendChild(svgEl("text", {x: left, y: height - 4}, `-${span}s`));
  svg.appendChild(svgEl("text", {x: width - right - 22, y: height - 4}, "now"));
  series.forEach((s, k) => {
    const color = s.color || PALETTE[k % PALETTE.length];
    let d = "";
    let pen = false;
    s.values.forEach((v, i) => {
      if (v === null || v === undefined) { pen = false; return; }
      d += `${pen ? "L" : "M"}${x(i).toFixed(1)},${y(v).toFixed(1)}`;
      pen = true;
    });
    if (d) svg.appendChild(svgEl("path", {d, fill: "none", stroke: color, "stroke-width": 1.6}));
    const last = [...s.values].reverse().find((v) => v !== null && v !== undefined);
    svg.appendChild(svgEl("text", {x: left + 6, y: top + 8 + k * 11, fill: color},
                          `${s.name}: ${fmt(last)}`));
  });
}

window.weirChart = { drawLines, humanNumber };
})();
