"""The manifest of an index: its format, the parameters it records, and the checks that refuse
a run whose parameters differ (one message naming every difference).

The parameters are the options of the :class:`~neardup.config.Shingling` and
:class:`~neardup.config.Sketch` groups: what decides a document's shingles and band keys. Their
``hash_version`` (how a word is hashed) is never mixed: an index of another version, or of none
(made before versions), is refused with how to rebuild it."""

from __future__ import annotations

from typing import Optional

from ..config import Config, Shingling, Sketch
from ..errors import ConfigError, StorageError
from .segments import STORES

FORMAT = "neardup-index"
FORMAT_VERSION = 3  # 3: fingerprints and signatures carry block checksums; 2: tombstones; 1 had neither
# a Bloom index's: 4 since each probe of its filters is mixed (kernels.lookup: a filter of format 3 tested
# other bits, and its small segments answered far above their rate; refused, to be rebuilt)
BLOOM_FORMAT_VERSION = 4


def format_version(store: Optional[str]) -> int:
    """The format version of an index of ``store`` (``bloom`` or an exact one) that this neardup writes and reads."""
    return BLOOM_FORMAT_VERSION if store == "bloom" else FORMAT_VERSION
PARAM_NAMES = Sketch.names() + Shingling.names()
REBUILD = ("rebuild it from the original corpus with `neardup index add NEW_INDEX CORPUS...` "
           "(its keys cannot be converted)")


def params_of(config: Config) -> dict:
    return {name: getattr(config, name) for name in PARAM_NAMES}


def store_of(config: Config, kind: Optional[str] = None) -> str:
    """What a new index keeps: fingerprints (``exact``) or signatures (``estimate``) to verify,
    or Bloom filters of its band keys (``bloom``, :mod:`.bloom`)."""
    if kind == "bloom":
        return "bloom"
    return "exact" if config.verify == "exact" else "estimate"


def empty_manifest(config: Config, store: str, bloom: Optional[dict] = None) -> dict:
    manifest = {"format": FORMAT, "version": format_version(store), "params": params_of(config), "store": store,
                "generation": 0, "segments": []}
    if bloom is not None:
        manifest["bloom"] = bloom
    return manifest


def resolve(location: str, manifest: Optional[dict], config: Optional[Config], options: dict,
            kind: Optional[str] = None):
    """(run config, store) for an index: a new one takes the run's parameters, an existing one
    its own, after checking that those given (all of a Config, or the options given) agree.
    ``kind`` (``exact`` or ``bloom``, None: either) must be the existing index's kind."""
    from .bloom import KINDS, kind_of
    if kind is not None and kind not in KINDS:
        raise ConfigError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
    if kind == "bloom" and "verify" in options:
        raise ConfigError("--verify chooses what an exact index keeps to verify; a bloom index verifies nothing: "
                          "give one of --kind bloom and --verify")
    if config is None:
        base = Config(**options)
        given = set(options) & set(PARAM_NAMES)
        if "bands" not in given:
            given -= {"rows"}
    else:
        # a whole Config (a dedup run's) is compared on what makes signatures: its bands and rows
        # serve its own pairs, an existing index's are its own (its keys are made with them)
        base = config
        given = set(PARAM_NAMES) if manifest is None else set(PARAM_NAMES) - {"bands", "rows"}
    if manifest is None:
        cfg = base.resolved()
        return cfg, store_of(cfg, kind)
    check_format(location, manifest)
    if kind is not None and kind != kind_of(manifest["store"]):
        # an exact and a bloom index cannot be mixed: an add cannot switch the kind
        have = "a bloom" if manifest["store"] == "bloom" else "an exact"
        raise ConfigError(f"index {location} is {have} index, not {kind}: an exact and a bloom index cannot be "
                          f"mixed; leave --kind out, or use a new index")
    if "verify" in options and store_of(base) != manifest["store"]:
        # what an index keeps is fixed when it is created: an add cannot switch it
        kept = {"exact": "shingle fingerprints (verify exact)", "estimate": "signatures (verify estimate)",
                "bloom": "Bloom filters of band keys (kind bloom)"}
        raise ConfigError(f"index {location} keeps {kept[manifest['store']]}; --verify {options['verify']} "
                          f"only chooses what a new index keeps: leave it out, or use a new index")
    params = manifest["params"]
    if config is not None:
        base = base.resolved()
    wanted = {name: getattr(base, name) for name in PARAM_NAMES if name in given}
    compare(location, params, wanted)
    cfg = base.replace(**params)
    return cfg, manifest["store"]


