"""What each stage records: a typed summary that state.json keeps for every stage done, what the
later stages and stats.json need to know of it without reading its files again, and the counts
a partition's call writes beside its part file (never rows inside the data).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import List, Sequence, Tuple

import numpy as np


@dataclass
class ReadInfo:
    documents: int = 0
    blocks: int = 0
    blocks_read: int = 0
    per_source: List[int] = field(default_factory=list)
    rejected_records: int = 0
    rejected_documents: List[Tuple[int, str]] = field(default_factory=list)  # [doc, reason], doc order
    empty_kept: int = 0
    skipped_files: List[Tuple[int, str]] = field(default_factory=list)  # [source, reason] (Batch.skipped)

    def rejected_docs(self) -> np.ndarray:
        """The documents rejected after reading (duplicate ids), ascending."""
        return np.array([d for d, _ in self.rejected_documents], np.int64)


@dataclass
class PairsInfo:
    candidate_pairs: int = 0
    verified_pairs: int = 0
    buckets: int = 0
    anchor_rounds: int = 0
    truncated_buckets: int = 0
    verifications: int = 0

    @classmethod
    def merge(cls, parts: Sequence["PairsInfo"]) -> "PairsInfo":
        return cls(**{f.name: (max if f.name == "anchor_rounds" else sum)([getattr(p, f.name) for p in parts] or [0])
                      for f in dataclasses.fields(cls)})


@dataclass
class ClustersInfo:
    members: int = 0
    removed: int = 0
    clusters: int = 0
    top: List[dict] = field(default_factory=list)   # the largest clusters, for the report
    removed_against_index: int = 0
    cc_rounds: int = 0


@dataclass
class StarStep:
    """What one partition's large-star step of the connected components found (how many of its
    nodes are not yet the leaf or centre of a star: 0 over every partition means converged),
    written beside its edges as ``clusters/star-RRR-PPPPP.json``."""
    nonstar: int = 0


STAGE_INFO = {"read": ReadInfo, "pairs": PairsInfo, "clusters": ClustersInfo}
