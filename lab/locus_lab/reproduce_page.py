"""The page of `locus reproduce` (reproduce.py): reproduce.md, with the plots beside it in the
experiments' folders, and reproduce.html, the same page in one self-contained file (the plots
embedded as data URIs) that opens in any browser.

Both are written from reproduce.json alone. In the HTML, the summary table has the id
`summary` and one row per headline in the JSON's order (`data-seed`, `data-agrees`), and each
image records, once loaded, its natural size in `data-loaded` (a test reads it back from a
headless browser's DOM).
"""
from __future__ import annotations

import base64
import html
from pathlib import Path

SEEDS = {
    "000": "Feng & Berger, A Locality-Improving Dynamic Memory Allocator (Vam), MSP 2005",
    "001": "Jula & Rauchwerger, Two Memory Allocators that Use Hints to Improve Locality",
    "002": "Li & Gulila, Efficient Memory Allocator with Better Performance and Less Memory "
           "Usage (LF)",
    "003": "Li, Mohanty & Kavi, A Page-based Hybrid (Software-Hardware) Dynamic Memory "
           "Allocator",
    "004": "Berger, Zorn & McKinley, Reconsidering Custom Memory Allocation (Reap)",
}
SUMMARY_HEAD = ("seed", "headline", "the paper", "measured here", "shape agrees")
MARKS = {"yes": "✓ yes", "partly": "~ partly", "no": "✗ no"}


def _intro(data: dict) -> list:
    """The page's opening lines, as (kind, text) pairs: "p" a paragraph, "code" a command."""
    m = data.get("machine", {})
    n = sum(len(e["headlines"]) for e in data["experiments"])
    agree = sum(1 for e in data["experiments"] for h in e["headlines"] if h["agrees"] == "yes")
    part = sum(1 for e in data["experiments"] for h in e["headlines"]
               if h["agrees"] == "partly")
    failed = [e["key"] for e in data["experiments"] if e["status"] != "ok"]
    out = [("p", f"Made by `{data.get('command', 'locus reproduce')}` on {data.get('created')}"
                 f" in {data.get('wall_s', 0) / 60:.1f} minutes, on {m.get('cpu', '?')} "
                 f"({m.get('cores', '?')} cores; load average {data.get('load_at_start')} at "
                 "the start)." + (" With --quick: tiny inputs, for testing; the figures mean "
                                  "little." if data.get("quick") else "")),
           ("p", f"Of {n} headline figures, the shape agrees for {agree}, partly for {part}, "
                 f"and not for {n - agree - part}."
                 + (f" Not measured (see below): {', '.join(failed)}." if failed else "")),
           ("p", "Every experiment is scaled down (all of them fit in well under half an "
                 "hour on two cores) and measured on this machine's programs and allocators, "
                 "not the papers': the "
                 "question is whether the shape of each result holds (which design is ahead, "
                 "roughly by how much), not whether the numbers match. Each section says how it "
                 "is scaled and gives the command that reproduces it alone.")]
    return out


def _summary_rows(data: dict) -> list:
    return [(h["seed"], h["what"], h["paper"], h["measured"], h["agrees"])
            for e in data["experiments"] for h in e["headlines"]]


def _md_cell(text: str) -> str:
    return str(text).replace("|", "&#124;").replace("\n", " ")


def _md(data: dict) -> str:
    out = ["# Reproducing the seeds' headline results", ""]
    for _, text in _intro(data):
        out += [text, ""]
    out += ["## Summary", "", "| " + " | ".join(SUMMARY_HEAD) + " |",
            "|---|---|---|---|---|"]
    out += ["| " + " | ".join(_md_cell(MARKS.get(c, c) if i == 4 else c)
                              for i, c in enumerate(row)) + " |" for row in _summary_rows(data)]
    out.append("")
    for seed in sorted({e["seed"] for e in data["experiments"]}):
        out += [f"## Seed {seed}: {SEEDS.get(seed, '')}", ""]
        for e in (x for x in data["experiments"] if x["seed"] == seed):
            out += [f"### {e['title']}", "", f"Reproduce alone: `{e['command']}`", "",
                    f"Scaled down: {e['scaled']}. Took {e['seconds']:.0f} s.", ""]
            if e["status"] != "ok":
                out += [f"**Not measured: {e['status']}** ({_md_cell(e.get('error', ''))}; "
                        f"the log is logs/{e['key']}.log).", ""]
            for h in e["headlines"]:
                out += [f"**{h['what']}.** The paper: _\"{h['claim']}\"_ ({h['paper']}). "
                        f"Measured here: **{h['measured']}**. Shape agrees: "
                        f"**{h['agrees']}**" + (f" ({h['why']})." if h["why"] else "."), ""]
            out += [f"![{e['key']} {p}]({e['folder']}/{p})" for p in e["plots"]]
            out += [""] if e["plots"] else []
    return "\n".join(out) + "\n"


