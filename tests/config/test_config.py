"""The option groups: each checks itself once; flat and grouped construction agree; a run's
identity, stats.json's params and an index's parameters follow from the groups; the command
lines offer every declared option as declared. The loops run over the declared fields, so a new
option is covered without a change here (or fails here, saying what it needs)."""

import argparse
import dataclasses
import json

import pytest

from neardup import Config, ConfigError
from neardup.cli import build_parser
from neardup.cli.index import INDEX_HELP_OF
from neardup.cli.options import config_options, flag, help_text
from neardup.config import (GROUPS, OWNER, Choice, Execution, Fields, Indexes, Input, Integer, Number, Shingling, Similarity,
                            Sketch, Switch, Text, Texts, declaration)
from neardup.index.manifest import PARAM_NAMES, params_of
from neardup.stages.identity import fingerprint, run_identity
from neardup.stages.write import build_stats

FIELDS = [(group, f) for group, kind in GROUPS.items() for f in dataclasses.fields(kind)]
IDS = [f.name for _, f in FIELDS]

# Where a generic value breaks a rule between fields, a valid one (see other_value)
VALID_OTHER = {"keep": "longest"}


def bad_values(check):
    """Values the check must refuse, with a word of the message that says what is allowed."""
    if isinstance(check, Integer):
        return [("12x", "integer"), (1.5, "integer"), (True, "integer"), (check.low - 1, "between"),
                (check.high + 1, "between")]
    if isinstance(check, Number):
        return [("0.5", "number"), (True, "number"), (float("nan"), "must be in"), (check.high + 1, "must be in")]
    if isinstance(check, Choice):
        return [("nope", ", ".join(check.choices))]
    if isinstance(check, Text):
        return [("", "non-empty string"), (5, "non-empty string")]
    if isinstance(check, Switch):
        return [("yes", "True or False"), (None, "True or False")]
    if isinstance(check, Texts):
        return [([""], "paths or URLs"), ([3], "paths or URLs"), (5, "paths or URLs")]
    if isinstance(check, Fields):
        return [("", "field names separated by commas"), ("a,,b", "field names separated by commas"),
                (5, "field names separated by commas"), ("a,a", "each field once")]
    raise AssertionError(f"no bad values known for {check!r}: add them to this test")


def base_config() -> Config:
    """Every option set, bands and rows chosen: each can then change alone."""
    return Config(against=("idx",)).resolved()


def other_value(cfg: Config, f: dataclasses.Field):
    """A valid value of ``f`` other than the one in ``cfg``."""
    if f.name in VALID_OTHER:
        return VALID_OTHER[f.name]
    value = getattr(cfg, f.name)
    check = declaration(f).check
    if isinstance(check, Switch):
        return not value
    if isinstance(check, Choice):
        return next(c for c in check.choices if c != value)
    if isinstance(check, Integer):
        return check.low + 1 if value is None else (value - 1 if value - 1 >= check.low else value + 1)
    if isinstance(check, Number):
        return value / 2
    if isinstance(check, (Text, Fields)):
        return "other"
    if isinstance(check, Texts):
        return value + ("other",)
    raise AssertionError(f"no other value known for {f.name}: add it to VALID_OTHER")


# ----------------------------------------------------------------------------- each group checks itself

@pytest.mark.parametrize("group,f", FIELDS, ids=IDS)
def test_a_bad_value_is_one_line_naming_the_option_and_what_is_allowed(group, f):
    kind = GROUPS[group]
    for bad, allowed in bad_values(declaration(f).check):
        with pytest.raises(ConfigError) as err:
            kind(**{f.name: bad})
        message = str(err.value)
        assert message.startswith(f"{f.name} must ") and allowed in message and "\n" not in message, message
        with pytest.raises(ConfigError, match=f"^{f.name} must "):  # the same through the whole
            Config(**{f.name: bad})


def test_rules_between_options():
    with pytest.raises(ConfigError, match=r"bands and rows go together: give both or neither \(got bands=13, "):
        Sketch(bands=13)
    with pytest.raises(ConfigError, match=r"bands x rows = 20 x 8 = 160 exceeds num_perm = 128"):
        Sketch(bands=20, rows=8)
    with pytest.raises(ConfigError, match="update_index needs an index to update"):
        Indexes(update_index=True)
    for keep in ("score:", "biggest", "Score:x"):
        with pytest.raises(ConfigError, match="keep must be 'first', 'longest' or 'score:COLUMN'"):
            Config(keep=keep)
    assert Config(keep="score:q").score_column == "q" and Config().score_column is None
    assert Indexes(against="one").against == ("one",) and Indexes(against=["a", "b"]).against == ("a", "b")


