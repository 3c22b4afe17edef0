"""report.html: content checks on a hand-made output folder, then a real render in headless
Chromium (screenshot not blank, the DOM shows the run's counts)."""

from __future__ import annotations

import base64
import html
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import zlib

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from neardup.errors import InputError
from neardup.report.diff import word_diff_html
from neardup.report.html import write_report

from helpers import run_cli

COUNTS = {"input": 12345, "kept": 10022, "removed": 2278, "rejected": 45, "clusters": 1234,
          "candidate_pairs": 56789, "verified_pairs": 4321}
EVIL = "<script>alert('x')</script> & <b>bold</b>"


def make_output(folder, *, texts=True, clusters=True, rejected=True, seed=0):
    """A dedup output folder as the lead's engine writes it, by hand."""
    rng = np.random.default_rng(seed)
    os.makedirs(folder / "kept", exist_ok=True)
    stats = {"counts": dict(COUNTS, buckets=999),
             "params": {"threshold": 0.8, "num_perm": 128, "bands": 13, "rows": 8, "ngram": 5, "seed": 42,
                        "verify": "exact", "char_ngrams": False, "normalize_unicode": True,
                        "id_column": None, "future_param": {"nested": [1, 2]}},
             "seconds": {"read": 1.5, "signatures": 3.25, "pairs": 0.5},
             "neardup_version": "0.1.0", "inputs": [{"name": "a.jsonl", "documents": 12345}]}
    (folder / "stats.json").write_text(json.dumps(stats))
    vocab = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu".split()
    removed = {"id": [], "representative": [], "cluster": [], "similarity": [], "source": []}
    cl = {"id": [], "cluster": [], "is_representative": []}
    sample = {}
    for c in range(40):
        size = 2 if c >= 5 else 9 - c  # clusters 0..4 are the largest (9, 8, 7, 6, 5)
        members = [f"doc{c}_{i}" for i in range(size)]
        base = list(rng.choice(vocab, 50))
        base[3] = EVIL
        for i, m in enumerate(members):
            cl["id"].append(m)
            cl["cluster"].append(f"cl{c}")
            cl["is_representative"].append(i == 0)
            if i == 0:
                sample[m] = " ".join(base)
                continue
            removed["id"].append(m)
            removed["representative"].append(members[0])
            removed["cluster"].append(f"cl{c}")
            removed["similarity"].append(float(rng.uniform(0.8, 1.0)))
            removed["source"].append("a.jsonl")
            words = list(base)
            words[10] = f"INSERTED{c}x{i}"
            del words[20]
            sample[m] = " ".join(words)
    pq.write_table(pa.table(removed), folder / "removed.parquet")
    if clusters:
        pq.write_table(pa.table(cl), folder / "clusters.parquet")
    if texts:
        pq.write_table(pa.table({"id": list(sample), "text": list(sample.values())}),
                       folder / "texts_sample.parquet")
    if rejected:
        pq.write_table(pa.table({"source": ["a.jsonl"] * 2, "row": [7, 99],
                                 "reason": ["line 8: not JSON <{oops}>", "line 100: no 'text' field"]}),
                       folder / "rejected.parquet")
    (folder / "kept" / "a.jsonl").write_text('{"text": "kept"}\n')
    return folder


def check_self_contained(page):
    assert not re.search(r"""(?:src|href|action|srcset)\s*=\s*["']?\s*(?:https?:)?//""", page, re.I)
    assert "<script" not in page.lower().replace("&lt;script", "")
    assert "<link" not in page.lower() and "@import" not in page and "url(" not in page


# ---- content -------------------------------------------------------------------------------------

def test_report_content(tmp_path):
    out = make_output(tmp_path / "out")
    path = write_report(out)
    assert path == out / "report.html"
    page = path.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>")
    check_self_contained(page)
    for key, value in COUNTS.items():
        assert f'id="count-{key}"' in page
        assert f"{value:,}" in page, key
    assert "18.5%" in page  # removed / input
    # parameters and the S-curve numbers
    assert "13 x 8" in page and f"{(1 / 13) ** (1 / 8):.4f}" in page
    assert f"{1 - (1 - 0.8 ** 8) ** 13:.4f}" in page
    assert "future_param" in page and "neardup_version" in page  # extra keys shown, not fatal
    # parameters as a reader writes them, never Python reprs
    assert "<th>char_ngrams</th><td>no</td>" in page and "<th>normalize_unicode</th><td>yes</td>" in page
    assert "<th>id_column</th><td>\u2014</td>" in page
    assert ">False<" not in page and ">None<" not in page and ">True<" not in page
    # the largest cluster first, with its representative and members side by side
    first = page.index("cluster <code>cl0</code>")
    assert first < page.index("cluster <code>cl1</code>") < page.index("cluster <code>cl4</code>")
    assert "9 documents" in page
    assert "<del>" in page and "<ins>INSERTED0x1</ins>" in page
    # texts are escaped, never raw
    assert EVIL not in page
    assert html.escape(EVIL) in page or "&lt;script&gt;" in page
    assert "not JSON &lt;{oops}&gt;" in page
    # images inline
    assert page.count("data:image/png;base64,") + page.count("<svg") >= 3


