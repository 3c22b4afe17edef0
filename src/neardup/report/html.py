"""report.html: one self-contained page (inline CSS and images, no scripts, no external URLs)
of a dedup output folder: counts, parameters, S-curve, similarity and cluster-size
distributions, the largest clusters side by side with their differences highlighted.

:func:`write_report` writes it (the run, before its stats.json, with the stats in memory;
``neardup report DIR`` on a finished folder); :func:`render_report` gives it as a string. What is
read of the folder: :mod:`.output_folder`; the word diff: :mod:`.diff`; the charts: :mod:`.plots`.
A run reads the member files' part of the page ahead, beside its copy of kept lines
(:func:`read_ahead`).
"""

from __future__ import annotations

import html
import json
import math
import os
from pathlib import Path
from typing import Any, List, Optional, Tuple, Union

import numpy as np

from ..config import PUNCTUATION_MODES, Shingling, Sketch
from ..errors import ConfigError
from ..io.storage import fs
from ..io.storage.folder import Folder
from ..io.storage.outfile import check_output_file, publish_file, same_file
from ..io.storage.paths import redact
from ..kernels.arrays import system_pool, to_numpy
from ..config.params import DEFAULT_MIN_RECALL, areas, candidate_probability, choose_params, midpoint
from ..progress import plural
from .diff import word_diff_html
from .output_folder import (HEAD, KEPT, REMOVED, KeptTally, as_recorded, as_strings, cluster_members,
                            cluster_sizes, load_stats, read_parquet, sample_texts, schema_names)

__all__ = ["render_report", "write_report", "REPORT_NAME"]

REPORT_NAME = "report.html"
# the files of an output folder the report reads (and that --output may never name)
_REPORT_INPUTS = ("stats.json", "removed.parquet", "clusters.parquet", "texts_sample.parquet", "rejected.parquet")


_CSS = """
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 0;
       background: #f4f6f8; color: #1d232a; }
main { max-width: 1200px; margin: 0 auto; padding: 24px 28px 60px; }
h1 { font-size: 26px; margin: 8px 0 2px; }
h2 { font-size: 19px; margin: 34px 0 10px; border-bottom: 2px solid #d7dde3; padding-bottom: 4px; }
h3 { font-size: 15px; margin: 20px 0 6px; }
.sub { color: #5b6570; font-size: 13px; }
.cards { display: flex; flex-wrap: wrap; gap: 12px; margin-top: 18px; }
.card { background: #fff; border: 1px solid #d7dde3; border-radius: 8px; padding: 12px 16px;
        min-width: 130px; }
.card .n { font-size: 28px; font-weight: 700; }
.card .l { font-size: 12px; color: #5b6570; text-transform: uppercase; letter-spacing: .04em; }
.card.removed .n { color: #b03a2e; }
.card.kept .n { color: #1e8449; }
table { border-collapse: collapse; background: #fff; font-size: 13px; }
th, td { border: 1px solid #d7dde3; padding: 4px 9px; text-align: left; vertical-align: top; }
th { background: #eef1f4; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.grid2 { display: flex; flex-wrap: wrap; gap: 16px; }
.fig { display: inline-block; vertical-align: top; background: #fff; border: 1px solid #d7dde3; border-radius: 8px; padding: 8px; }
.fig img, .fig svg { display: block; max-width: 100%; height: auto; }
.cluster { background: #fff; border: 1px solid #d7dde3; border-radius: 8px; padding: 8px 14px 14px;
           margin: 14px 0; }
.pair { display: grid; grid-template-columns: 1fr 1fr; gap: 10px; margin-top: 10px; }
.doc { border: 1px solid #d7dde3; border-radius: 6px; padding: 8px 10px; background: #fbfcfd;
       font-size: 13px; line-height: 1.45; max-height: 320px; overflow: auto; white-space: pre-wrap;
       word-wrap: break-word; }
.doc .h { font-weight: 700; font-size: 12px; color: #3d4650; margin-bottom: 4px; white-space: normal; }
del { background: #fadbd8; color: #922b21; text-decoration: line-through; }
ins { background: #d5f5e3; color: #1d6f42; text-decoration: none; }
.note { color: #5b6570; font-size: 13px; }
tr.kept td:last-child { color: #1d6f42; }
tr.removed td:last-child { color: #922b21; }
code { background: #eef1f4; padding: 0 3px; border-radius: 3px; }
"""


def _esc(text: Any) -> str:
    """``text`` for the page: credentials hidden (everything a path or URL can reach the page
    through goes through here), then HTML-escaped."""
    return html.escape(redact(str(text)))


def _fmt_int(v: Any) -> str:
    if v is None:
        return "n/a"
    try:
        return f"{int(v):,}"
    except (TypeError, ValueError, OverflowError):
        return _esc(v)


