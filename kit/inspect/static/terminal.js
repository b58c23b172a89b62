// The inspector's terminal and raw-event lists: a session's output cut
// into lines with their colours, drawn by a virtual list.
"use strict";

// promptHeader starts a prompt's output with a line naming it.
function promptHeader(v, id) {
  if (!id || v.prompt === id) return;
  v.prompt = id;
  endLine(v);
  pushLine(v, [], "prompt");
  v.lines[v.lines.length - 1].prompt = id; // its text is looked up when drawn
}

function pushLine(v, segs, cls) {
  v.lines.push({ segs, cls });
  if (v.lines.length > maxLines) v.lines.splice(0, v.lines.length - maxLines * 0.9);
}

function endLine(v) {
  v.cur = null;
}

// The terminal: text is cut into lines; each line is segments of text
// with the SGR state they were written in. Only \n, \r and SGR
// sequences (ESC [ ... m) act; other escape sequences are dropped.
function newSGR() {
  return { fg: null, bg: null, bold: false, dim: false, italic: false, under: false, inverse: false };
}

function sgrKey(s) {
  const cls = [];
  let style = "";
  let fg = s.fg, bg = s.bg;
  if (s.inverse) [fg, bg] = [bg ?? "d-bg", fg ?? "d-fg"];
  const colour = (c, kind) => {
    if (c == null) return;
    if (typeof c === "number") cls.push(`${kind}${c}`);
    else if (c.startsWith("d-")) cls.push(`${kind}${c}`);
    else style += `${kind === "f" ? "color" : "background-color"}:${c};`;
  };
  colour(fg, "f");
  colour(bg, "b");
  if (s.bold) cls.push("bold");
  if (s.dim) cls.push("dim");
  if (s.italic) cls.push("italic");
  if (s.under) cls.push("under");
  return [cls.join(" "), style];
}

function xterm256(n) {
  if (n < 16) return n;
  if (n < 232) {
    const c = [0, 95, 135, 175, 215, 255];
    n -= 16;
    return `rgb(${c[Math.floor(n / 36)]},${c[Math.floor(n / 6) % 6]},${c[n % 6]})`;
  }
  const g = 8 + (n - 232) * 10;
  return `rgb(${g},${g},${g})`;
}

function applySGR(s, params) {
  const ps = params === "" ? [0] : params.split(/[;:]/).map((x) => (x === "" ? 0 : Number(x)));
  for (let i = 0; i < ps.length; i++) {
    const p = ps[i];
    if (p === 0) Object.assign(s, newSGR());
    else if (p === 1) s.bold = true;
    else if (p === 2) s.dim = true;
    else if (p === 3) s.italic = true;
    else if (p === 4) s.under = true;
    else if (p === 7) s.inverse = true;
    else if (p === 22) s.bold = s.dim = false;
    else if (p === 23) s.italic = false;
    else if (p === 24) s.under = false;
    else if (p === 27) s.inverse = false;
    else if (p >= 30 && p <= 37) s.fg = p - 30;
    else if (p === 39) s.fg = null;
    else if (p >= 40 && p <= 47) s.bg = p - 40;
    else if (p === 49) s.bg = null;
    else if (p >= 90 && p <= 97) s.fg = p - 90 + 8;
    else if (p >= 100 && p <= 107) s.bg = p - 100 + 8;
    else if (p === 38 || p === 48) {
      let c = null;
      if (ps[i + 1] === 5 && i + 2 < ps.length) { c = xterm256(ps[i + 2] & 255); i += 2; }
      else if (ps[i + 1] === 2 && i + 4 < ps.length) { c = `rgb(${ps[i + 2] & 255},${ps[i + 3] & 255},${ps[i + 4] & 255})`; i += 4; }
      else break;
      if (p === 38) s.fg = c; else s.bg = c;
    }
  }
}

