"""Pictures of the S-curve and of audit / report data.

Three kinds of output, all without a display:

* :func:`ascii_s_curve`: a character plot for the terminal (``neardup params``).
* matplotlib figures (``--plot FILE.png|FILE.svg``, report images). matplotlib is optional: it
  is imported only when a figure is asked for, through :func:`require_matplotlib`, which raises a
  one-line :class:`~neardup.errors.ConfigError` telling to ``pip install matplotlib``.
* small hand-written inline SVG charts (:func:`svg_line_chart`, :func:`svg_bar_chart`), used by
  the HTML report when matplotlib is not installed.
"""

from __future__ import annotations

import base64
import html
import io
import math
import os
from typing import List, Optional, Sequence, Tuple

import numpy as np

from ..errors import ConfigError
from ..config.params import candidate_probability, midpoint

__all__ = [
    "have_matplotlib", "require_matplotlib", "plot_format", "ascii_s_curve",
    "s_curve_figure", "save_figure", "figure_to_data_uri", "plot_s_curve",
    "svg_line_chart", "svg_bar_chart",
]

PLOT_FORMATS = ("png", "svg")

# Colours shared by the matplotlib and the SVG pictures.
CURVE = "#1f4e9c"
THRESHOLD = "#c0392b"
MIDPOINT = "#111111"
FP_FILL = "#e67e22"
FN_FILL = "#8e44ad"
BAR = "#2e86c1"


# --------------------------------------------------------------------------------------------
# matplotlib, lazily


