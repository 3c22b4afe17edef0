"""Every knob of a run: a few small frozen groups, each validated once, and the :class:`Config`
made of them.

Each option is declared once, in its group, with :func:`option`: its default, the check of its
value and its command-line flag and help. Everything else is derived from these declarations:
the flags of ``neardup dedup``, ``audit`` and ``index`` (:mod:`neardup.cli.options`), the
parameters recorded in stats.json (:meth:`Config.recorded`), a run's identity
(:meth:`Config.identity`, what ``--resume`` compares) and an index's parameters (the
:class:`Shingling` and :class:`Sketch` groups, :mod:`neardup.index.manifest`).

A group's class attributes hold its defaults (``Sketch.num_perm`` is 128): code that needs a
default imports it from here.
"""

from __future__ import annotations

import dataclasses
import numbers
import os
import sys
from dataclasses import dataclass, field
from typing import Any, ClassVar, Dict, Optional, Tuple

from ..errors import ConfigError
from .recall import DEFAULT_MIN_RECALL

__all__ = ["Config", "Similarity", "Sketch", "Shingling", "Verification", "Input", "Output", "Execution",
           "Indexes", "PUNCTUATION_MODES", "default_workers"]

PUNCTUATION_MODES = ("split", "delete", "keep")  # the kernels take the index in this tuple


def _is_bool(value: Any) -> bool:
    """Whether ``value`` is a bool or numpy's (a numpy bool exists only where numpy is imported:
    it is not imported here for the check)."""
    np = sys.modules.get("numpy")
    return isinstance(value, bool) or (np is not None and isinstance(value, np.bool_))


# --------------------------------------------------------------------------- what a value may be
# Each check raises a one-line ConfigError naming the option, what it got and what is allowed;
# ``type`` is what the command line converts the flag's value with.

@dataclass(frozen=True)
class Integer:
    low: int
    high: int
    optional: bool = False  # None is allowed (it means: chosen elsewhere)
    type: ClassVar = int

    def __call__(self, name: str, value: Any) -> None:
        if value is None and self.optional:
            return
        if _is_bool(value) or not isinstance(value, numbers.Integral):
            none = " or None" if self.optional else ""
            raise ConfigError(f"{name} must be an integer{none}, got {value!r}")
        if not self.low <= value <= self.high:
            raise ConfigError(f"{name} must be between {self.low} and {self.high}, got {value}")


@dataclass(frozen=True)
class Number:
    low: float
    high: float
    low_open: bool = False
    type: ClassVar = float

    def __call__(self, name: str, value: Any) -> None:
        if _is_bool(value) or not isinstance(value, numbers.Real):
            raise ConfigError(f"{name} must be a number, got {value!r}")
        inside = (self.low < value if self.low_open else self.low <= value) and value <= self.high
        if not inside or value != value:
            interval = f"({self.low}, {self.high}]" if self.low_open else f"[{self.low}, {self.high}]"
            raise ConfigError(f"{name} must be in {interval}, got {value}")


@dataclass(frozen=True)
class Choice:
    choices: Tuple[str, ...]
    type: ClassVar = str

    def __call__(self, name: str, value: Any) -> None:
        if value not in self.choices:
            raise ConfigError(f"{name} must be one of {', '.join(self.choices)}; got {value!r}")


@dataclass(frozen=True)
class Text:
    optional: bool = False
    type: ClassVar = str

    def __call__(self, name: str, value: Any) -> None:
        if value is None and self.optional:
            return
        if not isinstance(value, str) or not value:
            none = " or None" if self.optional else ""
            raise ConfigError(f"{name} must be a non-empty string{none}, got {value!r}")


@dataclass(frozen=True)
class Fields:
    """One field name, or several separated by commas (on the command line: the flag given once
    with commas, or several times): the first that an input has is used."""
    type: ClassVar = str

    def __call__(self, name: str, value: Any) -> None:
        parts = value.split(",") if isinstance(value, str) else []
        if not parts or not all(p.strip() for p in parts):
            raise ConfigError(f"{name} must be field names separated by commas, got {value!r}")
        if len({p.strip() for p in parts}) < len(parts):
            raise ConfigError(f"{name} must name each field once, got {value!r}")