@pytest.mark.slow
def test_matplotlib_images_are_real_pngs(tmp_path):
    import matplotlib  # noqa: F401
    out = make_output(tmp_path / "out")
    page = write_report(out, plots="matplotlib").read_text()
    uris = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)
    assert len(uris) == 3  # S-curve, similarity histogram, cluster sizes
    for u in uris:
        data = base64.b64decode(u)
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000
    check_self_contained(page)


def test_without_matplotlib_draws_svg(tmp_path, monkeypatch):
    for name in list(sys.modules):
        if name == "matplotlib" or name.startswith("matplotlib."):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    out = make_output(tmp_path / "out")
    page = write_report(out).read_text()  # plots="auto" falls back
    assert "data:image" not in page
    assert page.count("<svg") == 3 and page.count("</svg>") == 3
    assert "<polyline" in page and "<rect" in page
    check_self_contained(page)
    for value in COUNTS.values():
        assert f"{value:,}" in page


def test_minimal_folder_and_missing_parts(tmp_path):
    out = tmp_path / "min"
    out.mkdir()
    (out / "stats.json").write_text(json.dumps({"counts": {"input": 3, "kept": 3, "removed": 0}}))
    page = write_report(out, plots="svg").read_text()
    assert "No removed.parquet" in page and "not recorded" in page
    # without texts_sample / clusters: ids only, sizes from removed.parquet
    out2 = make_output(tmp_path / "noclusters", texts=False, clusters=False, rejected=False)
    page2 = write_report(out2, plots="svg").read_text()
    assert "no texts_sample.parquet" in page2
    assert "doc0_3" in page2 and "<ins>" not in page2
    assert "9 documents" in page2  # 8 removed + the representative


def test_bad_folders(tmp_path, capsys):
    with pytest.raises(InputError):
        write_report(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="stats.json"):
        write_report(tmp_path / "empty")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "stats.json").write_text("{not json")
    assert run_cli("report", str(tmp_path / "bad")) == 2
    err = capsys.readouterr().err
    assert err.startswith("neardup: error: ") and err.count("\n") == 1 and "stats.json" in err


def test_cli_report_output_option(tmp_path, capsys):
    out = make_output(tmp_path / "out")
    target = tmp_path / "elsewhere.html"
    assert run_cli("report", str(out), "--output", str(target), "--plots", "svg") == 0
    assert f"wrote {target}" in capsys.readouterr().out
    assert target.is_file() and not (out / "report.html").exists()
    assert "56,789" in target.read_text()


def test_word_diff_escapes_and_marks():
    left, right = word_diff_html("a <b> c d e", "a <b> X d e & f")
    assert left == "a &lt;b&gt; <del>c</del> d e"
    # "&" is punctuation: it separates words and is shown as written, never marked as a word
    assert right == "a &lt;b&gt; <ins>X</ins> d e &amp; <ins>f</ins>"
    long_left, _ = word_diff_html("w " * 1000, "w " * 1000, max_words=10)
    assert "cut at 10 words" in long_left


def test_word_diff_splits_text_as_the_tokenizer_does():
    # Chinese and Japanese: a word is one character, so only the changed characters are marked
    left, right = word_diff_html("东京塔是东京的著名景点。", "东京塔是大阪的著名景点。")
    assert left == "东京塔是<del>东京</del>的著名景点。"
    assert right == "东京塔是<ins>大阪</ins>的著名景点。"
    left, right = word_diff_html("今日は良い天気です", "今日は悪い天気です")
    assert left == "今日は<del>良</del>い天気です" and right == "今日は<ins>悪</ins>い天気です"
    # punctuation splits words (well-known = well known) and case is not a change, as in the shingles
    left, right = word_diff_html("The well-known cat, Hello.", "the well known dog hello")
    assert left == "The well-known <del>cat</del>, Hello." and right == "the well known <ins>dog</ins> hello"
    # under the run's own rule: with punctuation deleted, well-known is one word, unlike well known
    left, _ = word_diff_html("the well-known cat", "the well known cat", punctuation="delete")
    assert left == "the <del>well-known</del> cat"
    # mojibake is no word: replacement characters never show up as a change
    left, right = word_diff_html("caf\ufffd\ufffd au lait", "caf\ufffd au lait")
    assert "<del>" not in left and "<ins>" not in right