def _fmt_value(v: Any) -> str:
    """A parameter as a reader writes it: yes / no, a dash for nothing, never a Python repr."""
    if v is None:
        return "\u2014"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:.6g}"
    if isinstance(v, (dict, list)):
        return _esc(json.dumps(v, sort_keys=True, default=str))
    return _esc(v)


def _size_bins(max_size: int, min_size: int = 2) -> List[Tuple[int, int]]:
    """Bins of cluster sizes: one per size up to 10, then ranges; from ``min_size`` (2, or 1 when
    a cluster of one is there), so that every size up to ``max_size`` falls in a bin."""
    bins = [(s, s) for s in range(max(1, min(min_size, 2)), min(max_size, 10) + 1)]
    edges = [11, 21, 51, 101, 201, 501, 1001, 10001, 100001]
    lo = 11
    for hi_next in edges[1:]:
        if lo > max_size:
            break
        bins.append((lo, hi_next - 1))
        lo = hi_next
    if lo <= max_size:
        bins.append((lo, max_size))
    return bins


class _Figures:
    """Charts as inline HTML: matplotlib PNGs (base64) when available, else hand-made SVG."""

    def __init__(self, mode: str):
        from .plots import have_matplotlib
        if mode not in ("auto", "matplotlib", "svg"):
            raise ConfigError(f"plots must be 'auto', 'matplotlib' or 'svg', got {mode!r}")
        self.use_mpl = mode == "matplotlib" or (mode == "auto" and have_matplotlib())

    def _img(self, fig, alt: str) -> str:
        from .plots import figure_to_data_uri
        return f'<img alt="{html.escape(alt)}" src="{figure_to_data_uri(fig, "png")}">'

    def s_curve(self, bands: int, rows: int, threshold: float) -> str:
        from . import plots
        if self.use_mpl:
            fig = plots.s_curve_figure(bands, rows, threshold, figsize=(6.4, 4.0))
            return self._img(fig, f"S-curve {bands} bands x {rows} rows")
        return plots.svg_line_chart(bands, rows, threshold, width=600, height=380)

    def bars(self, labels: List[str], values: List[float], *, title: str, xlabel: str, ylabel: str,
             marker: Optional[Tuple[int, str]] = None, log: bool = False) -> str:
        from . import plots
        if self.use_mpl:
            plt = plots.require_matplotlib()
            fig, ax = plt.subplots(figsize=(6.4, 4.0))
            x = np.arange(len(values))
            ax.bar(x, values, width=0.9, color=plots.BAR)
            step = max(1, int(math.ceil(len(values) / 10)))
            ax.set_xticks(x[::step])
            ax.set_xticklabels([labels[i] for i in range(0, len(values), step)], fontsize=8,
                               rotation=30 if max((len(s) for s in labels), default=0) > 5 else 0)
            if marker is not None:
                ax.axvline(marker[0] - 0.5, color=plots.THRESHOLD, ls="--", lw=1.4, label=marker[1])
                ax.legend(loc="upper left", fontsize=8)
            if log and max(values, default=0) > 0:
                ax.set_yscale("log")
            ax.set_title(title)
            ax.set_xlabel(xlabel)
            ax.set_ylabel(ylabel)
            ax.grid(True, axis="y", alpha=0.3)
            fig.tight_layout()
            return self._img(fig, title)
        return plots.svg_bar_chart(labels, values, title=title, xlabel=xlabel, ylabel=ylabel,
                                   width=600, height=380, marker=marker)


def _section_counts(counts: dict, verify: Any = None) -> str:
    items = [("input", "input documents", ""), ("kept", "kept", "kept"), ("removed", "removed", "removed"),
             ("rejected", "rejected records", ""), ("clusters", "duplicate clusters", ""),
             ("candidate_pairs", "candidate pairs", ""), ("verified_pairs", "verified pairs", "")]
    if verify == "none":
        items[-1] = ("verified_pairs", "pairs taken unverified (verify = none)", "")
    cards = []
    for key, label, cls in items:
        value = counts.get(key)
        extra = ""
        if key == "removed" and counts.get("input"):
            try:
                extra = f' <span class="sub">({int(value) / int(counts["input"]):.1%})</span>'
            except (TypeError, ValueError, ZeroDivisionError):
                extra = ""
        cards.append(f'<div class="card {cls}" id="count-{key}"><div class="l">{html.escape(label)}</div>'
                     f'<div class="n">{_fmt_int(value)}{extra}</div></div>')
    known = {k for k, _, _ in items}
    for key in sorted(k for k in counts if k not in known):
        cards.append(f'<div class="card" id="count-{_esc(key)}"><div class="l">'
                     f'{_esc(str(key).replace("_", " "))}</div>'
                     f'<div class="n">{_fmt_int(counts[key])}</div></div>')
    return '<div class="cards">' + "".join(cards) + "</div>"