def test_unknown_options_and_wrong_groups_are_refused():
    with pytest.raises(ConfigError, match="unknown option\\(s\\): treshold; allowed: .*threshold"):
        Config(treshold=0.8)
    with pytest.raises(ConfigError, match="shingling must be a Shingling, got Sketch"):
        Config(shingling=Sketch())
    with pytest.raises(ConfigError, match="unknown option"):
        Config().replace(remove_punctuation=True)  # the old spelling is gone


def test_every_option_name_is_unique_and_owned_by_its_group():
    assert len(OWNER) == len(FIELDS)
    for group, f in FIELDS:
        assert OWNER[f.name] == group


# ----------------------------------------------------------------------------- flat and grouped

def test_flat_and_grouped_construction_agree():
    flat = Config(threshold=0.7, ngram=3, punctuation="keep", workers=2, against="idx", keep="longest")
    grouped = Config(similarity=Similarity(threshold=0.7), shingling=Shingling(ngram=3, punctuation="keep"),
                     execution=Execution(workers=2), indexes=Indexes(against=("idx",)),
                     output=dataclasses.replace(Config().output, keep="longest"))
    assert flat == grouped and hash(flat) == hash(grouped)
    assert Config.from_options(threshold=0.7, ngram=3, punctuation="keep", workers=2, against="idx",
                               keep="longest") == flat
    # an option given beside its group replaces the group's value
    assert Config(shingling=Shingling(ngram=3), ngram=4).shingling == Shingling(ngram=4)
    assert Config() == Config(**{g: kind() for g, kind in GROUPS.items()})


@pytest.mark.parametrize("group,f", FIELDS, ids=IDS)
def test_flat_reads_and_replace_of_every_option(group, f):
    base = base_config()
    value = other_value(base, f)
    for changed in (dataclasses.replace(base, **{f.name: value}), base.replace(**{f.name: value})):
        assert getattr(changed, f.name) == getattr(getattr(changed, group), f.name) == value
        others = {n: v for n, v in changed.to_dict().items() if n != f.name}
        assert others == {n: v for n, v in base.to_dict().items() if n != f.name}
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(base, f.name, value)


def test_a_config_pickles_and_copies():
    import copy
    import pickle
    cfg = Config(threshold=0.7, against="x").resolved()
    assert pickle.loads(pickle.dumps(cfg)) == cfg and copy.deepcopy(cfg) == cfg
    assert pickle.loads(pickle.dumps(cfg)).num_perm == 128


# ----------------------------------------------------------------------------- what the groups decide

def identity_fingerprint(cfg: Config) -> str:
    return fingerprint(run_identity(cfg, []))


@pytest.mark.parametrize("group,f", FIELDS, ids=IDS)
def test_fingerprint_stats_and_index_follow_the_groups(group, f):
    base = base_config()
    changed = base.replace(**{f.name: other_value(base, f)})
    kind = GROUPS[group]
    # a run's identity: every group but Execution
    assert (identity_fingerprint(changed) != identity_fingerprint(base)) == kind.identity
    # stats.json's params: the recorded groups, less the options declared unrecorded
    counts = dict(input=0, kept=0, removed=0, rejected=0)
    params = build_stats(changed, [], counts, [], [])["params"]
    assert (f.name in params) == (kind.recorded and declaration(f).recorded)
    if f.name in params:
        assert params[f.name] == getattr(changed, f.name)
    # an index's parameters: Sketch and Shingling
    assert (params_of(changed) != params_of(base)) == (kind in (Sketch, Shingling))


def test_identity_and_stats_are_what_they_were():
    """Pinned (last changed by hash_version, issue 19, max_anchor_rounds None, issue 22, and the
    default min_recall 0.985, issue 30, which chooses 18 x 7 at 0.8 instead of 13 x 7): the
    same run has the same fingerprint (an earlier run's work dir and output folder are still its
    own) and the same stats.json params."""
    assert identity_fingerprint(Config().resolved()) == \
        "18f9c847580224caf8cb782f0f80803d594d124bae974c0feabae53bf68acb39"
    # the defaults before issue 30's min_recall (0.95: 13 x 7) still make the fingerprints they made
    assert identity_fingerprint(Config(min_recall=0.95).resolved()) == \
        "4e116cae1a30d8100ddab25ea966ebf43c2f7991675fa8f8f670ab955e6d8a7e"
    options = dict(threshold=0.7, ngram=3, punctuation="keep", keep="longest", against=["x"], workers=3,
                   id_column="id", id_column_auto=True)
    cfg = Config(**options).resolved()
    assert identity_fingerprint(cfg) == "5874115720b375fa9b83580232f4a23f11394c59b8414ff616e8aec12b886dd3"
    assert identity_fingerprint(Config(**options, min_recall=0.95).resolved()) == \
        "6e72dbcc7e1aceb88d89822d65cc63fbe6181785a39898786404e990991b8132"
    params = build_stats(Config().resolved(), [], dict(input=0, kept=0, removed=0, rejected=0), [], [])["params"]
    assert json.dumps(params, sort_keys=True) == (
        '{"bands": 18, "char_ngrams": false, "collapse_whitespace": true, "follow_symlinks": false, '
        '"hash_version": 2, "id_column": null, "input_format": "auto", "keep": "first", '
        '"lowercase": true, "max_anchor_rounds": null, "ngram": 5, "normalize_unicode": true, "num_perm": 128, '
        '"on_error": "fail", "output_format": "same", "punctuation": "split", "rows": 7, "seed": 42, '
        '"text_column": "text", "threshold": 0.8, "verify": "exact"}')
    assert set(PARAM_NAMES) == {"num_perm", "bands", "rows", "seed", "ngram", "char_ngrams", "normalize_unicode",
                                "lowercase", "punctuation", "collapse_whitespace", "hash_version"}  # index manifests