@dataclass(frozen=True)
class Switch:
    def __call__(self, name: str, value: Any) -> None:
        if not _is_bool(value):
            raise ConfigError(f"{name} must be True or False, got {value!r}")


@dataclass(frozen=True)
class Texts:
    """Any number of non-empty strings, as a tuple (given on the command line once each)."""

    def __call__(self, name: str, value: Any) -> None:
        bad = [v for v in value if not isinstance(v, str) or not v] if isinstance(value, tuple) else [value]
        if bad:
            raise ConfigError(f"{name} must be paths or URLs (non-empty strings), got {bad[0]!r}")


@dataclass(frozen=True)
class Option:
    """How an option is checked and offered on the command line.

    flag: the command-line flag (default ``--`` and the name with dashes; a switch whose
        default is True needs one that says what turning it off does, e.g. ``--no-nfkc``).
    cli: False for an option the command line never sets (the API sets it).
    recorded: False for an option left out of stats.json's params (only its result counts).
    silent_default: True for an option left out of a run's identity and stats.json's params
        while it has its default: an option added later leaves the fingerprint (and params) of
        the runs that do not use it as they were (their outputs and work dirs stay their own).
    """

    check: Any
    help: str
    flag: Optional[str] = None
    cli: bool = True
    recorded: bool = True
    silent_default: bool = False


def option(default: Any, check: Any, help: str, **how: Any) -> Any:
    """A group field: its default and its :class:`Option` (check, help, flag, ...)."""
    return field(default=default, metadata={"option": Option(check, help, **how)})


def declaration(f: dataclasses.Field) -> Option:
    return f.metadata["option"]


class Group:
    """Base of the option groups: each field checked by its declared check, then the rules
    between fields (:meth:`check`), once, when the group is made.

    identity: whether its options change a run's result (they are part of the run's
        fingerprint, which ``--resume`` and an output folder compare).
    recorded: whether its options are in stats.json's params.
    section: the heading of its options in ``neardup dedup --help``.
    """

    identity: ClassVar[bool] = True
    recorded: ClassVar[bool] = True
    section: ClassVar[str]

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            declaration(f).check(f.name, getattr(self, f.name))
        self.check()

    def check(self) -> None:
        """The rules between this group's fields (none by default)."""

    @classmethod
    def names(cls) -> Tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(cls))


# --------------------------------------------------------------------------- the groups

@dataclass(frozen=True)
class Similarity(Group):
    """When two documents are near-duplicates, and how surely the LSH must find such a pair."""

    section = "similarity"
    threshold: float = option(
        0.8, Number(0.0, 1.0, low_open=True),
        "Jaccard similarity of the shingle sets at or above which two documents are near-duplicates")
    min_recall: float = option(
        DEFAULT_MIN_RECALL, Number(0.0, 1.0, low_open=True),
        "when choosing bands and rows: the least probability of finding a pair at exactly the threshold",
        recorded=False)  # what it chose, bands and rows, is recorded


@dataclass(frozen=True)
class Sketch(Group):
    """A document's MinHash signature and LSH band keys (with :class:`Shingling`, what an index
    records: its documents' keys are made with these)."""

    section = "similarity"
    num_perm: int = option(128, Integer(1, 1 << 16), "MinHash signature length k")
    bands: Optional[int] = option(
        None, Integer(1, 1 << 16, optional=True),
        "LSH bands b (with --rows; default: chosen so that P(candidate) >= --min-recall at the threshold)")
    rows: Optional[int] = option(None, Integer(1, 1 << 16, optional=True),
                                 "LSH rows per band r (with --bands; b*r <= num-perm)")
    seed: int = option(42, Integer(0, (1 << 63) - 1), "seed of shingle hashes, permutations and band keys")

    def check(self) -> None:
        if (self.bands is None) != (self.rows is None):
            raise ConfigError("bands and rows go together: give both or neither "
                              f"(got bands={self.bands}, rows={self.rows})")
        if self.bands is not None and self.bands * self.rows > self.num_perm:
            raise ConfigError(f"bands x rows = {self.bands} x {self.rows} = {self.bands * self.rows} "
                              f"exceeds num_perm = {self.num_perm}; need bands * rows <= num_perm")