def _inputs_line(stats: dict) -> str:
    inputs = stats.get("inputs")
    names = []
    if isinstance(inputs, list):
        for item in inputs[:5]:
            if isinstance(item, dict) and "name" in item:
                n = item.get("documents")
                names.append(_esc(item["name"]) + (f" ({_fmt_int(n)} {_docs(n)})" if n is not None else ""))
            elif isinstance(item, str):
                names.append(_esc(item))
        if len(inputs) > 5:
            names.append(f"and {len(inputs) - 5:,} more")
    version = stats.get("neardup_version")
    parts = []
    if names:
        parts.append("input: " + ", ".join(names))
    if version:
        parts.append(f"neardup {_esc(version)}")
    return " &middot; ".join(parts) or "a neardup dedup run"


def _docs(n: Any) -> str:
    return plural(n, "document") if isinstance(n, int) else "documents"


def _kv_table(d: dict, caption: Optional[str] = None) -> str:
    rows = "".join(f"<tr><th>{_esc(k)}</th><td>{_fmt_value(v)}</td></tr>" for k, v in d.items())
    cap = f"<caption>{html.escape(caption)}</caption>" if caption else ""
    return f"<table>{cap}{rows}</table>"


def _resolve_bands(params: dict) -> Optional[Tuple[float, int, int]]:
    try:
        t = float(params.get("threshold"))
        b, r = params.get("bands"), params.get("rows")
        if b is None or r is None:
            k = int(params.get("num_perm", Sketch.num_perm))
            c = choose_params(t, k, min_recall=float(params.get("min_recall", DEFAULT_MIN_RECALL)))
            b, r = c.bands, c.rows
        b, r = int(b), int(r)
        candidate_probability(t, b, r)
        if not 0 < t <= 1:
            return None
        return t, b, r
    except (TypeError, ValueError):
        return None


def _similarity_histogram(out: Path, figs: _Figures, threshold: Optional[float],
                          ahead: Optional[ReadAhead] = None) -> str:
    path = out / "removed.parquet"
    if not path.is_file():
        return '<p class="note">No removed.parquet in this folder.</p>'
    sims = _ahead_or(ahead, out, ("similarities",), lambda: _similarities(path))
    if sims.size == 0:
        return '<p class="note">No similarities recorded (no removed documents, or verification was off).</p>'
    lo = float(np.floor(min(sims.min(), threshold if threshold is not None else 1.0) * 20) / 20)
    lo = min(max(lo, 0.0), 0.95)
    nbins = int(round((1.0 - lo) / 0.01))
    edges = np.linspace(lo, 1.0, nbins + 1)
    q = _min_median_max(sims)
    below = int(np.sum(sims < threshold)) if threshold is not None else 0
    counts, _ = np.histogram(np.clip(sims, 0.0, 1.0, out=sims), bins=edges)  # in place: sims not used after
    labels = [f"{e:.2f}" for e in edges[:-1]]
    marker = None
    if threshold is not None and lo <= threshold <= 1.0:
        marker = (int(round((threshold - lo) / 0.01)), f"threshold {threshold:g}")
    chart = figs.bars(labels, counts.tolist(), title="Similarity of removed documents to their representative",
                      xlabel="similarity (bin start)", ylabel="removed documents", marker=marker)
    note = (f'<p class="note">{sims.size:,} removed documents with a similarity: min {q[0]:.3f}, '
            f'median {q[1]:.3f}, max {q[2]:.3f}'
            + (f"; {below:,} below the threshold (kept in a cluster through another member)"
               if below else "") + ".</p>")
    return f'<div class="fig">{chart}</div>{note}'


def _min_median_max(x: np.ndarray) -> Tuple[float, float, float]:
    """``np.quantile(x, [0, 0.5, 1])`` of a non-empty 1-d float array of finite numbers, the same
    numbers (numpy's default method: the median of an even count is ``b - (b - a) * 0.5`` of the
    two middle values), without numpy.ma, which ``np.quantile`` imports (through ``np.unique``,
    numpy 2.4: 8-10 CPU-ms of the report, the only user of it in a run)."""
    n = len(x)
    k = (n - 1) // 2
    middle = np.partition(x, [k, k + 1] if n % 2 == 0 else [k])
    if n % 2:
        median = float(middle[k])
    else:
        a, b = middle[k], middle[k + 1]
        median = float(b - (b - a) * 0.5)
    return float(x.min()), median, float(x.max())


def _similarities(path: Path) -> np.ndarray:
    """The finite similarities of removed.parquet as one float64 array, the Arrow column freed
    before the copy that drops the rest is made (one removed document's number each: the
    report is drawn by the driver, issue 28)."""
    col = read_parquet(path, ["similarity"])["similarity"]
    sims = np.asarray(to_numpy(col) if hasattr(col, "to_numpy") else col, dtype=np.float64)
    del col
    return sims[np.isfinite(sims)]