// write adds a chunk of a stream to the session's terminal.
function write(v, text, isErr) {
  text = v.pend + text;
  v.pend = "";
  let i = 0, from = 0;
  const flush = (to) => {
    if (to <= from) return;
    if (!v.cur) {
      v.cur = { segs: [], cls: "" };
      pushLine(v, v.cur.segs, "");
      v.cur = v.lines[v.lines.length - 1];
    }
    const [cls, style] = sgrKey(v.sgr);
    const c = (isErr ? "stderr " : "") + cls;
    const last = v.cur.segs[v.cur.segs.length - 1];
    if (last && last[1] === c && last[2] === style) last[0] += text.slice(from, to);
    else v.cur.segs.push([text.slice(from, to), c, style]);
    if (isErr) v.cur.cls = "err";
  };
  while (i < text.length) {
    const ch = text.charCodeAt(i);
    if (ch === 10) { // \n
      flush(i);
      if (!v.cur) pushLine(v, [], isErr ? "err" : "");
      v.cur = null;
      from = ++i;
    } else if (ch === 13) { // \r: a lone one rewrites the line
      flush(i);
      if (text.charCodeAt(i + 1) !== 10 && v.cur && i + 1 < text.length) v.cur.segs.length = 0;
      from = ++i;
    } else if (ch === 27) {
      flush(i);
      const m = /^\x1b(?:\[([0-9;:?]*)([@-~])|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])/.exec(text.slice(i, i + 256));
      if (!m) {
        if (text.length - i < 64) { v.pend = text.slice(i); return; } // cut mid-sequence: wait for the rest
        i++;
      } else {
        if (m[2] === "m") applySGR(v.sgr, m[1]);
        i += m[0].length;
      }
      from = i;
    } else if (ch < 32 && ch !== 9) {
      flush(i);
      from = ++i;
    } else i++;
  }
  flush(text.length);
}

function termRow(line) {
  if (line.prompt) {
    const p = current()?.prompts?.find((x) => x.id === line.prompt);
    return el("div", { class: "line prompt" }, el("span", { class: "gutter" }), `▶ ${line.prompt}${p ? "  " + p.text.slice(0, 300) : ""}`);
  }
  const row = el("div", { class: "line " + (line.cls || "") }, el("span", { class: "gutter", title: line.cls === "err" ? "stderr" : null }, line.cls === "err" ? "err" : ""));
  for (const [text, cls, style] of line.segs) {
    const s = el("span", { class: cls || null }, text.length > 4000 ? text.slice(0, 4000) + "…" : text);
    if (style) s.style.cssText = style;
    row.append(s);
  }
  return row;
}

function rawRow(r) {
  const text = r.text.length > 2000 ? r.text.slice(0, 2000) + "…" : r.text;
  return el("div", { class: "line" + (r.kind === "gap" ? " gap" : ""), "data-seq": r.seq != null ? String(r.seq) : null },
    el("span", { class: "seq" }, r.seq != null ? String(r.seq) : ""),
    el("span", { class: "kind" }, (r.id ? `[${r.id}] ` : "") + r.kind), " ", text);
}

// VList draws only the rows in sight: a session's output may be
// hundreds of thousands of lines.
class VList {
  constructor(box, row, count) {
    this.box = box;
    this.row = row;
    this.count = count;
    this.follow = true;
    this.spacer = el("div", { class: "spacer" });
    this.win = el("div", { class: "win" });
    this.spacer.append(this.win);
    box.append(this.spacer);
    this.range = "";
    box.addEventListener("scroll", () => {
      this.follow = box.scrollTop + box.clientHeight >= box.scrollHeight - rowH;
      this.draw();
    });
  }
  show(v) {
    this.v = v;
    this.follow = true;
    this.range = "";
    this.dirty();
  }
  dirty() {
    if (this.pending) return;
    this.pending = true;
    this.force = true;
    requestAnimationFrame(() => { this.pending = false; this.draw(); });
  }
  draw() {
    const box = this.box;
    if (!this.v || box.offsetParent === null) return;
    const n = this.count(this.v);
    this.spacer.style.height = n * rowH + "px";
    if (this.follow) box.scrollTop = box.scrollHeight;
    const first = Math.max(0, Math.floor(box.scrollTop / rowH) - 4);
    const last = Math.min(n, first + Math.ceil(box.clientHeight / rowH) + 8);
    const range = `${first}:${last}:${n}`;
    if (range === this.range && !this.force) return;
    this.range = range;
    this.force = false;
    this.win.style.top = first * rowH + "px";
    const rows = [];
    for (let i = first; i < last; i++) rows.push(this.row(this.v, i));
    if (n === 0) rows.push(el("div", { class: "line meta" }, current()?.live === false ? "the box keeps no output of an ended session: this page shows what it saw while it followed it" : "no output yet"));
    this.win.replaceChildren(...rows);
  }
}