@dataclass(frozen=True)
class Shingling(Group):
    """What the shingles of a text are: the tokenizer's options and the word hash
    (:mod:`neardup.kernels.shingles`). NFKC and lower-casing (Unicode aware) come first; with
    ``char_ngrams``, punctuation ``split`` and ``delete`` both delete a mark or a symbol."""

    section = "similarity"
    ngram: int = option(5, Integer(1, 1000), "tokens per shingle (words, or characters with --char-ngrams)")
    char_ngrams: bool = option(False, Switch(), "shingle on characters instead of words")
    normalize_unicode: bool = option(True, Switch(), "skip Unicode NFKC normalisation", flag="--no-nfkc")
    lowercase: bool = option(True, Switch(), "keep letter case", flag="--no-lowercase")
    punctuation: str = option(
        "split", Choice(PUNCTUATION_MODES),
        "what punctuation and symbols do to words: split them like white space (well-known -> well known, "
        "x+y -> x y), punctuation deleted inside them (well-known -> wellknown; symbols still split), or "
        "each mark, symbol and _ kept as a token (the words of earlier neardup)")
    collapse_whitespace: bool = option(
        True, Switch(), "with --char-ngrams: keep every white-space character instead of collapsing runs to one space",
        flag="--keep-whitespace")
    hash_version: int = option(
        2, Integer(1, 2),
        "how a word is hashed: 2 hashes its bytes eight at a time; 1 is the per-byte FNV-1a hash of earlier "
        "neardup (an index is only used with the version it was made with)")


@dataclass(frozen=True)
class Verification(Group):
    """How candidate pairs are verified and clusters grown."""

    section = "similarity"
    verify: str = option("exact", Choice(("exact", "estimate", "none")),
                         "check candidate pairs by exact Jaccard of shingle sets, by the signature estimate, "
                         "or not at all")
    max_anchor_rounds: Optional[int] = option(
        None, Integer(1, 1 << 20, optional=True),
        "at most this many rounds of re-anchoring the members of a bucket that failed against its anchor "
        "(default: until none is left, within a work bound per bucket)")


@dataclass(frozen=True)
class Input(Group):
    """Where a record's text and id are, and what a bad record does."""

    section = "input and output"
    text_column: str = option("text", Fields(),
                              "field holding the text in JSONL, Parquet and CSV/TSV input; several (comma-separated "
                              "or the flag repeated): the first one each input has")
    id_column: Optional[str] = option(
        None, Text(optional=True),
        "field holding a unique document id (default: an 'id' field when every input has one, else FILE:LINE "
        "for JSONL, FILE:ROW for Parquet and CSV, the path for text files; '' for those positions whatever the "
        "input has)")
    # set by the API when it took ``id`` as the id column because every input has that field:
    # a repeated id is then an error that says how to choose the ids, whatever on_error says
    id_column_auto: bool = option(False, Switch(), "the id column was found, not given", cli=False, recorded=False)
    on_error: str = option("fail", Choice(("fail", "skip")),
                           "on a bad record: stop with exit code 2, or skip it (listed in a dedup's "
                           "rejected.parquet)")
    input_format: str = option(
        "auto", Choice(("auto", "text", "signatures", "rpv2-minhash")),
        "auto: the format from each file's extension (.jsonl/.json, .parquet, .csv/.tsv, optionally .gz/.zst/.bz2/.xz; "
        "anything else one text document); text: every file is one plain-text document, whatever its extension; "
        "signatures: Parquet files of 'neardup signatures'; rpv2-minhash: RedPajama-V2's minhash.parquet "
        "(both: no text, verified by the estimate)")
    follow_symlinks: bool = option(
        False, Switch(), "in a folder or glob, follow symbolic links that lead out of the inputs (by default they "
                         "are left out and counted; a link to a file of the inputs is always read once)")