def _punctuation_of(params: dict) -> str:
    """The run's punctuation mode from stats.json params (the default when it names none)."""
    mode = params.get("punctuation")
    return mode if mode in PUNCTUATION_MODES else Shingling.punctuation


def _role_html(role: str, rep: Optional[str], sim: Any, head: Optional[str]) -> str:
    """What happened to one member of a cluster, in words."""
    if role == HEAD:
        return "kept: the representative (the cluster's first document in keep order)"
    if role == KEPT:
        return ("kept: not similar enough (below the threshold) to any document of the cluster kept "
                "before it to be removed (chain guard)")
    if role == REMOVED:
        s_txt = f"{sim:.3f}" if isinstance(sim, float) and math.isfinite(sim) else "not recorded"
        if rep is None:
            return f"removed, similarity {s_txt} (no row in removed.parquet)"
        to = "the representative " if rep == head else ""
        return f"removed, similarity {s_txt} to {to}<code>{_esc(rep)}</code>"
    return "member (removed.parquet is missing: kept or removed is not known)"


def _cluster_section(out: Path, figs: _Figures, max_clusters: int, max_members: int, max_side_by_side: int,
                     punctuation: str = Shingling.punctuation, against: bool = False,
                     ahead: Optional[ReadAhead] = None) -> Tuple[str, str]:
    """(size distribution html, largest clusters html) of the clusters of this run."""
    sized = _ahead_or(ahead, out, ("sizes", max_clusters), lambda: cluster_sizes(out, max_clusters))
    if sized is None:
        msg = '<p class="note">No clusters.parquet or removed.parquet in this folder.</p>'
        return msg, msg
    ids, sizes = sized
    if len(sizes) == 0:
        msg = ('<p class="note">No duplicate clusters in this run'
               + (': every removed document was removed against an index (below).' if against else '.') + '</p>')
        return msg, msg
    top = [str(c) for c in ids.slice(0, max_clusters).to_pylist()]
    return (_sizes_html(figs, sizes),
            _largest_html(out, top, sizes[:max_clusters], max_members, max_side_by_side, punctuation, ahead))


def _sizes_html(figs: _Figures, sizes: np.ndarray) -> str:
    """The distribution of the cluster sizes: a chart and a table."""
    bins = _size_bins(int(sizes.max()), int(sizes.min()))
    labels = [str(a) if a == b else f"{a}-{b}" for a, b in bins]
    values = [int(np.sum((sizes >= a) & (sizes <= b))) for a, b in bins]
    nonzero = [v for v in values if v]
    chart = figs.bars(labels, values, title="Cluster sizes", xlabel="documents in the cluster",
                      ylabel="clusters", log=bool(nonzero) and max(nonzero) > 50 * max(1, min(nonzero)))
    rows = "".join(f'<tr><td>{html.escape(l)}</td><td class="num">{v:,}</td></tr>'
                   for l, v in zip(labels, values) if v)
    return (f'<div class="grid2"><div class="fig">{chart}</div><div><table><tr><th>cluster size</th>'
            f'<th>clusters</th></tr>{rows}</table><p class="note">{len(sizes):,} {plural(len(sizes), "cluster")}, '
            f'{int(sizes.sum()):,} documents in {"it" if len(sizes) == 1 else "them"}; largest: {int(sizes.max()):,}; '
            f'mean: {sizes.mean():.2f}.</p></div></div>')


def _largest_html(out: Path, top: List[str], sizes: np.ndarray, max_members: int, max_side_by_side: int,
                  punctuation: str, ahead: Optional[ReadAhead] = None) -> str:
    """The clusters ``top`` (of sizes ``sizes``): what happened to each member, and the first
    members side by side with the document each was compared with."""
    limit = max(max_members, max_side_by_side + 1)
    members = _ahead_or(ahead, out, ("members", tuple(top), limit), lambda: cluster_members(out, top, limit))
    wanted = set()  # the documents shown side by side: their texts are read
    for c in top:
        entry = members[c]
        for m in entry["members"][:max_side_by_side + 1]:
            wanted.add(m)
            rep = entry["info"][m][1]
            if rep is not None:
                wanted.add(rep)
    texts = sample_texts(out, wanted)
    parts = []
    if not texts:
        parts.append('<p class="note">Texts are not shown: this folder has no texts_sample.parquet '
                     '(or it holds none of these documents); only ids are listed.</p>')
    for c, size in zip(top, sizes):
        entry = members[c]
        block = [_members_table(c, int(size), entry, max_members)]
        block += _pairs_html(entry, texts, max_side_by_side, punctuation)
        block.append("</div>")
        parts.append("".join(block))
    return "".join(parts)


