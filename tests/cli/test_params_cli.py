"""`neardup params`: every printed number against values computed here by hand."""

from __future__ import annotations

import argparse
import json
import re
import sys

import numpy as np
import pytest

from helpers import run_cli


# ---- independent reference values ------------------------------------------------------------

def p_cand(s, b, r):
    return 1.0 - (1.0 - s ** r) ** b


def simpson(f, lo, hi, n=200_000):
    """Composite Simpson's rule on n (even) intervals: independent of params' Gauss-Legendre."""
    if hi <= lo:
        return 0.0
    x = np.linspace(lo, hi, n + 1)
    y = f(x)
    h = (hi - lo) / n
    return float(h / 3 * (y[0] + y[-1] + 4 * y[1:-1:2].sum() + 2 * y[2:-1:2].sum()))


def fp_area(t, b, r):
    return simpson(lambda s: p_cand(s, b, r), 0.0, t)


def fn_area(t, b, r):
    return simpson(lambda s: 1.0 - p_cand(s, b, r), t, 1.0)


def number_after(label, text):
    m = re.search(re.escape(label) + r"\s+([0-9.]+)", text)
    assert m, f"{label!r} not in output:\n{text}"
    return float(m.group(1))


TOL = 6e-5  # printed with 4 decimals


# ---- text output -------------------------------------------------------------------------------

@pytest.mark.slow
def test_default_0_8_128_text(capsys):
    assert run_cli("params", "--threshold", "0.8", "--num-perm", "128") == 0
    out = capsys.readouterr().out
    b, r, t = 18, 7, 0.8
    assert "chosen: 18 bands x 7 rows (uses 126 of 128" in out
    assert "fewest false positives" in out  # ParamChoice.reason
    assert number_after("midpoint (1/b)^(1/r)", out) == pytest.approx((1 / 18) ** (1 / 7), abs=TOL)
    assert number_after("P(candidate | J = 0.8)", out) == pytest.approx(1 - (1 - 0.8 ** 7) ** 18, abs=TOL)
    assert number_after("false-positive area [0, 0.8]", out) == pytest.approx(fp_area(t, b, r), abs=TOL)
    assert number_after("false-negative area [0.8, 1]", out) == pytest.approx(fn_area(t, b, r), abs=TOL)
    # hand values quoted in the docs
    assert abs(number_after("P(candidate | J = 0.8)", out) - 0.9855) < TOL
    # P at similarities around the threshold
    found = dict((float(j), float(p)) for j, p in re.findall(r"J = ([0-9.]+)\s+P = ([0-9.]+)", out))
    assert {0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95} <= set(found)
    for s, p in found.items():
        assert p == pytest.approx(p_cand(s, b, r), abs=TOL), s
    assert re.search(r"J = 0\.8\s+P = 0\.9855\s+<- threshold", out)


def parse_alternatives(out):
    rows = []
    block = out.split("alternatives for num_perm")[1].split("\n\n")[0]
    for line in block.splitlines()[2:]:
        m = re.match(r"\s+(\d+)\s+(\d+)\s+(\d+)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)(.*)$", line)
        assert m, line
        rows.append(dict(bands=int(m[1]), rows=int(m[2]), used=int(m[3]), midpoint=float(m[4]),
                         p=float(m[5]), fp=float(m[6]), fn=float(m[7]), tag=m[8]))
    return rows


def test_alternatives_table_numbers(capsys):
    assert run_cli("params", "--threshold", "0.8", "--num-perm", "128") == 0
    out = capsys.readouterr().out
    rows = parse_alternatives(out)
    assert len(rows) >= 4
    by = {(x["bands"], x["rows"]): x for x in rows}
    # the default pick and the weighted optimiser's pick are always in the table
    assert "chosen" in by[(18, 7)]["tag"]
    assert "weighted optimiser" in by[(9, 13)]["tag"]
    assert by[(9, 13)]["p"] == pytest.approx(1 - (1 - 0.8 ** 13) ** 9, abs=TOL)
    assert abs(by[(9, 13)]["p"] - 0.3988) < TOL
    for x in rows:
        b, r = x["bands"], x["rows"]
        assert b * r <= 128 and x["used"] == b * r
        assert x["midpoint"] == pytest.approx((1 / b) ** (1 / r), abs=TOL)
        assert x["p"] == pytest.approx(p_cand(0.8, b, r), abs=TOL)
        assert x["fp"] == pytest.approx(fp_area(0.8, b, r), abs=TOL)
        assert x["fn"] == pytest.approx(fn_area(0.8, b, r), abs=TOL)
    assert "would pick 9 x 13" in out