def have_matplotlib() -> bool:
    """True when matplotlib can be imported (without importing pyplot)."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def require_matplotlib():
    """Import matplotlib on the Agg backend and return ``matplotlib.pyplot``.

    Raises a one-line :class:`ConfigError` when it is not installed.
    """
    try:
        import matplotlib
    except ImportError:
        raise ConfigError("plots need matplotlib, which is not installed: pip install matplotlib "
                          "(or pip install 'neardup[plot]')") from None
    # Never open a window; the Agg backend writes PNG and, with its SVG sibling, SVG.
    if "matplotlib.pyplot" not in __import__("sys").modules:
        matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt
    return plt


def plot_format(path: str) -> str:
    """``png`` or ``svg`` from a file name; anything else is a ConfigError."""
    ext = os.path.splitext(str(path))[1].lower().lstrip(".")
    if ext not in PLOT_FORMATS:
        raise ConfigError(f"the plot file must end in .png or .svg, got {str(path)!r}")
    return ext


def save_figure(fig, path: str, *, overwrite: bool = True) -> str:
    """Write a figure to ``path`` (format from the extension) and close it.

    The file appears whole or not at all (drawn in memory, written under a temporary name in
    the same folder, then renamed: :func:`neardup.io.storage.outfile.publish_file`); without ``overwrite`` an
    existing file is left alone (ConfigError). A folder that cannot be written or a full disk is
    a one-line ConfigError that names the path."""
    from ..io.storage.fs import redact
    from ..io.storage.outfile import publish_file
    fmt = plot_format(path)
    plt = require_matplotlib()
    directory = os.path.dirname(os.path.abspath(str(path)))
    if not os.path.isdir(directory):
        plt.close(fig)
        raise ConfigError(f"cannot write the plot {redact(str(path))!r}: the folder {redact(directory)} "
                          f"does not exist")
    buf = io.BytesIO()
    try:
        fig.savefig(buf, format=fmt, dpi=120, bbox_inches="tight")
    finally:
        plt.close(fig)
    publish_file(str(path), buf.getvalue(), overwrite=overwrite, option="--plot")
    return str(path)


def figure_to_data_uri(fig, fmt: str = "png") -> str:
    """Render a figure to a ``data:`` URI (base64) and close it."""
    plt = require_matplotlib()
    buf = io.BytesIO()
    try:
        fig.savefig(buf, format=fmt, dpi=100, bbox_inches="tight")
    finally:
        plt.close(fig)
    mime = "image/png" if fmt == "png" else "image/svg+xml"
    return f"data:{mime};base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def s_curve_figure(bands: int, rows: int, threshold: float, *, shade: bool = True,
                   title: Optional[str] = None, figsize=(7.0, 4.6)):
    """A matplotlib figure of P(candidate | J = s) = 1 - (1 - s^r)^b with the threshold line,
    the midpoint (1/b)^(1/r) and, with ``shade``, the false-positive area (under the curve left of
    the threshold) and the false-negative area (above the curve right of it)."""
    from ..config.params import false_negative_area, false_positive_area
    plt = require_matplotlib()
    s = np.linspace(0.0, 1.0, 1001)
    p = candidate_probability(s, bands, rows)
    mid = midpoint(bands, rows)
    fig, ax = plt.subplots(figsize=figsize)
    ax.plot(s, p, color=CURVE, lw=2.2, label=f"1 - (1 - s^{rows})^{bands}", zorder=3)
    if shade:
        left = s <= threshold
        right = s >= threshold
        fp = false_positive_area(threshold, bands, rows)
        fn = false_negative_area(threshold, bands, rows)
        ax.fill_between(s[left], 0, p[left], color=FP_FILL, alpha=0.35,
                        label=f"false-positive area = {fp:.4f}")
        ax.fill_between(s[right], p[right], 1, color=FN_FILL, alpha=0.30,
                        label=f"false-negative area = {fn:.4f}")
    p_t = candidate_probability(threshold, bands, rows)
    ax.axvline(threshold, color=THRESHOLD, ls="--", lw=1.4,
               label=f"threshold {threshold:g}: P = {p_t:.3f}", zorder=2)
    ax.plot([mid], [candidate_probability(mid, bands, rows)], "o", color=MIDPOINT, ms=6,
            label=f"midpoint (1/b)^(1/r) = {mid:.3f}", zorder=4)
    ax.set_xlim(0, 1)
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("Jaccard similarity s")
    ax.set_ylabel("P(candidate pair)")
    ax.set_title(title or f"LSH S-curve: {bands} bands x {rows} rows")
    ax.grid(True, alpha=0.3)
    ax.legend(loc="upper left", fontsize=8, framealpha=0.9)
    fig.tight_layout()
    return fig


def plot_s_curve(path: str, bands: int, rows: int, threshold: float, *, overwrite: bool = True, **kwargs) -> str:
    """Write the S-curve figure to ``path`` (.png or .svg); an existing file only with ``overwrite``."""
    plot_format(path)
    return save_figure(s_curve_figure(bands, rows, threshold, **kwargs), path, overwrite=overwrite)


# --------------------------------------------------------------------------------------------
# The terminal


def ascii_s_curve(bands: int, rows: int, threshold: Optional[float] = None, *,
                  width: int = 60, height: int = 15) -> str:
    """The S-curve as a ``width`` x ``height`` character plot.

    ``*`` is the curve (steep stretches are drawn as vertical runs), ``|`` the threshold column,
    ``:`` the midpoint column; the x axis runs over similarity 0..1 and the y axis over P 0..1.
    """
    if width < 10 or height < 3:
        raise ValueError("the plot needs width >= 10 and height >= 3")
    grid = [[" "] * width for _ in range(height)]
    xs = np.arange(width) / (width - 1)
    ps = candidate_probability(xs, bands, rows)
    levels = np.rint(ps * (height - 1)).astype(int)

    def col_of(v: float) -> int:
        return int(round(v * (width - 1)))

    mid_col = col_of(midpoint(bands, rows))
    thr_col = col_of(threshold) if threshold is not None else None
    for y in range(height):
        grid[y][mid_col] = ":"
    if thr_col is not None:
        for y in range(height):
            grid[y][thr_col] = "|"
    prev = None
    for x, level in enumerate(levels):
        if prev is None or level == prev:
            ys = range(level, level + 1)
        elif level > prev:  # a steep rise: connect to the previous column
            ys = range(prev + 1, level + 1)
        else:
            ys = range(level, prev)
        for y in ys:
            grid[height - 1 - y][x] = "*"
        prev = level
    lines = []
    for i, row in enumerate(grid):
        level = (height - 1 - i) / (height - 1)
        if i == 0 or i == height - 1 or ((height - 1) % 2 == 0 and i == (height - 1) // 2):
            label = f"{level:4.2f}"
        else:
            label = "    "
        lines.append(f"{label} |" + "".join(row))
    lines.append("     +" + "-" * width)
    axis = [" "] * width
    for value in (0.0, 0.25, 0.5, 0.75, 1.0):
        text = f"{value:g}"
        c = col_of(value)
        start = max(0, min(width - len(text), c - len(text) // 2))
        axis[start:start + len(text)] = list(text)
    lines.append("      " + "".join(axis))
    marks = [" "] * width
    marks[mid_col] = "m"
    if thr_col is not None:
        marks[thr_col] = "t"
    lines.append("      " + "".join(marks).rstrip())
    legend = (f"      x: Jaccard similarity, y: P(candidate); * curve, "
              f"t = threshold{'' if threshold is None else f' {threshold:g}'}, "
              f"m = midpoint {midpoint(bands, rows):.3f}")
    lines.append(legend)
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# Inline SVG without matplotlib (for the HTML report)


def _fmt(v: float) -> str:
    return f"{v:.2f}".rstrip("0").rstrip(".") if v == v else "0"


def _svg_frame(width: int, height: int, title: str, xlabel: str, ylabel: str,
               x_ticks: Sequence[Tuple[float, str]], y_ticks: Sequence[Tuple[float, str]],
               px, py, body: List[str], legend: Sequence[Tuple[str, str]] = ()) -> str:
    left, right, top, bottom = 56, 16, 30, 44
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" role="img" font-family="sans-serif" font-size="11">',
           f"<title>{html.escape(title)}</title>",
           f'<rect x="0" y="0" width="{width}" height="{height}" fill="#ffffff"/>',
           f'<text x="{width / 2:.1f}" y="18" text-anchor="middle" font-size="13" '
           f'font-weight="bold">{html.escape(title)}</text>']
    x0, x1 = left, width - right
    y0, y1 = height - bottom, top
    for value, label in y_ticks:
        y = py(value)
        out.append(f'<line x1="{x0}" y1="{y:.1f}" x2="{x1}" y2="{y:.1f}" stroke="#dddddd"/>')
        out.append(f'<text x="{x0 - 5}" y="{y + 4:.1f}" text-anchor="end">{html.escape(label)}</text>')
    for value, label in x_ticks:
        x = px(value)
        out.append(f'<line x1="{x:.1f}" y1="{y0}" x2="{x:.1f}" y2="{y0 + 4}" stroke="#333333"/>')
        out.append(f'<text x="{x:.1f}" y="{y0 + 16}" text-anchor="middle">{html.escape(label)}</text>')
    out.extend(body)
    out.append(f'<polyline points="{x0},{y1} {x0},{y0} {x1},{y0}" fill="none" stroke="#333333"/>')
    out.append(f'<text x="{(x0 + x1) / 2:.1f}" y="{height - 8}" text-anchor="middle">{html.escape(xlabel)}</text>')
    out.append(f'<text x="14" y="{(y0 + y1) / 2:.1f}" text-anchor="middle" '
               f'transform="rotate(-90 14 {(y0 + y1) / 2:.1f})">{html.escape(ylabel)}</text>')
    for i, (color, label) in enumerate(legend):
        ly = top + 8 + 15 * i
        out.append(f'<rect x="{x0 + 8}" y="{ly - 8}" width="12" height="9" fill="{color}"/>')
        out.append(f'<text x="{x0 + 24}" y="{ly}">{html.escape(label)}</text>')
    out.append("</svg>")
    return "\n".join(out)


def svg_line_chart(bands: int, rows: int, threshold: float, *, width: int = 640,
                   height: int = 360, title: Optional[str] = None) -> str:
    """The S-curve as inline SVG: curve, shaded FP / FN areas, threshold line, midpoint dot."""
    left, right, top, bottom = 56, 16, 30, 44

    def px(v):
        return left + v * (width - left - right)

    def py(v):
        return (height - bottom) - v * (height - top - bottom)

    s = np.linspace(0.0, 1.0, 401)
    p = candidate_probability(s, bands, rows)
    pts = " ".join(f"{px(a):.1f},{py(b):.1f}" for a, b in zip(s, p))
    left_s = s[s <= threshold]
    right_s = s[s >= threshold]
    body = []
    if left_s.size:
        lp = candidate_probability(left_s, bands, rows)
        poly = [f"{px(left_s[0]):.1f},{py(0):.1f}"] + [f"{px(a):.1f},{py(b):.1f}" for a, b in zip(left_s, lp)]
        poly.append(f"{px(left_s[-1]):.1f},{py(0):.1f}")
        body.append(f'<polygon points="{" ".join(poly)}" fill="{FP_FILL}" fill-opacity="0.35"/>')
    if right_s.size:
        rp = candidate_probability(right_s, bands, rows)
        poly = [f"{px(a):.1f},{py(b):.1f}" for a, b in zip(right_s, rp)]
        poly += [f"{px(right_s[-1]):.1f},{py(1):.1f}", f"{px(right_s[0]):.1f},{py(1):.1f}"]
        body.append(f'<polygon points="{" ".join(poly)}" fill="{FN_FILL}" fill-opacity="0.30"/>')
    body.append(f'<polyline points="{pts}" fill="none" stroke="{CURVE}" stroke-width="2.2"/>')
    body.append(f'<line x1="{px(threshold):.1f}" y1="{py(0):.1f}" x2="{px(threshold):.1f}" '
                f'y2="{py(1):.1f}" stroke="{THRESHOLD}" stroke-dasharray="5,4" stroke-width="1.5"/>')
    mid = midpoint(bands, rows)
    body.append(f'<circle cx="{px(mid):.1f}" cy="{py(candidate_probability(mid, bands, rows)):.1f}" '
                f'r="4" fill="{MIDPOINT}"/>')
    ticks = [(v, _fmt(v)) for v in (0, 0.2, 0.4, 0.6, 0.8, 1.0)]
    legend = [(CURVE, f"P = 1 - (1 - s^{rows})^{bands}"),
              (THRESHOLD, f"threshold {threshold:g}: P = {candidate_probability(threshold, bands, rows):.3f}"),
              (MIDPOINT, f"midpoint {mid:.3f}"),
              (FP_FILL, "false-positive area"), (FN_FILL, "false-negative area")]
    return _svg_frame(width, height, title or f"LSH S-curve: {bands} bands x {rows} rows",
                      "Jaccard similarity s", "P(candidate pair)", ticks, ticks, px, py, body, legend)


def svg_bar_chart(labels: Sequence[str], values: Sequence[float], *, title: str, xlabel: str,
                  ylabel: str, width: int = 640, height: int = 300,
                  marker: Optional[Tuple[int, str]] = None) -> str:
    """Bars with one label each (a histogram when labels are bin edges), as inline SVG.

    ``marker`` = (bar index, text) draws a dashed line before that bar (e.g. the threshold).
    """
    left, right, top, bottom = 56, 16, 30, 44
    n = max(1, len(values))
    vmax, y_step = _nice_top(max([float(v) for v in values] + [1.0]))
    plot_w = width - left - right

    def px(i):
        return left + i * plot_w / n

    def py(v):
        return (height - bottom) - (v / vmax) * (height - top - bottom)

    body = []
    for i, v in enumerate(values):
        if v > 0:
            body.append(f'<rect x="{px(i) + 0.5:.1f}" y="{py(v):.1f}" width="{max(plot_w / n - 1, 0.5):.1f}" '
                        f'height="{py(0) - py(v):.1f}" fill="{BAR}"><title>{html.escape(str(labels[i]))}: '
                        f'{_count(v)}</title></rect>')
    if marker is not None:
        i, text = marker
        body.append(f'<line x1="{px(i):.1f}" y1="{py(0):.1f}" x2="{px(i):.1f}" y2="{py(vmax):.1f}" '
                    f'stroke="{THRESHOLD}" stroke-dasharray="5,4" stroke-width="1.5"/>')
        body.append(f'<text x="{px(i) + 4:.1f}" y="{py(vmax) + 12:.1f}" fill="{THRESHOLD}">{html.escape(text)}</text>')
    step = max(1, int(math.ceil(n / 10)))
    x_ticks = [(i + 0.5, str(labels[i])) for i in range(0, n, step)]
    y_ticks = [(v, _count(v)) for v in np.arange(0.0, vmax + y_step / 2, y_step)]

    def px_tick(v):
        return left + v * plot_w / n

    return _svg_frame(width, height, title, xlabel, ylabel, x_ticks, y_ticks, px_tick, py, body)


def _nice_top(vmax: float) -> Tuple[float, float]:
    """(top, step): a round tick step (1, 2 or 5 times a power of ten, at least 1) giving 3 to 6
    ticks, and the first multiple of it at or above vmax."""
    raw = max(vmax / 5.0, 1.0)
    power = 10.0 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    return math.ceil(vmax / step) * step, step


def _count(v: float) -> str:
    return f"{int(round(v)):,}" if abs(v - round(v)) < 1e-9 or v >= 100 else f"{v:.1f}"