def _members_table(cluster: str, size: int, entry: dict, max_members: int) -> str:
    """The head of a cluster's block: its first members and what happened to each."""
    head, mem, info = entry["representative"], entry["members"], entry["info"]
    lis = []
    for m in mem[:max_members]:
        role, rep, sim = info[m]
        cls = ' class="kept"' if role in (HEAD, KEPT) else (' class="removed"' if role == REMOVED else "")
        lis.append(f"<tr{cls}><td><code>{_esc(m)}</code></td><td>{_role_html(role, rep, sim, head)}</td></tr>")
    more = (f'<p class="note">... and {size - len(mem[:max_members]):,} more.</p>'
            if size > len(mem[:max_members]) else "")
    return (f'<div class="cluster"><h3>cluster <code>{_esc(cluster)}</code>: '
            f'{size:,} documents</h3><table><tr><th>id</th><th>what happened to it</th></tr>'
            f'{"".join(lis)}</table>{more}')


def _pairs_html(entry: dict, texts: dict, max_side_by_side: int, punctuation: str) -> List[str]:
    """Each member side by side with the document it was compared with: a removed one with its
    own representative, a kept one (chain guard) with the cluster's representative."""
    head, info = entry["representative"], entry["info"]
    pairs = []
    units: dict = {}  # the words of each text, cut up once (the representative is diffed with each member)
    for m in [m for m in entry["members"] if m != head][:max_side_by_side]:
        role, rep, sim = info[m]
        left_id = rep if role == REMOVED and rep is not None else head
        if left_id is None or m not in texts or left_id not in texts:
            continue
        left, right = word_diff_html(texts[left_id], texts[m], punctuation=punctuation, units=units)
        s_txt = f", similarity {sim:.3f}" if isinstance(sim, float) and math.isfinite(sim) else ""
        what = {REMOVED: "removed", KEPT: "kept (chain guard)"}.get(role, "member")
        pairs.append(
            f'<div class="pair"><div class="doc"><div class="h">representative '
            f'<code>{_esc(left_id)}</code> (<del>deleted</del> in the member)</div>{left}</div>'
            f'<div class="doc"><div class="h">{what} <code>{_esc(m)}</code>{s_txt} '
            f'(<ins>inserted</ins>)</div>{right}</div></div>')
    return pairs


def _index_section(out: Path, counts: dict, max_rows: int = 20) -> str:
    """The documents removed against an index (``--against``): their representatives are indexed
    documents, outside this run, so they are in no cluster of it. Empty when there are none."""
    path = out / "removed.parquet"
    n_counted = counts.get("removed_against_index")
    if not path.is_file() or "representative_source" not in schema_names(path):
        if isinstance(n_counted, int) and n_counted > 0:
            return (f'<h2>Removed against an index</h2><p class="note">{n_counted:,} {_docs(n_counted)} '
                    f'{"was" if n_counted == 1 else "were"} removed as near-duplicates of indexed documents; removed.parquet does not say which.</p>')
        return ""
    if _all_null(path, "representative_source"):  # a run without --against: nothing to read
        return ""
    import pyarrow.compute as pc
    t = read_parquet(path, ["id", "representative", "similarity", "representative_source"],
                     keep=lambda b: b.filter(pc.is_valid(b["representative_source"])))  # a batch at a time
    if len(t) == 0:
        return ""
    indexed = len(pc.unique(as_strings(t["representative"])))
    head = t.slice(0, max_rows)
    body = []
    for i, r, s, src in zip(head["id"].to_pylist(), head["representative"].to_pylist(),
                            head["similarity"].to_pylist(), head["representative_source"].to_pylist()):
        s_txt = f"{s:.3f}" if isinstance(s, float) and math.isfinite(s) else "not recorded"
        body.append(f"<tr><td><code>{_esc(i)}</code></td><td>removed</td><td><code>{_esc(r)}</code></td>"
                    f"<td>{_esc(src)}</td><td class=\"num\">{s_txt}</td></tr>")
    return (f'<h2>Removed against an index</h2><p class="note">{len(t):,} {_docs(len(t))} of this run '
            f'{"was" if len(t) == 1 else "were"} removed as near-duplicates of {indexed:,} {_docs(indexed)} already in an index (<code>--against</code>). '
            f'Their representatives are not documents of this run, so they form no cluster above '
            f'(first {min(max_rows, len(t))} shown; all in <code>removed.parquet</code>, with '
            f'<code>representative_source</code>).</p><table><tr><th>document</th><th>what happened to it</th>'
            f'<th>indexed representative</th><th>added to the index as</th><th>similarity</th></tr>'
            f'{"".join(body)}</table>')


def _all_null(path: Path, column: str) -> bool:
    """Every value of ``column`` of a Parquet file is null (read alone, a batch at a time: a
    column of nulls is its validity bits only). False when the file cannot be read (read_parquet
    then says why)."""
    import pyarrow.parquet as pq
    try:
        return all(b.column(0).null_count == b.num_rows
                   for b in pq.ParquetFile(path).iter_batches(columns=[column], batch_size=1 << 16))
    except Exception:  # a damaged file
        return False