def check_format(location: str, manifest: dict) -> None:
    if manifest.get("format") != FORMAT or not isinstance(manifest.get("params"), dict):
        raise StorageError(f"{location} is not a neardup index (unknown manifest format)")
    have, reads = manifest.get("version"), format_version(manifest.get("store"))
    if have != reads:
        if isinstance(have, int) and not isinstance(have, bool) and have > reads:
            raise StorageError(f"index {location} has format version {have}, made by a newer neardup; this one reads "
                               f"version {reads}: use that neardup (upgrade this one: pip install -U neardup)")
        raise StorageError(f"index {location} has format version {have}; this neardup reads version {reads}: "
                           f"{REBUILD}")
    if "hash_version" not in manifest["params"]:
        raise StorageError(f"index {location} was made before word hashes had versions (its manifest has no "
                           f"hash_version); {REBUILD}")
    if manifest.get("store") not in STORES or set(manifest["params"]) != set(PARAM_NAMES):
        raise StorageError(f"corrupt index {location}: its manifest lacks parameters")
    if manifest["store"] == "bloom" and not isinstance((manifest.get("bloom") or {}).get("false_positive_rate"),
                                                        float):
        raise StorageError(f"corrupt index {location}: its manifest lacks the Bloom filters' false-positive rate")
    for entry in manifest.get("segments") or []:
        bloom = isinstance(entry, dict) and isinstance(entry.get("bloom"), dict)
        if isinstance(entry, dict) and bloom != (manifest["store"] == "bloom"):
            # what two first adds of different kinds at once committed before they were refused
            raise StorageError(f"corrupt index {location}: segment {entry.get('name')} is {'a bloom' if bloom else 'an exact'} "
                               f"segment in {'a bloom' if not bloom else 'an exact'} index (two first adds of different "
                               f"kinds committed at once, by a neardup before that was refused); nothing can be read "
                               f"from it: build the index again")


def compare(location: str, params: dict, wanted: dict) -> None:
    if "hash_version" in wanted and params["hash_version"] != wanted["hash_version"]:
        raise ConfigError(f"index {location} hashes words with hash version {params['hash_version']}, this run with "
                          f"{wanted['hash_version']} (never mixed): run with --hash-version {params['hash_version']}, "
                          f"or {REBUILD}")
    diffs = [f"{k} {params[k]!r} (this run: {v!r})" for k, v in wanted.items() if params[k] != v]
    if diffs:
        raise ConfigError(f"index {location} was built with other parameters: {', '.join(diffs)}; "
                          f"use the index's parameters or another index")


def check_manifest(location: str, manifest: dict, config: Config, store: Optional[str] = None,
                   bloom: Optional[dict] = None) -> None:
    """Refuses a manifest made with other parameters than ``config``'s; with ``store`` (and
    ``bloom``, a Bloom index's settings), also one of another kind or Bloom rate."""
    check_format(location, manifest)
    compare(location, manifest["params"], params_of(config))
    if store is not None:
        check_kind(location, manifest, store, bloom)


KEPT = {"exact": "an exact index (shingle fingerprints, --verify exact)",
        "estimate": "an exact index keeping signatures (--verify estimate)",
        "bloom": "a bloom index (--kind bloom)"}


def check_kind(location: str, manifest: dict, store: str, bloom: Optional[dict]) -> None:
    """Refuses a manifest whose kind (``store``) or Bloom false-positive rate differ from what
    this process took the index to be: the first committed add fixes both, and a writer that
    raced it (two first adds at once, of different kinds) commits nothing."""
    have = manifest["store"]
    rate = (manifest.get("bloom") or {}).get("false_positive_rate")
    want = (bloom or {}).get("false_positive_rate")
    if have != store:
        raise ConfigError(f"index {location} is {KEPT[have]} (fixed by its first add, made meanwhile by another "
                          f"process), not {KEPT[store]}; nothing was written by this one: run it again to use the "
                          f"index as it is, or use another index")
    if store == "bloom" and rate != want:
        raise ConfigError(f"index {location} was built with false_positive_rate {rate!r} (fixed by its first add, "
                          f"made meanwhile by another process), this one with {want!r}; nothing was written by "
                          f"this one: run it again without --false-positive-rate, or use another index")
