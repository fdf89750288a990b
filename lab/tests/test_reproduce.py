"""`locus reproduce` on its quickest configuration (seed 002's lf suite with --quick and seed
003's cost model): the JSON, the Markdown page and the self-contained HTML page agree; the HTML
renders in a headless Chromium with its images loaded and its summary table holding the JSON's
figures; the headlines' judgement on synthetic folders; bad input."""
import json
import shutil
import subprocess
from html.parser import HTMLParser

import pytest

from locus_lab import reproduce, reproduce_page

from conftest import BUILD, BUILD_ARGS, run_locus

# The quick page needs the lf and pow2 builds, the bench programs and the cost model.
needs_build = pytest.mark.skipif(
    not all((BUILD / f).exists() for f in ("lib/liblocus-lf.so", "lib/liblocus-pow2.so",
                                           "bench/shbench", "bin/locus-hwcost")),
    reason="the lf and pow2 builds, bench/shbench or locus-hwcost not built")


@pytest.fixture(scope="module")
def quick_page(tmp_path_factory):
    out = tmp_path_factory.mktemp("reproduce")
    r = run_locus("reproduce", "--quick", "--only", "002,003-hwcost", "-o", str(out),
                  *BUILD_ARGS)
    assert r.returncode == 0, r.stdout + r.stderr
    return out, json.loads((out / reproduce.JSON_FILE).read_text())


@needs_build
def test_quick_page(quick_page):
    out, data = quick_page
    keys = [e["key"] for e in data["experiments"]]
    assert keys == ["002-lf", "003-hwcost"]
    heads = [h for e in data["experiments"] for h in e["headlines"]]
    assert len(heads) == 4 and all(h["claim"] and h["paper"] and h["measured"] for h in heads)
    gates = heads[2]
    assert (gates["measured"], gates["agrees"]) == ("502 AND + 502 OR", "yes")
    lf = data["experiments"][0]
    assert lf["command"].startswith("locus compare --suite lf --quick -w shbench")
    assert lf["plots"] and all((out / "002-lf" / p).is_file() for p in lf["plots"])
    md = (out / "reproduce.md").read_text()
    page = (out / "reproduce.html").read_text()
    for h in heads:
        assert h["measured"] in md and h["claim"] in md
    assert f"![002-lf {lf['plots'][0]}](002-lf/{lf['plots'][0]})" in md
    assert page.count("src=\"data:image/png;base64,") == len(lf["plots"])
    assert "src=\"002-lf" not in page  # nothing outside the file


class _Dom(HTMLParser):
    """The summary table's rows (cells' text) and the images' data-loaded attributes."""

    def __init__(self):
        super().__init__()
        self.rows, self.images, self._in, self._cell = [], [], False, None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "table" and a.get("id") == "summary":
            self._in = True
        elif tag == "tr" and self._in and "data-seed" in a:
            self.rows.append([])
        elif tag == "td" and self._in and self.rows:
            self._cell = ""
        elif tag == "img":
            self.images.append(a.get("data-loaded"))

    def handle_endtag(self, tag):
        if tag == "table":
            self._in = False
        elif tag == "td" and self._cell is not None:
            self.rows[-1].append(self._cell)
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell += data


def _chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return shutil.which(name)
    return None


@needs_build
@pytest.mark.skipif(_chromium() is None, reason="no chromium to render the page "
                    "(apt-get install chromium; .ci/run installs it)")
