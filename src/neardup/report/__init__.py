"""What neardup tells about a run or a corpus, in words and pictures.

    html           report.html: counts, S-curve, the largest clusters side by side
    output_folder  what the report reads of a dedup output folder (stats, clusters, texts)
    diff           the word diff of two documents shown side by side in the report
    plots          the figures (S-curve, histograms), inline SVG or matplotlib files
    params_text    ``neardup params``: the (bands, rows) of a threshold, as a dict and as text
    audit          ``neardup audit``'s measurement: the S-curve measured on the user's own texts
    audit_files    ``neardup audit`` on files: the texts read, the audit, --json and --plot written

The command line reaches these through :mod:`neardup.api` (``report``, ``audit``, ``params``).
"""