def _rejected_section(out: Path, counts: dict) -> str:
    path = out / "rejected.parquet"
    if not path.is_file():
        n = counts.get("rejected")
        return f'<p class="note">{"No rejected records." if not n else "rejected.parquet is missing."}</p>'
    names = schema_names(path)
    cols = [c for c in ("source", "row", "reason") if c in names]
    t = read_parquet(path, cols)
    if len(t) == 0:
        return '<p class="note">No rejected records.</p>'
    head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
    body = "".join("<tr>" + "".join(f"<td>{_esc(_WHOLE_FILE if v is None and c == 'row' else v)}</td>"
                                    for c, v in zip(cols, row)) + "</tr>"
                   for row in zip(*(t[c].to_pylist()[:20] for c in cols)))
    return (f'<p class="note">{len(t):,} {plural(len(t), "record")} could not be read (first {min(20, len(t))} shown; '
            f'all in <code>rejected.parquet</code>).</p><table><tr>{head}</tr>{body}</table>')


_WHOLE_FILE = "(whole file)"  # the row of a rejection that is about a whole file, not one of its records
_LIST_SHOWN = 5  # items of a recorded list shown in the report (stats.json has them all)


def _bounded(value: Any) -> Any:
    """A recorded value as the report shows it: a list longer than _LIST_SHOWN as its length and
    its first items (stats.json's ``inputs`` and ``kept_files`` list every file of a run)."""
    if isinstance(value, list) and len(value) > _LIST_SHOWN:
        return f"{len(value):,} entries; the first {_LIST_SHOWN}: " + json.dumps(value[:_LIST_SHOWN], default=str)
    return value


def _kept_note(out: Path, tally: Optional[KeptTally] = None) -> str:
    """The line on kept/: its files and bytes, ``tally`` where the run that wrote them gives
    them (kept/ is then not listed: a stat a file), else as kept/ holds them."""
    kept = out / "kept"
    if not kept.is_dir():
        return ""
    count, size = tally if tally is not None else _files_below(str(kept))
    return (f'<p class="note">Kept documents: {count:,} {plural(count, "file")}, {size / 1e6:,.1f} MB in '
            f'<code>kept/</code>.</p>')


def _files_below(folder: str) -> Tuple[int, int]:
    """How many files lie below ``folder`` and their bytes (links to files counted as files,
    links to folders not followed; one scandir a folder, no path objects: kept/ may hold
    100,000 files)."""
    count = size = 0
    with os.scandir(folder) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                c, s = _files_below(entry.path)
                count, size = count + c, size + s
            elif entry.is_file():
                count, size = count + 1, size + entry.stat().st_size
    return count, size


MAX_CLUSTERS, MAX_MEMBERS, MAX_SIDE_BY_SIDE = 10, 8, 3  # the page's defaults


def render_report(output_dir, *, plots: str = "auto", max_clusters: int = MAX_CLUSTERS,
                  max_members: int = MAX_MEMBERS, max_side_by_side: int = MAX_SIDE_BY_SIDE, stats: Optional[dict] = None,
                  kept: Optional[KeptTally] = None, ahead: Optional[ReadAhead] = None) -> str:
    """The report of a dedup output folder (a path, a URL or a :class:`~neardup.io.storage.folder.Folder`)
    as one HTML string (see :func:`write_report`). ``stats``: the run's stats (what its stats.json
    holds or will hold); given, stats.json is not read, and the page is the one that stats.json
    would give. ``kept``: the files and bytes of its kept/, as the run that wrote it counted
    them; given, kept/ is not listed (100,000 files: a stat each), the page the same."""
    folder = Folder.of(output_dir)
    folder.require_folder()
    recorded = None if stats is None else as_recorded(stats)
    names = _REPORT_INPUTS if recorded is None else _REPORT_INPUTS[1:]
    # Arrow's allocations by the system allocator, which gives back what a batch freed, where
    # Arrow's default pool (mimalloc) keeps it: the page reads removed.parquet and clusters.parquet
    # a batch at a time, and under mimalloc the process kept growing with the number of batches
    # (+44 MiB from 300k to 1M documents; +12 MiB with the system allocator; the driver's peak is
    # this page's: issue 28)
    with folder.local_view(names, sizes_only=("kept",)) as local, system_pool():
        out = Path(local)
        return _page(out, load_stats(out) if recorded is None else recorded, plots, max_clusters=max_clusters,
                     max_members=max_members, max_side_by_side=max_side_by_side, kept=kept, ahead=ahead)


# ---- what a run reads ahead -----------------------------------------------------------------