@dataclass(frozen=True)
class Output(Group):
    """Which document of a cluster is kept, and the format of the kept files."""

    section = "input and output"
    keep: str = option("first", Text(),
                       "which document of a cluster to keep: first (input order), longest, or score:COLUMN (highest)")
    output_format: str = option("same", Choice(("same", "jsonl", "parquet")), "format of the files in kept/")
    mark: bool = option(False, Switch(), "keep every document and mark the duplicates: the files go to marked/ "
                                         "instead of kept/, with the columns duplicate_of, cluster, similarity "
                                         "and duplicate_reason added (see the README's \"Marks instead of removals\")",
                        silent_default=True)

    def check(self) -> None:
        if self.keep not in ("first", "longest") and not (self.keep.startswith("score:") and self.score_column):
            raise ConfigError(f"keep must be 'first', 'longest' or 'score:COLUMN', got {self.keep!r}")
        if self.mark and self.output_format != "same":
            raise ConfigError(f"--mark writes each input in its own format; it cannot be combined with "
                              f"--output-format {self.output_format}")

    @property
    def score_column(self) -> Optional[str]:
        return self.keep[len("score:"):] if self.keep.startswith("score:") else None


@dataclass(frozen=True)
class Execution(Group):
    """How a run is executed: never its result (a run may be resumed with others)."""

    identity = False
    recorded = False
    section = "execution"
    workers: Optional[int] = option(None, Integer(1, 4096, optional=True),
                                    "threads for the compiled kernels and for Arrow's parsing (default: every core)")
    engine: str = option("local", Choice(("local", "ray")),
                         "run on this machine, or on a Ray cluster (pip install 'neardup[ray]')")
    ray_address: Optional[str] = option(
        None, Text(optional=True),
        "with --engine ray: address of a running cluster (default: start a local Ray instance)")
    batch_size: int = option(8192, Integer(1, 1 << 24), "documents per batch through the kernels")


@dataclass(frozen=True)
class Indexes(Group):
    """Indexes of documents kept before (:mod:`neardup.index`)."""

    recorded = False
    section = "indexes"
    against: Tuple[str, ...] = option(
        (), Texts(),
        "an index (folder or redis://HOST:PORT/DB, see 'neardup index') of documents kept before: a document "
        "that is a near-duplicate of an indexed one is removed, the indexed one named as its representative; "
        "may be given several times")
    update_index: bool = option(False, Switch(), "after a successful run, add the kept documents to the first "
                                                 "--against index (one new segment)")

    def __post_init__(self) -> None:
        given = () if self.against is None else self.against  # (None: the command line's default)
        if isinstance(given, (str, os.PathLike)):
            given = (given,)
        if isinstance(given, (list, tuple)):
            given = tuple(os.fspath(a) if isinstance(a, os.PathLike) else a for a in given)
        object.__setattr__(self, "against", given)
        super().__post_init__()

    def check(self) -> None:
        if self.update_index and not self.against:
            raise ConfigError("update_index needs an index to update: give against=INDEX (--against INDEX)")


# --------------------------------------------------------------------------- the whole