def test_terminal_s_curve(capsys):
    assert run_cli("params") == 0  # defaults 0.8 / 128
    out = capsys.readouterr().out
    plot = out.split("S-curve of 18 bands x 7 rows:")[1].strip("\n").splitlines()
    body = [line for line in plot if re.match(r"^(\d\.\d\d| {4}) \|", line)]
    assert len(body) == 15
    assert all(len(line) == 6 + 60 for line in body)
    assert body[0].startswith("1.00 |") and body[-1].startswith("0.00 |")
    # the curve is low at the left and high at the right
    assert body[-1][6] == "*" and body[0][-1] == "*"
    # threshold column: 0.8 of the way across
    col = 6 + round(0.8 * 59)
    assert all(line[col] in "|*" for line in body)
    assert any(line[col] == "|" for line in body)
    assert "t = threshold 0.8" in out and "m = midpoint 0.662" in out


@pytest.mark.parametrize("t,k", [(0.5, 64), (0.9, 256), (0.7, 32)])
@pytest.mark.slow
def test_other_points_json_matches_hand_values(capsys, t, k):
    assert run_cli("params", "--threshold", str(t), "--num-perm", str(k), "--json") == 0
    d = json.loads(capsys.readouterr().out)
    b, r = d["bands"], d["rows"]
    assert b * r <= k
    assert d["min_recall"] == 0.985 and d["p_at_threshold"] >= 0.985  # the default chooser's promise
    assert d["midpoint"] == pytest.approx((1 / b) ** (1 / r), rel=1e-12)
    assert d["p_at_threshold"] == pytest.approx(p_cand(t, b, r), rel=1e-12)
    assert d["false_positive_area"] == pytest.approx(fp_area(t, b, r), abs=1e-7)
    assert d["false_negative_area"] == pytest.approx(fn_area(t, b, r), abs=1e-7)
    for key, p in d["p_at"].items():
        assert p == pytest.approx(p_cand(float(key), b, r), rel=1e-9, abs=1e-15)
    # brute force: no (b', r') with b'r' <= k that reaches the recall has a smaller FP area
    feasible = [(bb, rr) for bb in range(1, k + 1) for rr in range(1, k // bb + 1) if p_cand(t, bb, rr) >= 0.985]
    best = min(simpson(lambda s, bb=bb, rr=rr: p_cand(s, bb, rr), 0.0, t, n=4000) for bb, rr in feasible)
    assert d["false_positive_area"] <= best + 1e-7


def test_json_keys_and_alternatives(capsys):
    assert run_cli("params", "--threshold", "0.8", "--num-perm", "128", "--json") == 0
    out = capsys.readouterr().out
    d = json.loads(out)  # ONE JSON object, nothing else on stdout
    for key in ("threshold", "num_perm", "bands", "rows", "midpoint", "p_at_threshold",
                "false_positive_area", "false_negative_area", "alternatives", "p_at", "method", "reason"):
        assert key in d, key
    assert (d["threshold"], d["num_perm"], d["bands"], d["rows"], d["method"]) == (0.8, 128, 18, 7, "recall")
    assert isinstance(d["alternatives"], list) and all(isinstance(a, dict) for a in d["alternatives"])
    pairs = {(a["bands"], a["rows"]): a for a in d["alternatives"]}
    assert (18, 7) in pairs and (9, 13) in pairs
    assert pairs[(9, 13)]["p_at_threshold"] == pytest.approx(1 - (1 - 0.8 ** 13) ** 9, rel=1e-12)
    assert d["weighted"]["bands"] == 9 and d["weighted"]["rows"] == 13
    for a in d["alternatives"]:
        assert a["false_positive_area"] == pytest.approx(fp_area(0.8, a["bands"], a["rows"]), abs=1e-7)
    assert d["p_at"]["0.8"] == pytest.approx(1 - (1 - 0.8 ** 7) ** 18, rel=1e-12)


@pytest.mark.slow
def test_weighted_method_and_given_bands_rows(capsys):
    assert run_cli("params", "--method", "weighted", "--json") == 0
    d = json.loads(capsys.readouterr().out)
    assert (d["bands"], d["rows"], d["method"]) == (9, 13, "weighted")
    assert d["p_at_threshold"] == pytest.approx(0.3988, abs=1e-4)

    assert run_cli("params", "--bands", "16", "--rows", "8", "--threshold", "0.75") == 0
    out = capsys.readouterr().out
    assert "chosen: 16 bands x 8 rows (uses 128 of 128" in out
    assert "given by the user" in out
    assert number_after("P(candidate | J = 0.75)", out) == pytest.approx(p_cand(0.75, 16, 8), abs=TOL)
    assert number_after("false-positive area [0, 0.75]", out) == pytest.approx(fp_area(0.75, 16, 8), abs=TOL)


def test_min_recall_option(capsys):
    assert run_cli("params", "--min-recall", "0.99", "--json") == 0
    d = json.loads(capsys.readouterr().out)
    assert d["p_at_threshold"] >= 0.99 and d["min_recall"] == 0.99


# ---- plots ----------------------------------------------------------------------------------------

@pytest.mark.slow  # matplotlib renders two figures
def test_plot_png_and_svg(tmp_path, capsys):
    import matplotlib  # noqa: F401
    png = tmp_path / "curve.png"
    assert run_cli("params", "--plot", str(png)) == 0
    assert f"wrote {png}" in capsys.readouterr().out
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(data) > 20_000
    svg = tmp_path / "curve.svg"
    assert run_cli("params", "--json", "--plot", str(svg)) == 0
    captured = capsys.readouterr()
    json.loads(captured.out)  # the JSON stays clean; the note goes to stderr
    text = svg.read_text()
    assert "<svg" in text[:2000] and text.rstrip().endswith("</svg>")
    assert len(text) > 20_000


def test_plot_without_matplotlib_is_one_line(tmp_path, capsys, monkeypatch):
    for name in list(sys.modules):
        if name == "matplotlib" or name.startswith("matplotlib."):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    rc = run_cli("params", "--plot", str(tmp_path / "x.png"))
    err = capsys.readouterr().err
    assert rc == 2
    assert err.count("\n") == 1 and "pip install matplotlib" in err
    assert not (tmp_path / "x.png").exists()


# ---- errors ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("argv,needle", [
    (["--threshold", "1.5"], "threshold"),
    (["--threshold", "0"], "threshold"),
    (["--threshold", "-0.2"], "threshold"),
    (["--threshold", "nan"], "threshold"),
    (["--bands", "13"], "--bands and --rows"),
    (["--rows", "8"], "--bands and --rows"),
    (["--bands", "13", "--rows", "10"], "exceeds num_perm"),
    (["--num-perm", "64", "--bands", "9", "--rows", "8"], "exceeds num_perm"),
    (["--num-perm", "0"], "num_perm"),
    (["--min-recall", "1.5"], "min_recall"),
    (["--plot", "curve.jpg"], ".png or .svg"),
])
def test_errors_exit_2_with_one_line(capsys, argv, needle):
    assert run_cli("params", *argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("neardup: error: ")
    assert captured.err.count("\n") == 1
    assert needle in captured.err


def test_every_option_has_help():
    from neardup.cli import build_parser
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name in sub.choices:
        p = sub.choices[name]
        for action in p._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            assert action.help and len(action.help) > 15, (name, action.dest)
        text = p.format_help()
        assert p.description and p.description[:20] in " ".join(text.split())
    help_text = " ".join(sub.choices["params"].format_help().split())
    for opt in ("--threshold", "--num-perm", "--bands", "--rows", "--min-recall", "--method", "--json", "--plot"):
        assert opt in help_text


def test_every_default_is_in_the_help():
    """params --min-recall's help said "the default chooser demands ... >= MIN_RECALL" and, the
    word "default" in it, the formatter left out "(default: 0.985)": the one option of any
    subcommand whose default value --help did not say."""
    from neardup.cli import build_parser
    parser = build_parser()

    def walk(p, name):
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub_name, sub in action.choices.items():
                    yield from walk(sub, f"{name} {sub_name}")
            elif (action.option_strings and action.nargs != 0
                  and action.default not in (None, False, True, argparse.SUPPRESS)):
                yield name, action, p._get_formatter()._expand_help(action)

    for name, action, text in walk(parser, "neardup"):
        assert "(default: " in text or str(action.default) in text, (name, action.option_strings, text)
