"""The recall target of the default choice of bands and rows, apart from :mod:`.params` (which
needs numpy) so that :mod:`.options` declares the option's default without it: `neardup --help`
and `--version` import no numpy."""

# The default chooser finds a pair at exactly the threshold with at least this probability. 0.95
# rather than 0.9: on corpora with many pairs just above the threshold, 0.9 left about 2% of the
# true near-duplicate pairs unfound (measured in bench/pipeline.py). 0.985 rather than 0.95 (issue
# 30): 13 x 7 (P(0.8) = 0.953) left 1.39% of the true pairs of mails with quoted replies, pairs that
# share no band (bench/residue.py); 18 x 7 (P = 0.986) leaves under 1% on every quality corpus. The
# price is more candidate pairs (bench/results/residue_recall30.json), which verification removes
# cheaply; 0.99 would jump to 16 x 6, whose false-positive area is 19% larger again.
DEFAULT_MIN_RECALL = 0.985