@dataclass(frozen=True, init=False)
class Config:
    """Every parameter of a run, as groups: ``cfg.shingling``, ``cfg.sketch``, ...

    Made from the groups, from options named like their fields, or both (an option given
    beside its group replaces the group's value)::

        Config(threshold=0.7, ngram=3)
        Config(shingling=Shingling(ngram=3), threshold=0.7)

    Every option name belongs to one group, so ``cfg.num_perm`` reads ``cfg.sketch.num_perm``;
    ``cfg.replace(workers=1)`` (or ``dataclasses.replace``) makes a changed copy.
    """

    similarity: Similarity = field(default_factory=Similarity)
    sketch: Sketch = field(default_factory=Sketch)
    shingling: Shingling = field(default_factory=Shingling)
    verification: Verification = field(default_factory=Verification)
    input: Input = field(default_factory=Input)
    output: Output = field(default_factory=Output)
    execution: Execution = field(default_factory=Execution)
    indexes: Indexes = field(default_factory=Indexes)

    def __init__(self, **options: Any) -> None:
        unknown = sorted(set(options) - set(GROUPS) - set(OWNER))
        if unknown:
            raise ConfigError(f"unknown option(s): {', '.join(unknown)}; allowed: {', '.join(sorted(OWNER))}")
        for name, kind in GROUPS.items():
            own = {k: v for k, v in options.items() if OWNER.get(k) == name}
            group = options.get(name)
            if group is None:
                group = kind(**own)
            elif not isinstance(group, kind):
                raise ConfigError(f"{name} must be a {kind.__name__}, got {type(group).__name__}")
            elif own:
                group = dataclasses.replace(group, **own)
            object.__setattr__(self, name, group)

    def __getattr__(self, name: str) -> Any:
        group = OWNER.get(name)
        if group is None:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        return getattr(object.__getattribute__(self, group), name)

    @classmethod
    def from_options(cls, **options: Any) -> "Config":
        return cls(**options)

    def replace(self, **changes: Any) -> "Config":
        """A copy with some options (or whole groups) changed, checked as a new Config is."""
        return dataclasses.replace(self, **changes)

    @property
    def score_column(self) -> Optional[str]:
        return self.output.score_column

    def resolved(self) -> "Config":
        """A copy whose bands and rows are filled in by the chooser when not given."""
        if self.bands is not None:
            return self
        from .params import choose_params
        choice = choose_params(self.threshold, self.num_perm, min_recall=self.min_recall)
        return self.replace(bands=choice.bands, rows=choice.rows)

    def options(self, *groups: str, stated: bool = False) -> Dict[str, Any]:
        """The options of the named groups (default: all), as one flat dict in declaration order
        (``stated``: less those declared ``silent_default`` that have their default)."""
        return {f.name: getattr(getattr(self, g), f.name)
                for g in (groups or GROUPS) for f in dataclasses.fields(GROUPS[g]) if not stated or not _silent(self, g, f)}

    def to_dict(self) -> Dict[str, Any]:
        return self.options()

    def identity(self) -> Dict[str, Any]:
        """The options that change a run's result: those of every group but :class:`Execution`."""
        return self.options(*(g for g, kind in GROUPS.items() if kind.identity), stated=True)

    def recorded(self) -> Dict[str, Any]:
        """stats.json's params: the options of the recorded groups, but those declared unrecorded."""
        return {f.name: getattr(getattr(self, g), f.name) for g, kind in GROUPS.items() if kind.recorded
                for f in dataclasses.fields(kind) if declaration(f).recorded and not _silent(self, g, f)}


def _silent(cfg: "Config", group: str, f: dataclasses.Field) -> bool:
    return declaration(f).silent_default and getattr(getattr(cfg, group), f.name) == f.default


GROUPS: Dict[str, type] = {f.name: f.default_factory for f in dataclasses.fields(Config)}
OWNER: Dict[str, str] = {}  # option name -> the name of its group in a Config
for _group, _kind in GROUPS.items():
    for _name in _kind.names():
        if _name in OWNER or _name in GROUPS or hasattr(Config, _name):
            raise TypeError(f"option {_name!r} of {_kind.__name__} is declared twice or hides a Config attribute")
        OWNER[_name] = _group


def default_workers(workers: Optional[int] = None) -> int:
    if workers:
        return int(workers)
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)