# ---- a real browser ------------------------------------------------------------------------------

def chromium_binary():
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    pytest.fail("chromium is not installed (.ci/run installs the Debian package: apt-get install chromium)")


def chromium(binary, tmp_path, *args):
    profile = tmp_path / f"profile-{len(list(tmp_path.iterdir()))}"
    cmd = [binary, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           "--disable-dev-shm-usage", f"--user-data-dir={profile}", *args]
    return subprocess.run(cmd, capture_output=True, timeout=180, stdin=subprocess.DEVNULL)


def decode_png(data):
    """RGB(A) 8-bit PNG -> (h, w, channels) uint8, with the five PNG row filters."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, header = 8, [], None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", chunk)
        elif kind == b"IDAT":
            idat.append(chunk)
        pos += 12 + length
    w, h, depth, color, _, _, interlace = header
    assert depth == 8 and color in (2, 6) and interlace == 0, header
    ch = 3 if color == 2 else 4
    raw = zlib.decompress(b"".join(idat))
    stride = w * ch
    out = np.zeros((h, stride), dtype=np.uint8)
    prev = np.zeros(stride, dtype=np.int32)
    for y in range(h):
        f = raw[y * (stride + 1)]
        line = np.frombuffer(raw, dtype=np.uint8, count=stride, offset=y * (stride + 1) + 1).astype(np.int32)
        if f == 0:
            cur = line
        elif f == 2:
            cur = (line + prev) & 255
        elif f == 1:
            cur = line.copy()
            for x in range(ch, stride):
                cur[x] = (cur[x] + cur[x - ch]) & 255
        else:
            cur = line.copy()
            for x in range(stride):
                a = cur[x - ch] if x >= ch else 0
                b = prev[x]
                if f == 3:
                    cur[x] = (cur[x] + ((a + b) >> 1)) & 255
                else:
                    c = prev[x - ch] if x >= ch else 0
                    p = a + b - c
                    pa_, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                    pred = a if pa_ <= pb and pa_ <= pc else (b if pb <= pc else c)
                    cur[x] = (cur[x] + pred) & 255
        out[y] = cur
        prev = cur
    return out.reshape(h, w, ch)[:, :, :3]


def read_png(path):
    try:
        import matplotlib.image as mpimg
        img = mpimg.imread(str(path))
        return np.rint(img[:, :, :3] * 255).astype(np.uint8)
    except ImportError:
        return decode_png(path.read_bytes())


def test_decode_png_matches_matplotlib(tmp_path):
    import matplotlib as mpl
    mpl.use("Agg", force=True)
    import matplotlib.image as mpimg
    rng = np.random.default_rng(0)
    img = (np.cumsum(rng.integers(0, 3, (40, 50, 3)), axis=1) % 256).astype(np.uint8)
    mpimg.imsave(tmp_path / "x.png", img)
    assert np.array_equal(decode_png((tmp_path / "x.png").read_bytes()), img)


@pytest.mark.slow
def test_report_renders_in_headless_chromium(tmp_path):
    binary = chromium_binary()
    out = make_output(tmp_path / "out")
    page = write_report(out)
    shot = tmp_path / "shot.png"
    res = chromium(binary, tmp_path, f"--screenshot={shot}", "--window-size=1280,2000", page.as_uri())
    assert shot.is_file(), res.stderr.decode(errors="replace")[-2000:]
    img = read_png(shot)
    assert img.shape[:2] == (2000, 1280)
    flat = img.reshape(-1, 3).astype(np.int32)
    # not blank: the most common colour (the background) covers well under all of the page
    _, counts = np.unique(flat[:, 0] * 65536 + flat[:, 1] * 256 + flat[:, 2], return_counts=True)
    assert counts.max() / len(flat) < 0.9
    nonwhite = np.mean(flat.min(axis=1) < 235)
    dark = np.mean(flat.max(axis=1) < 110)  # text, axes, curves
    assert nonwhite > 0.05 and dark > 0.003, (nonwhite, dark)
    # the plots are there: the S-curve's blue and the bar colour
    curve = np.mean((np.abs(flat - [0x1F, 0x4E, 0x9C]).max(axis=1) < 40))
    assert curve > 0.0005, curve

    res = chromium(binary, tmp_path, "--dump-dom", page.as_uri())
    dom = res.stdout.decode("utf-8", errors="replace")
    assert "neardup report" in dom
    for value in COUNTS.values():
        assert f"{value:,}" in dom
    assert "INSERTED0x1" in dom
    assert "<script>alert" not in dom  # escaped text stays text


@pytest.mark.slow
def test_svg_report_renders_in_headless_chromium(tmp_path):
    binary = chromium_binary()
    out = make_output(tmp_path / "out", texts=False)
    page = write_report(out, plots="svg")
    shot = tmp_path / "shot.png"
    chromium(binary, tmp_path, f"--screenshot={shot}", "--window-size=1280,2000", page.as_uri())
    img = read_png(shot).reshape(-1, 3).astype(np.int32)
    # the SVG curve and the bars are drawn
    assert np.mean((np.abs(img - [0x1F, 0x4E, 0x9C]).max(axis=1) < 40)) > 0.0005
    assert np.mean((np.abs(img - [0x2E, 0x86, 0xC1]).max(axis=1) < 40)) > 0.002


@pytest.mark.slow
def test_same_folder_contents_same_bytes(tmp_path):
    """No clock, path or timing in the page: `neardup dedup` twice gives identical reports."""
    import matplotlib  # noqa: F401
    a = make_output(tmp_path / "run1")
    b = make_output(tmp_path / "second_run")
    stats = json.loads((b / "stats.json").read_text())
    stats["seconds"] = {"read": 9.75, "signatures": 0.1, "pairs": 7.0}
    (b / "stats.json").write_text(json.dumps(stats))
    for plots in ("auto", "svg"):
        assert write_report(a, plots=plots).read_bytes() == write_report(b, plots=plots).read_bytes()
    page = (a / "report.html").read_text()
    assert "run1" not in page and str(tmp_path) not in page
    assert "a.jsonl (12,345 documents)" in page


def test_stats_in_memory_give_the_page_of_their_stats_json(tmp_path):
    """A run writes its report before its stats.json: the stats given in memory (keys in the
    order the run made them, tuples) give the bytes that `neardup report` later gives from the
    stats.json written of them; a stats.json there meanwhile is not read."""
    from neardup.errors import ConfigError
    from neardup.report.html import render_report
    from neardup.io.storage.folder import json_bytes
    out = make_output(tmp_path / "out")
    recorded = json.loads((out / "stats.json").read_text())
    stats = dict(reversed(list(recorded.items())), extra=(1, "two", {"b": 1, "a": None}))
    stats["params"] = dict(reversed(list(recorded["params"].items())))
    (out / "stats.json").unlink()
    page = write_report(out, plots="svg", stats=stats).read_bytes()
    assert render_report(out, plots="svg", stats=stats).encode() == page
    (out / "stats.json").write_bytes(json_bytes(stats, indent=2))  # as the run writes it, last
    assert write_report(out, plots="svg").read_bytes() == page
    (out / "stats.json").write_text("{not json")  # not read
    assert write_report(out, plots="svg", stats=stats).read_bytes() == page
    assert "<th>extra</th>" in page.decode() and "56,789" in page.decode()
    with pytest.raises(ConfigError, match="^stats must be a dict"):
        write_report(out, plots="svg", stats=[stats])


def test_a_folder_object_is_the_folder_it_names(tmp_path):
    """write_report and render_report take a storage Folder (the run holds one) as well as a path."""
    from neardup.io.storage.folder import Folder
    from neardup.report.html import render_report
    out = make_output(tmp_path / "out")
    page = write_report(out, plots="svg").read_bytes()
    folder = Folder.of(out)
    assert Folder.of(folder) is folder
    for given in (folder, Folder(str(out)), Folder.of(f"file://{out}")):
        (out / "report.html").unlink()
        assert write_report(given, plots="svg") == out / "report.html"
        assert (out / "report.html").read_bytes() == page
        assert render_report(given, plots="svg").encode() == page
    assert write_report(folder, tmp_path / "r.html", plots="svg") == tmp_path / "r.html"
    assert (tmp_path / "r.html").read_bytes() == page
    with pytest.raises(InputError, match="not a folder$"):
        write_report(Folder.of(tmp_path / "nope"), plots="svg")


def test_report_bounds_recorded_lists_and_names_whole_file_rejections(tmp_path):
    """Issue 22: stats.json's `inputs` and `kept_files` list every file of a run (8.9 MB of a
    9.1 MB report); the report shows their length and the first few. A rejection of a whole file
    (row null) reads "(whole file)", not "None"."""
    out = make_output(tmp_path / "out", rejected=False)
    stats = json.loads((out / "stats.json").read_text())
    stats["kept_files"] = [f"part-{i:05d}.jsonl" for i in range(10_000)]
    stats["inputs"] = [{"name": f"in/part-{i:05d}.jsonl", "documents": 3} for i in range(6)]
    stats["small"] = ["a", "b"]
    (out / "stats.json").write_text(json.dumps(stats))
    pq.write_table(pa.table({"source": ["a.jsonl", "b.bin"], "row": pa.array([3, None], pa.int64()),
                             "reason": ["not JSON", "not UTF-8 text"]}), out / "rejected.parquet")
    page = write_report(out).read_text(encoding="utf-8")
    assert "part-00004.jsonl" in page and "part-00005.jsonl" not in page
    assert "10,000 entries; the first 5:" in page and "6 entries; the first 5:" in page
    assert "in/part-00004.jsonl" in page and "in/part-00005.jsonl" not in page.split("Other recorded values")[1]
    assert "<th>small</th><td>[&quot;a&quot;, &quot;b&quot;]</td>" in page  # short lists stay whole
    assert len(page) < 200_000
    assert "<td>(whole file)</td>" in page and "<td>None</td>" not in page
    assert "Kept documents: 1 file," in page


@pytest.mark.slow
def test_report_says_pairs_are_unverified_under_verify_none(tmp_path):
    out = make_output(tmp_path / "out")
    assert "verified pairs</div>" in write_report(out).read_text(encoding="utf-8")
    stats = json.loads((out / "stats.json").read_text())
    stats["params"]["verify"] = "none"
    (out / "stats.json").write_text(json.dumps(stats))
    page = write_report(out, overwrite=True).read_text(encoding="utf-8")
    assert "pairs taken unverified (verify = none)" in page and "verified pairs</div>" not in page


def test_the_page_is_drawn_on_the_system_allocator_and_the_pool_put_back(tmp_path, monkeypatch):
    """Arrow's allocations of the page come from the system allocator, which gives freed batches
    back (Arrow's default pool kept them: the driver's peak grew with the corpus, issue 28), and
    the caller's pool is Arrow's default again afterwards, also when the page fails."""
    import neardup.report.html as report_html
    make_output(tmp_path)
    before = pa.default_memory_pool()
    seen = []
    page = report_html._page
    monkeypatch.setattr(report_html, "_page", lambda *a, **k: (seen.append(pa.default_memory_pool().backend_name),
                                                                page(*a, **k))[1])
    write_report(tmp_path, plots="svg")
    assert seen == ["system"]
    assert pa.default_memory_pool().backend_name == before.backend_name

    def fails(*a, **k):
        raise RuntimeError("page")
    monkeypatch.setattr(report_html, "_page", fails)
    with pytest.raises(RuntimeError):
        write_report(tmp_path, plots="svg")
    assert pa.default_memory_pool().backend_name == before.backend_name


def test_a_runs_report_says_what_kept_holds_without_listing_it(tmp_path, monkeypatch):
    """A run's report takes the files and bytes of kept/ from the write stage (90,000 files: a
    stat each, 0.2 s); they are those a listing finds: text files copied whole (by the compiled
    loop, and one by one where it fails) and a JSONL file written again, each ~100 KB so that a
    file left out changes the MB shown."""
    import random

    import neardup
    from neardup.report import html as html_report

    rng = random.Random(3)
    words = ["".join(rng.choice("abcdefgh") for _ in range(6)) for _ in range(3000)]
    texts = [" ".join(rng.choice(words) for _ in range(15000)) for _ in range(6)]
    (tmp_path / "in" / "sub").mkdir(parents=True)
    for i, text in enumerate(texts):
        (tmp_path / "in" / ("sub" if i % 2 else "") / f"{i}.txt").write_text(text)
    (tmp_path / "in" / "again.txt").write_text(texts[0])  # removed
    (tmp_path / "in" / "d.jsonl").write_text("".join(json.dumps({"text": t[:60000] + str(k)}) + "\n"
                                                     for k, t in enumerate(texts[:3] * 2)))  # half removed

    def listed(folder):
        raise AssertionError("kept/ listed")

    monkeypatch.setattr(html_report, "_files_below", listed)
    neardup.dedup(str(tmp_path / "in"), str(tmp_path / "out"), threshold=0.8)
    page = (tmp_path / "out" / "report.html").read_text(encoding="utf-8")
    monkeypatch.undo()
    kept = [p for p in (tmp_path / "out" / "kept").rglob("*") if p.is_file()]
    size = sum(p.stat().st_size for p in kept)
    assert len(kept) == 7 and size > 700_000
    assert f"Kept documents: 7 files, {size / 1e6:,.1f} MB in" in page
    assert page == write_report(tmp_path / "out", tmp_path / "listed.html", plots="svg").read_text(encoding="utf-8")