class ReadAhead:
    """What :func:`read_ahead` found of one local output folder, for the page drawn next of it
    (:func:`render_report`'s ``ahead``): the folder, its member files' stamps then, and
    ``{key: value}``, each value given once. Its owner (a run: ``Run.report_ahead``) hands it to
    the page and lets go of it after."""

    __slots__ = ("folder", "stamp", "values")

    def __init__(self, folder: str, stamp: tuple, values: dict):
        self.folder, self.stamp, self.values = folder, stamp, values

    def holds(self, out: Path, key: tuple) -> bool:
        """Whether it holds a value under ``key`` for ``out``: the folder read ahead, its member
        files still the ones read then."""
        return str(out) == self.folder and key in self.values and _stamp(out) == self.stamp


def _stamp(out: Path) -> tuple:
    """What says that removed.parquet and clusters.parquet are the files read ahead: each one's
    inode, size and modification time (None when absent)."""
    found = []
    for name in ("removed.parquet", "clusters.parquet"):
        try:
            st = os.stat(out / name)
            found.append((st.st_ino, st.st_size, st.st_mtime_ns))
        except OSError:
            found.append(None)
    return tuple(found)


def _ahead_or(ahead: Optional[ReadAhead], out: Path, key: tuple, compute):
    """The value ``ahead`` holds under ``key`` for the folder ``out`` when its member files are
    the ones read then, else ``compute()``."""
    if ahead is not None and ahead.holds(out, key):
        return ahead.values.pop(key)  # given once
    return compute()


def read_ahead(output_dir) -> Optional[ReadAhead]:
    """What the page of a local output folder reads of its removed.parquet and clusters.parquet
    (the similarities, the cluster sizes, the members of the largest clusters: the reading and
    most of the CPU of the page before its word diffs), read now and returned for the next
    :func:`render_report` of the folder with the default sizes (its ``ahead``), which uses it
    when those files are still the same (inode, size, modification time). A run calls it in the
    write stage's thread once it has written both files, while the main thread copies the kept
    lines (numba, outside the GIL), and keeps it on its ``Run`` for its page: at 100,000
    documents ~10 CPU-ms off the main thread's path. The page's bytes are the same either way
    (the same functions of the same files). It raises nothing: whatever fails here (None, or a
    value left out) is read again, and fails, where the page is drawn."""
    try:
        folder = Folder.of(output_dir)
        if folder.os_path is None:
            return None
        out = Path(fs.local_path(folder.shown))
        stamp = _stamp(out)
        values = {}
        with system_pool():  # (as the page is drawn: render_report)
            path = out / "removed.parquet"
            if path.is_file():
                values[("similarities",)] = _similarities(path)
            sized = cluster_sizes(out, MAX_CLUSTERS)
            values[("sizes", MAX_CLUSTERS)] = sized
            if sized is not None and len(sized[1]):
                top = [str(c) for c in sized[0].slice(0, MAX_CLUSTERS).to_pylist()]
                limit = max(MAX_MEMBERS, MAX_SIDE_BY_SIDE + 1)
                values[("members", tuple(top), limit)] = cluster_members(out, top, limit)
        if _stamp(out) == stamp:
            return ReadAhead(str(out), stamp, values)
    except Exception:  # noqa: BLE001 (read again where the page is drawn)
        pass
    return None


def write_report(output_dir, output=None, *, plots: str = "auto", overwrite: bool = False,
                 stats: Optional[dict] = None, kept: Optional[KeptTally] = None,
                 ahead: Optional[ReadAhead] = None) -> Union[Path, str]:
    """Write ``report.html`` (or ``output``) for a dedup output folder and return its path (a
    Path, or the URL of a report written to a store).

    ``output_dir``: a path, a URL or a :class:`~neardup.io.storage.folder.Folder`. The folder must
    hold ``stats.json``, unless ``stats`` gives its content (a run writes its report before its
    stats.json: then stats.json is not read; ``kept``, its kept/'s files and bytes: then kept/ is
    not listed; ``ahead``, what :func:`read_ahead` read of it); ``removed.parquet``, ``clusters.parquet``,
    ``texts_sample.parquet``, ``rejected.parquet`` and ``kept/`` are used when present. The file is
    self-contained: inline CSS, images as base64 PNG (matplotlib) or inline SVG (without it), no
    scripts, no external links. ``plots``: ``auto`` (matplotlib when installed), ``matplotlib``
    or ``svg`` (never import matplotlib; faster).

    The folder and ``output`` may each be local or on a store (a URL): a remote folder's files are
    read from a local copy (:meth:`~neardup.io.storage.folder.Folder.local_view`). The folder's own
    ``report.html`` is always replaced. ``output`` is refused (ConfigError, before any work) when
    it is one of the folder's files or under its ``kept/``, and when it exists, unless
    ``overwrite``. The page appears whole or not at all: written under a temporary name in the
    same folder, then renamed (on a store: one upload); a failed write (a folder that cannot be
    written, a full disk) is a one-line ConfigError naming the path and leaves no temporary file.
    """
    folder = Folder.of(output_dir)
    folder.require_folder()
    given = fs.local_path(folder.shown)  # the folder as the user named it: what is shown
    default = fs.join(given, REPORT_NAME)
    path = os.fspath(output) if output is not None else default
    owned = same_file(path, default)  # the folder's own report: neardup's to replace
    check_output_file(path, inputs=[fs.join(given, n) for n in _REPORT_INPUTS], inside=[fs.join(given, "kept")],
                      overwrite=overwrite or owned, option="--output", remote_ok=True)
    text = render_report(folder, plots=plots, stats=stats, kept=kept, ahead=ahead)
    return publish_file(path, text.encode("utf-8"), overwrite=overwrite or owned, option="--output")


