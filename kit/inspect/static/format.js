// Formatting of times, durations and sizes for the inspector's lists and
// charts.
"use strict";

const fmtTime = (s) => (s ? new Date(s).toLocaleTimeString() : "");

function fmtDur(ms) {
  if (!(ms >= 0)) return "";
  if (ms < 1000) return Math.round(ms) + " ms";
  if (ms < 60000) return (ms / 1000).toFixed(1) + " s";
  const m = Math.floor(ms / 60000);
  return m < 60 ? `${m} min ${Math.round((ms % 60000) / 1000)} s` : `${Math.floor(m / 60)} h ${m % 60} min`;
}

function fmtBytes(n) {
  if (!n) return "0 B";
  const u = ["B", "KiB", "MiB", "GiB"];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(1) : n) + " " + u[i];
}

const dur = (a, b) => (a && b ? new Date(b) - new Date(a) : a ? Date.now() - new Date(a) : NaN);

// linkState says how a live session stands with its client: connected,
// detached (waiting for a resume) or paused (detached, its processes
// frozen), and whether it outlives the kit.
function linkState(s) {
  const link = s.connected ? "connected" : s.paused ? "paused" : "detached";
  return s.persistent ? link + " · persistent" : link;
}
