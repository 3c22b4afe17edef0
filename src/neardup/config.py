"""One frozen dataclass for every knob, validated once at the boundary.

Every stage receives the same :class:`Config`; every output records it
(``stats.json``), so a result always says how it was made.
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import InitVar, dataclass
from typing import Any, Optional, Tuple


from .errors import ConfigError
from .params import DEFAULT_MIN_RECALL


VERIFY_MODES = ("exact", "estimate", "none")
ON_ERROR_MODES = ("fail", "skip")
OUTPUT_FORMATS = ("same", "jsonl", "parquet")
ENGINES = ("local", "ray")
PUNCTUATION_MODES = ("split", "delete", "keep")  # the same tuple as neardup.shingles.PUNCTUATION_MODES


@dataclass(frozen=True)
class Config:
    """Every parameter of a neardup run.

    Shingling
        ngram: tokens per shingle (words by default, characters with ``char_ngrams``).
        char_ngrams: shingle on characters instead of words.
        normalize_unicode: apply Unicode NFKC first.
        lowercase: lower-case (Unicode aware) before tokenising.
        punctuation: what a punctuation character (Unicode category P*) does to words:
            ``split`` ends the word like white space (the default, as in every peer),
            ``delete`` deletes it inside the word (``well-known`` -> ``wellknown``), ``keep``
            makes each mark a token. With ``char_ngrams``, ``split`` and ``delete`` both delete it.
        remove_punctuation: the old spelling, accepted when constructing: True means
            ``punctuation="delete"``, False ``punctuation="keep"``. It is not stored (read back,
            it is None, which is also what keeps ``dataclasses.replace`` right): read
            ``punctuation``.
        collapse_whitespace: for character n-grams, turn each run of white space into one space.
    MinHash and LSH
        num_perm: signature length k.
        seed: seeds the shingle hash, the permutations and the band keys.
        threshold: Jaccard similarity at or above which two documents are near-duplicates.
        bands, rows: LSH banding; ``None`` lets :func:`neardup.params.choose_params` pick.
        min_recall: the default chooser keeps P(candidate | J = threshold) at or above this.
    Verification and clusters
        verify: ``exact`` (Jaccard of the shingle sets), ``estimate`` (share of equal signature
            values) or ``none`` (every candidate pair is a duplicate).
        max_anchor_rounds: how many times the members of a bucket that failed verification
            against the bucket's anchor are re-anchored on the next failing member.
        keep: ``first`` (input order), ``longest`` or ``score:COLUMN`` (highest score).
    I/O
        text_column, id_column: field names in JSONL / Parquet input.
        id_column_auto: set by the API when it took ``id`` as the id column because every input
            has that field; repeated ids then fall back to positional ids instead of failing.
        on_error: ``fail`` stops at the first bad record, ``skip`` records it in rejected.parquet.
        output_format: ``same`` as the input, or ``jsonl`` / ``parquet``.
        batch_size: documents per batch streamed through the kernels.
    Execution
        workers: threads for the compiled kernels (``None``: every core).
        engine: ``local`` or ``ray``; ray_address joins an existing Ray cluster.
    Indexes
        against: indexes (folders or ``redis://`` URLs) of documents kept before: a document that
            is a near-duplicate of an indexed one is removed, the indexed one its representative.
        update_index: after a successful run, add the kept documents to the first of them.
    """

    threshold: float = 0.8
    num_perm: int = 128
    bands: Optional[int] = None
    rows: Optional[int] = None
    min_recall: float = DEFAULT_MIN_RECALL
    ngram: int = 5
    char_ngrams: bool = False
    normalize_unicode: bool = True
    lowercase: bool = True
    punctuation: str = "split"
    remove_punctuation: InitVar[Optional[bool]] = None
    collapse_whitespace: bool = True
    seed: int = 42
    verify: str = "exact"
    max_anchor_rounds: int = 8
    keep: str = "first"
    text_column: str = "text"
    id_column: Optional[str] = None
    id_column_auto: bool = False
    on_error: str = "fail"
    output_format: str = "same"
    batch_size: int = 8192
    workers: Optional[int] = None
    engine: str = "local"
    ray_address: Optional[str] = None
    against: Tuple[str, ...] = ()
    update_index: bool = False

    def __post_init__(self, remove_punctuation: Optional[bool]) -> None:
        if isinstance(self.against, (str, os.PathLike)):
            object.__setattr__(self, "against", (os.fspath(self.against),))
        else:
            object.__setattr__(self, "against", tuple(os.fspath(a) for a in (self.against or ())))
        if self.update_index and not self.against:
            raise ConfigError("update_index needs an index to update: give against=INDEX (--against INDEX)")
        if remove_punctuation is not None or self.punctuation not in PUNCTUATION_MODES:
            from .shingles import punctuation_mode
            try:
                mode = punctuation_mode(None if (remove_punctuation is not None and self.punctuation == "split")
                                        else self.punctuation, remove_punctuation)
            except ValueError as exc:
                raise ConfigError(str(exc)) from None
            object.__setattr__(self, "punctuation", mode)
        _check_number("threshold", self.threshold, 0.0, 1.0, low_open=True)
        _check_int("num_perm", self.num_perm, 1, 1 << 16)
        _check_number("min_recall", self.min_recall, 0.0, 1.0, low_open=True)
        _check_int("ngram", self.ngram, 1, 1000)
        _check_int("seed", self.seed, 0, (1 << 63) - 1)
        _check_int("max_anchor_rounds", self.max_anchor_rounds, 1, 1 << 20)
        _check_int("batch_size", self.batch_size, 1, 1 << 24)
        if self.workers is not None:
            _check_int("workers", self.workers, 1, 4096)
        if (self.bands is None) != (self.rows is None):
            raise ConfigError("bands and rows go together: give both or neither "
                              f"(got bands={self.bands}, rows={self.rows})")
        if self.bands is not None:
            _check_int("bands", self.bands, 1, self.num_perm)
            _check_int("rows", self.rows, 1, self.num_perm)
            if self.bands * self.rows > self.num_perm:
                raise ConfigError(
                    f"bands x rows = {self.bands} x {self.rows} = {self.bands * self.rows} "
                    f"exceeds num_perm = {self.num_perm}; need bands * rows <= num_perm")
        _check_choice("verify", self.verify, VERIFY_MODES)
        _check_choice("on_error", self.on_error, ON_ERROR_MODES)
        _check_choice("output_format", self.output_format, OUTPUT_FORMATS)
        _check_choice("engine", self.engine, ENGINES)
        if not (self.keep in ("first", "longest") or
                (self.keep.startswith("score:") and len(self.keep) > len("score:"))):
            raise ConfigError(f"keep must be 'first', 'longest' or 'score:COLUMN', got {self.keep!r}")
        if not isinstance(self.text_column, str) or not self.text_column:
            raise ConfigError(f"text_column must be a non-empty string, got {self.text_column!r}")

    @property
    def score_column(self) -> Optional[str]:
        return self.keep[len("score:"):] if self.keep.startswith("score:") else None

    @property
    def shingle_fingerprint(self) -> dict:
        """The parameters that decide signatures (a stage cache key)."""
        return {k: getattr(self, k) for k in (
            "num_perm", "ngram", "char_ngrams", "normalize_unicode", "lowercase",
            "punctuation", "collapse_whitespace", "seed")}

    def resolved(self) -> "Config":
        """A copy whose bands and rows are filled in by the chooser when not given."""
        if self.bands is not None:
            return self
        from .params import choose_params
        choice = choose_params(self.threshold, self.num_perm, min_recall=self.min_recall)
        return dataclasses.replace(self, bands=choice.bands, rows=choice.rows)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_options(cls, **options: Any) -> "Config":
        names = {f.name for f in dataclasses.fields(cls)} | {"remove_punctuation"}
        unknown = sorted(set(options) - names)
        if unknown:
            raise ConfigError(f"unknown option(s): {', '.join(unknown)}; allowed: {', '.join(sorted(names))}")
        return cls(**options)


def default_workers(workers: Optional[int] = None) -> int:
    if workers:
        return int(workers)
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def _check_int(name: str, value: Any, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, (int,)) and not _is_integral(value):
        raise ConfigError(f"{name} must be an integer, got {value!r}")
    if not low <= int(value) <= high:
        raise ConfigError(f"{name} must be between {low} and {high}, got {value}")


def _is_integral(value: Any) -> bool:
    try:
        import numpy as np
        return isinstance(value, np.integer)
    except ImportError:  # pragma: no cover
        return False


def _check_number(name: str, value: Any, low: float, high: float, low_open: bool = False) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{name} must be a number, got {value!r}")
    ok = (low < value if low_open else low <= value) and value <= high
    if not ok or value != value:
        interval = f"({low}, {high}]" if low_open else f"[{low}, {high}]"
        raise ConfigError(f"{name} must be in {interval}, got {value}")


def _check_choice(name: str, value: Any, allowed: tuple) -> None:
    if value not in allowed:
        raise ConfigError(f"{name} must be one of {', '.join(allowed)}; got {value!r}")