def test_page_renders_in_a_browser(quick_page, tmp_path):
    out, data = quick_page
    r = subprocess.run([_chromium(), "--headless", "--no-sandbox", "--disable-gpu",
                        f"--user-data-dir={tmp_path}", "--virtual-time-budget=5000",
                        "--dump-dom", (out / "reproduce.html").as_uri()],
                       capture_output=True, text=True, timeout=120)
    assert "data-ready=\"1\"" in r.stdout, r.stderr[-2000:]
    dom = _Dom()
    dom.feed(r.stdout)
    heads = [h for e in data["experiments"] for h in e["headlines"]]
    assert [row[:4] for row in dom.rows] == [[h["seed"], h["what"], h["paper"], h["measured"]]
                                             for h in heads]
    plots = sum(len(e["plots"]) for e in data["experiments"])
    assert len(dom.images) == plots
    for loaded in dom.images:  # "WxH" once loaded; "0x0" for a broken image
        w, h = (int(v) for v in loaded.split("x"))
        assert w > 100 and h > 100


def _summary(folder, cells):
    folder.mkdir()
    rows = [{"workload": "shbench", "allocator": a, "wall_s": t, "frag_rss": f}
            for a, (t, f) in cells.items()]
    (folder / "summary.json").write_text(json.dumps({"results": rows}))
    return folder


def test_headlines_judge_the_shape(tmp_path):
    good = reproduce._lf(_summary(tmp_path / "a", {"locus-pow2": (1.5, 1.6),
                                                    "locus-lf": (1.0, 1.12)}))
    assert [h["agrees"] for h in good] == ["yes", "yes"]
    assert good[0]["values"] == {"pow2": 1.6, "lf": 1.12}
    level = reproduce._lf(_summary(tmp_path / "b", {"locus-pow2": (1.0, 1.6),
                                                     "locus-lf": (1.02, 1.4)}))
    assert [h["agrees"] for h in level] == ["partly", "no"]
    missing = reproduce._lf(_summary(tmp_path / "c", {"locus-pow2": (1.0, 1.6)}))
    assert [h["agrees"] for h in missing] == ["no", "no"]


def test_page_of_a_failed_experiment(tmp_path):
    data = {"command": "locus reproduce", "created": "now", "wall_s": 60, "machine": {},
            "experiments": [{"key": "004-regions", "seed": "004", "title": "regions",
                             "scaled": "small", "command": "locus compare --suite regions",
                             "status": "exit 2", "error": "no such program", "seconds": 1,
                             "folder": "004-regions", "plots": [], "headlines": []}]}
    reproduce_page.write(tmp_path, data)
    md = (tmp_path / "reproduce.md").read_text()
    assert "**Not measured: exit 2** (no such program" in md
    assert "Not measured (see below): 004-regions." in md
    assert "Not measured: exit 2" in (tmp_path / "reproduce.html").read_text()


def test_unknown_experiment_is_one_line(tmp_path):
    r = run_locus("reproduce", "--only", "007", "-o", str(tmp_path / "x"))
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0
    assert "unknown experiment '007'" in r.stderr


@needs_build
def test_report_redraws_the_page(quick_page, tmp_path):
    out, data = quick_page
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    (copy / "reproduce.html").unlink()
    r = run_locus("report", str(copy))
    assert r.returncode == 0, r.stderr
    again = json.loads((copy / reproduce.JSON_FILE).read_text())
    assert again["experiments"] == data["experiments"]
    assert (copy / "reproduce.html").is_file()


def test_hints_headlines_are_the_lists(tmp_path):
    acc, res = [], []
    for w, page in (("list", 0.9), ("tree", 0.001)):
        for a, t in (("glibc", 1.0), ("locus-tp", 0.9), ("locus-medius", 1.0)):
            acc.append({"workload": w, "allocator": a, "page_no_hints": page / 2,
                        "page_hints": page})
            res.append({"workload": w, "allocator": a, "mode": "hints",
                        "time_vs_base": t if w == "list" else 2.0})
    (tmp_path / "summary.json").write_text(json.dumps({"accuracy": acc, "results": res}))
    page, speed = reproduce._hints(tmp_path)
    assert page["values"] == {"tp": 0.9, "medius": 0.9, "glibc": 0.45}
    assert speed["values"] == {"tp": 0.9, "medius": 1.0} and speed["agrees"] == "yes"