def _page(out: Path, stats: dict, plots: str, *, max_clusters: int, max_members: int, max_side_by_side: int,
          kept: Optional[KeptTally] = None, ahead: Optional[ReadAhead] = None) -> str:
    """The page of the output folder ``out`` (a local directory) and its stats."""
    counts = stats.get("counts") if isinstance(stats.get("counts"), dict) else {}
    params = stats.get("params") if isinstance(stats.get("params"), dict) else {}
    seconds = stats.get("seconds") if isinstance(stats.get("seconds"), dict) else {}
    figs = _Figures(plots)
    resolved = _resolve_bands(params) if params else None
    threshold = resolved[0] if resolved else None

    sections = []
    # Nothing here depends on when or where the report is written (no clock, no output path, no
    # timings): the same run gives the same bytes.
    sections.append(f'<h1>neardup report</h1><div class="sub">{_inputs_line(stats)}</div>')
    sections.append(_section_counts(counts, params.get("verify")))
    sections.append(_kept_note(out, kept))
    sections.append("<h2>Parameters</h2>")
    sections.append(_parameters_html(params, resolved))
    if seconds:
        sections.append('<p class="note">Time per stage: see <code>seconds</code> in stats.json (left '
                        'out here so that the same run always gives the same report).</p>')
    sections.append("<h2>S-curve</h2>")
    sections.append(_s_curve_html(figs, resolved))
    sections.append("<h2>Similarity of removed documents</h2>")
    sections.append(_similarity_histogram(out, figs, threshold, ahead))
    index_html = _index_section(out, counts)
    size_html, largest_html = _cluster_section(out, figs, max_clusters, max_members, max_side_by_side,
                                               _punctuation_of(params), against=bool(index_html), ahead=ahead)
    sections.append("<h2>Cluster sizes</h2>")
    sections.append(size_html)
    sections.append("<h2>Largest clusters</h2>")
    sections.append(largest_html)
    sections.append(index_html)
    sections.append("<h2>Rejected records</h2>")
    sections.append(_rejected_section(out, counts))
    extra = {k: v for k, v in stats.items() if k not in ("counts", "params", "seconds")}
    if extra:
        sections.append("<h2>Other recorded values</h2>" + _kv_table({k: _bounded(v) for k, v in extra.items()}))

    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>neardup report</title><style>{_CSS}</style></head>"
            "<body><main>\n" + "\n".join(sections) + "\n</main></body></html>\n")


def _parameters_html(params: dict, resolved: Optional[Tuple[float, int, int]]) -> str:
    """The recorded parameters, and beside them the S-curve's numbers of the bands and rows."""
    left = _kv_table(params) if params else '<p class="note">No parameters recorded.</p>'
    right = ""
    if resolved:
        t, b, r = resolved
        fp, fn = areas(t, b, r)
        right = _kv_table({
            "bands x rows": f"{b} x {r}",
            "midpoint (1/b)^(1/r)": f"{midpoint(b, r):.4f}",
            f"P(candidate | J = {t:g})": f"{candidate_probability(t, b, r):.4f}",
            f"false-positive area [0, {t:g}]": f"{fp:.4f}",
            f"false-negative area [{t:g}, 1]": f"{fn:.4f}",
        })
    return f'<div class="grid2"><div>{left}</div><div>{right}</div></div>'


def _s_curve_html(figs: _Figures, resolved: Optional[Tuple[float, int, int]]) -> str:
    if not resolved:
        return '<p class="note">The parameters (threshold, bands, rows) are not recorded.</p>'
    t, b, r = resolved
    return (f'<div class="grid2"><div class="fig">{figs.s_curve(b, r, t)}</div><div class="note" '
            f'style="max-width:420px">Probability that two documents of Jaccard similarity J become a '
            f'candidate pair: 1 - (1 - J<sup>{r}</sup>)<sup>{b}</sup>. At the threshold {t:g} it is '
            f'{candidate_probability(t, b, r):.3f}; the curve is steepest near the midpoint '
            f'{midpoint(b, r):.3f}. Run <code>neardup audit</code> to measure it on this corpus.</div></div>')
