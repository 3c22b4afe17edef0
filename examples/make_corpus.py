"""Builds examples/corpus.jsonl: 300 short documents of real English prose with planted
near-duplicates, the corpus of the README's first command.

The prose is the docstrings of Python's standard library modules (on every machine). A quarter
of the documents are edited copies of others (a few words changed, a sentence dropped, a
header added), as a web crawl or a scraped forum would hold them. The script is deterministic;
it is kept so that the example can be regenerated and inspected.
"""

import importlib
import json
import random
import re
import sys
from pathlib import Path

MODULES = sorted({
    "abc", "argparse", "ast", "asyncio", "base64", "bisect", "calendar", "collections", "colorsys",
    "contextlib", "copy", "csv", "dataclasses", "datetime", "decimal", "difflib", "enum", "fnmatch",
    "fractions", "functools", "gettext", "glob", "gzip", "hashlib", "heapq", "hmac", "html", "http",
    "imaplib", "inspect", "ipaddress", "itertools", "json", "keyword", "linecache", "locale", "logging",
    "lzma", "mailbox", "mimetypes", "numbers", "operator", "optparse", "pathlib", "pickle", "pkgutil",
    "platform", "plistlib", "poplib", "pprint", "queue", "quopri", "random", "re", "reprlib", "sched",
    "secrets", "selectors", "shelve", "shlex", "shutil", "signal", "smtplib", "socket", "sqlite3",
    "statistics", "string", "struct", "subprocess", "tarfile", "tempfile", "textwrap", "threading",
    "timeit", "tokenize", "trace", "traceback", "types", "typing", "unittest", "urllib", "uuid",
    "warnings", "wave", "weakref", "zipfile", "zlib",
})


def paragraphs():
    seen = set()
    for name in MODULES:
        try:
            mod = importlib.import_module(name)
        except Exception:
            continue
        objs = [mod] + [getattr(mod, a) for a in sorted(dir(mod)) if not a.startswith("_")]
        for obj in objs:
            doc = getattr(obj, "__doc__", None)
            if not isinstance(doc, str):
                continue
            text = " ".join(doc.split())
            if len(text.split()) < 40 or text in seen:
                continue
            seen.add(text)
            yield text


def edit(text, rng):
    words = text.split()
    kind = rng.choice(["swap", "drop", "header", "typo"])
    if kind == "swap":
        for _ in range(max(1, len(words) // 60)):
            i = rng.randrange(len(words))
            words[i] = rng.choice(["very", "quite", "new", "old", "simple", "the"])
    elif kind == "drop":
        cut = rng.randrange(len(words) - 8)
        del words[cut:cut + 3]
    elif kind == "header":
        words = ["Posted", "by", "admin", "|"] + words
    else:
        i = rng.randrange(len(words))
        words[i] = words[i][::-1]
    return " ".join(words)


def main(out=Path(__file__).with_name("corpus.jsonl"), n_docs=300):
    rng = random.Random(7)
    texts = list(paragraphs())[:int(n_docs * 0.75)]
    docs = [{"id": f"doc-{i:04d}", "source": "stdlib-docstrings", "text": t} for i, t in enumerate(texts)]
    while len(docs) < n_docs:
        base = rng.choice(docs[:len(texts)])
        docs.append({"id": f"doc-{len(docs):04d}", "source": "copy", "text": edit(base["text"], rng)})
    rng.shuffle(docs)
    with open(out, "w", encoding="utf-8") as f:
        for d in docs:
            f.write(json.dumps(d, ensure_ascii=False) + "\n")
    print(f"wrote {len(docs)} documents to {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
