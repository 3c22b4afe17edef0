"""What neardup tells about a run or a corpus, in words and pictures.

    html         report.html: counts, S-curve, the largest clusters side by side
    plots        the figures (S-curve, histograms), inline SVG or matplotlib files
    audit        ``neardup audit``: the S-curve measured on the user's own corpus
"""