# ---- HTML ---------------------------------------------------------------------------------------

STYLE = """body{font-family:sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;
line-height:1.45;color:#222}table{border-collapse:collapse;margin:1em 0}
td,th{border:1px solid #bbb;padding:4px 8px;vertical-align:top}th{background:#eee}
code{background:#f4f4f4;padding:1px 4px;font-size:90%}img{max-width:100%;display:block;
margin:1em 0;border:1px solid #ddd}.yes{color:#1a7f37}.partly{color:#9a6700}.no{color:#cf222e}
blockquote{margin:.3em 0 .3em 1em;color:#444;font-style:italic}"""
# Records each image's natural size once loaded (0x0: it did not load), for tests.
SCRIPT = """window.addEventListener('load',function(){document.querySelectorAll('img')
.forEach(function(i){i.setAttribute('data-loaded',i.naturalWidth+'x'+i.naturalHeight);});
document.body.setAttribute('data-ready','1');});"""


def _inline_code(text: str) -> str:
    """Escapes text and turns `code` spans into <code> (the intro's commands)."""
    parts = html.escape(text).split("`")
    return "".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts))


def _data_uri(path: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode("ascii")


def _html(folder: Path, data: dict) -> str:
    esc = html.escape
    out = ["<!DOCTYPE html>", "<html lang=\"en\"><head><meta charset=\"utf-8\">",
           "<title>Reproducing the seeds' headline results</title>",
           f"<style>{STYLE}</style><script>{SCRIPT}</script></head><body>",
           "<h1>Reproducing the seeds' headline results</h1>"]
    out += [f"<p>{_inline_code(text)}</p>" for _, text in _intro(data)]
    out += ["<h2>Summary</h2>", "<table id=\"summary\"><thead><tr>"
            + "".join(f"<th>{esc(h)}</th>" for h in SUMMARY_HEAD) + "</tr></thead><tbody>"]
    for row in _summary_rows(data):
        seed, agrees = row[0], row[4]
        out.append(f"<tr data-seed=\"{esc(seed)}\" data-agrees=\"{esc(agrees)}\">"
                   + "".join(f"<td>{esc(str(c))}</td>" for c in row[:4])
                   + f"<td class=\"{esc(agrees)}\">{esc(MARKS.get(agrees, agrees))}</td></tr>")
    out.append("</tbody></table>")
    for seed in sorted({e["seed"] for e in data["experiments"]}):
        out.append(f"<h2>Seed {esc(seed)}: {esc(SEEDS.get(seed, ''))}</h2>")
        for e in (x for x in data["experiments"] if x["seed"] == seed):
            out += [f"<h3 id=\"{esc(e['key'])}\">{esc(e['title'])}</h3>",
                    f"<p>Reproduce alone: <code>{esc(e['command'])}</code></p>",
                    f"<p>Scaled down: {esc(e['scaled'])}. Took {e['seconds']:.0f} s.</p>"]
            if e["status"] != "ok":
                out.append(f"<p class=\"no\"><b>Not measured: {esc(e['status'])}</b> "
                           f"({esc(e.get('error', ''))}; the log is logs/{esc(e['key'])}.log)"
                           "</p>")
            if e["headlines"]:
                out.append("<table><thead><tr><th>headline</th><th>the paper</th>"
                           "<th>measured here</th><th>shape agrees</th></tr></thead><tbody>")
                for h in e["headlines"]:
                    out.append(
                        f"<tr><td>{esc(h['what'])}</td><td><blockquote>“{esc(h['claim'])}”"
                        f"</blockquote>{esc(h['paper'])}</td><td>{esc(h['measured'])}</td>"
                        f"<td class=\"{esc(h['agrees'])}\">{esc(MARKS.get(h['agrees'], h['agrees']))}"
                        + (f"<br><small>{esc(h['why'])}</small>" if h["why"] else "")
                        + "</td></tr>")
                out.append("</tbody></table>")
            for p in e["plots"]:
                png = folder / e["folder"] / p
                if png.is_file():
                    out.append(f"<img alt=\"{esc(e['key'])} {esc(p)}\" src=\"{_data_uri(png)}\">")
    out.append("</body></html>")
    return "\n".join(out) + "\n"


def write(folder: Path, data: dict) -> list:
    """Writes reproduce.md and reproduce.html into `folder`; returns their names."""
    (folder / "reproduce.md").write_text(_md(data))
    (folder / "reproduce.html").write_text(_html(folder, data))
    return ["reproduce.md", "reproduce.html"]