# ----------------------------------------------------------------------------- the command lines

def subparser(*path):
    parser = build_parser()
    for name in path:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[name]
    return parser


# command; the groups (or options) it offers: as options of its Config, as arguments of its own
# (with the same flags), and as options of its Config set only when given; its own help texts
COMMANDS = [
    # dedup's --verify is given-only: exact, or estimate for signature inputs (api.run_dedup)
    (("dedup",), tuple(f.name for g in GROUPS.values() for f in dataclasses.fields(g)
                       if declaration(f).cli and f.name != "verify"), (), ("verify",), {}),
    (("audit",), (Similarity, Sketch, Shingling, Input), (), (), {}),
    (("index", "add"), (), ("text_column", "id_column", "on_error"), (Sketch, Similarity, Shingling, "workers",
                                                                     "batch_size", "input_format"), INDEX_HELP_OF),
    (("index", "query"), (), ("text_column", "id_column", "on_error"), ("threshold", "workers", "batch_size"),
     INDEX_HELP_OF),
]


def flags_for(f, value):
    """The command line that sets ``f`` to ``value`` (from the value it has without the flag)."""
    check = declaration(f).check
    if isinstance(check, Switch):
        return [flag(f)]
    if isinstance(check, Texts):
        return [flag(f), value[-1]]
    return [flag(f), str(value)]


def offered(items):
    out = []
    for item in items:
        out += [f for f in dataclasses.fields(GROUPS[OWNER[item]]) if f.name == item] if isinstance(item, str) \
            else list(dataclasses.fields(item))
    return [f for f in out if declaration(f).cli]


@pytest.mark.parametrize("path,options,arguments,given_only,own_help", COMMANDS,
                         ids=[" ".join(c[0]) for c in COMMANDS])
def test_each_command_offers_every_declared_option_as_declared(path, options, arguments, given_only, own_help):
    parser = subparser(*path)
    actions = {a.dest: a for a in parser._actions}
    suppressed = {f.name for f in offered(given_only)}
    for f in offered(options + arguments + given_only):
        a = actions[f.name]
        assert a.option_strings == [flag(f)]
        assert a.help == own_help.get(f.name, help_text(f))
        check = declaration(f).check
        assert a.choices == getattr(check, "choices", None)
        if f.name in suppressed:
            assert a.default is argparse.SUPPRESS
        elif isinstance(check, Texts):
            assert a.default is None  # argparse appends to it; Config makes it ()
        else:
            assert a.default == f.default
    # without flags: the declared defaults, and only the command's Config options
    given = ["idx"] if path[0] == "index" else []
    output = ["--output", "o"] if path == ("dedup",) else []
    args = parser.parse_args(given + ["input.jsonl"] + output)
    assert Config(**config_options(args)) == Config()
    assert set(config_options(args)) == {f.name for f in offered(options)}
    for f in offered(given_only):
        value = other_value(base_config(), f)
        args = parser.parse_args(given + ["input.jsonl"] + output + flags_for(f, value))
        assert {k: v for k, v in config_options(args).items() if k not in set(options)} == {f.name: value}


def test_help_shows_each_default_once_and_the_old_flag_is_gone(capsys):
    text = " ".join(subparser("dedup").format_help().split())
    assert "--keep-punctuation" not in text and "(default: [])" not in text
    assert text.count("(default: 0.8)") == 1 and "(default: 42)" in text and "(default: 8192)" in text
    add = " ".join(subparser("index", "add").format_help().split())
    assert "(default: 128)" in add and "(default: 5)" in add  # shown although the options are given-only


@pytest.mark.parametrize("group,f", [(g, f) for g, f in FIELDS if declaration(f).cli],
                         ids=[f.name for _, f in FIELDS if declaration(f).cli])
def test_every_dedup_flag_sets_its_option(group, f):
    base = base_config()
    value = other_value(base, f)
    argv = ["in.jsonl", "--output", "o", "--against", "idx", "--bands", str(base.bands), "--rows", str(base.rows)]
    args = subparser("dedup").parse_args(argv + flags_for(f, value))
    assert getattr(Config(**config_options(args)), f.name) == value
