"""The compiled kernels: small functions over arrays, each named for what it computes, each with
a plain twin that the tests hold it to. A new kernel goes here, in the module of what it computes.

    compile      the ``kernel`` decorator: numba with neardup's disk cache, numba's threads
    arrays       Arrow <-> numpy without copies
    hashing      the 64-bit mixers, partitions of integer keys, the string hash
    charclasses  the class of every code point (word, space, mark, ...): numpy alone, no numba
    shingles     tokenising and shingle hashes over the UTF-8 bytes of an Arrow string array
    shingles_python  its plain-Python twin: what a word and a shingle are
    minhash      MinHash signatures (and shingle fingerprints) of documents: ``MinHasher``
    bands        band keys and the buckets they form
    verify       estimated and exact Jaccard of candidate pairs
    components   connected components without chains, and the representative of a cluster
    eliasfano    the lossless code of a document's shingle fingerprints
    lines        lines, blank lines, JSON depth and CSV quotes in a block of bytes
    jsonl        the compiled JSON Lines reader
    ranges       grouping ranges of a file read back
    lookup       the persistent index's fingerprint sets, key ranges and Bloom filters
    sampling     the audit's auxiliary sketch and pair sampling

Nothing here reads a file, knows a stage or an engine, or prints. The numba cache is keyed on
these sources and the options they read (:mod:`neardup.config.options`) alone (:func:`.compile.cache_dir`).
"""
