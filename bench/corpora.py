"""Two deterministic corpus generators for grading residue and false removals (bench/residue.py).

    from corpora import mail_corpus, reference_corpus
    texts = reference_corpus(20000, seed=0)     # list of str, same list for the same (n, seed)

Both use only ``random.Random(seed)``: the same (n, seed) gives the same texts on every machine.
Neither says which documents are near-duplicates: the grading computes that itself, by exact
word-5-gram Jaccard over all pairs (``common.similar_pairs``), so nothing here has to be right
about the truth.

``reference_corpus`` -- template-generated reference pages. A few site templates, each with its
own navigation header, sidebar and footer boilerplate (a third to half of a page), and families of
pages made from them: a family is one topic (a function, a command, a product) whose base page
is filled from the template's section skeleton ("Synopsis", "Parameters", "Returns", "See also")
with the family's own names and sentences. A family has versions (pages for other releases or
platforms: a few sentences rewritten, a parameter added, names changed, word J about 0.55-0.9 to
the base) and each version has copies (mirrors, re-renders: a word or two changed, a date, a
breadcrumb; J about 0.85-1). Family sizes are heavy-tailed (most 1-3 pages, a few over 100), so
a band bucket often holds several versions of one family that are not alike among themselves,
which is what leaves pairs behind when a bucket's search stops early.

``mail_corpus`` -- mail with quoted replies. Threads of one to eight messages among a pool of
people; each message has headers (From, To, Date, Subject, Message-ID), a greeting, a few
paragraphs, and the sender's signature after ``-- ``. A reply starts with a short new text and
``On DATE, NAME wrote:`` followed by the message it answers quoted line by line with ``> ``
(nested quotes get ``>> ``); some replies answer inline (quoted paragraphs with text between
them). Some messages are delivered twice (a cross-post: other list headers and footer). A short
reply that quotes a long message is a near-duplicate of it by the usual word definition, where
``>`` is no word.
"""

from __future__ import annotations

import random
from typing import List

_SYL = ("ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "ze", "pa", "do", "fi", "gu", "he", "ja",
        "ko", "la", "me", "no", "po", "ra", "se", "to", "va", "wi", "xe", "yo", "zu", "an", "el",
        "in", "or", "um", "ex", "al", "is")
_FUNCTION = ("the of and to a in is that it for was on are as with be by this at from or an have not but "
             "which they one all we can there has more if will would so its also what when about into "
             "than other some these only may then after most over new used like very just where well any").split()


def _lexicon(rng: random.Random, size: int) -> List[str]:
    words = set()
    while len(words) < size:
        words.add("".join(rng.choice(_SYL) for _ in range(rng.randint(2, 4))))
    return sorted(words)


class _Words:
    """Zipf-like draws from a fixed lexicon mixed with function words."""

    def __init__(self, rng: random.Random, size: int = 20000):
        self.rng = rng
        self.lex = _lexicon(rng, size)
        self.cum = []
        total = 0.0
        for i in range(size):
            total += 1.0 / (i + 1) ** 0.9
            self.cum.append(total)
        self.total = total

    def word(self) -> str:
        if self.rng.random() < 0.35:
            return self.rng.choice(_FUNCTION)
        import bisect
        return self.lex[bisect.bisect_left(self.cum, self.rng.random() * self.total)]

    def sentence(self, lo: int = 6, hi: int = 18) -> str:
        words = [self.word() for _ in range(self.rng.randint(lo, hi))]
        words[0] = words[0].capitalize()
        return " ".join(words) + self.rng.choice((".", ".", ".", "?", "!"))

    def paragraph(self, lo: int = 2, hi: int = 5) -> List[str]:
        return [self.sentence() for _ in range(self.rng.randint(lo, hi))]


def _heavy_size(rng: random.Random, cap: int) -> int:
    """1, 2, 3 mostly; a tail to ``cap`` (Pareto, alpha 1.3)."""
    return max(1, min(cap, int(rng.paretovariate(1.3))))


# --------------------------------------------------------------------------- reference pages

_SECTIONS = ("Synopsis", "Description", "Parameters", "Returns", "Errors", "Examples", "Notes", "See also")


def _edit_sentences(rng: random.Random, words: _Words, sentences: List[str], share: float) -> List[str]:
    """Rewrite, drop or insert about ``share`` of the sentences."""
    out = []
    for s in sentences:
        r = rng.random()
        if r < share / 3:
            continue                                   # dropped
        if r < 2 * share / 3:
            out.append(words.sentence())               # rewritten
            continue
        out.append(s)
        if r > 1 - share / 3:
            out.append(words.sentence())               # inserted
    return out or [words.sentence()]


def _touch_words(rng: random.Random, words: _Words, sentences: List[str], changes: int) -> List[str]:
    out = list(sentences)
    for _ in range(changes):
        k = rng.randrange(len(out))
        toks = out[k].split(" ")
        toks[rng.randrange(len(toks))] = words.word()
        out[k] = " ".join(toks)
    return out


def reference_corpus(n: int, seed: int = 0) -> List[str]:
    rng = random.Random(seed * 7919 + 1)
    words = _Words(rng)
    templates = []
    for t in range(12):
        templates.append({
            "header": " | ".join(" ".join(words.word().capitalize() for _ in range(rng.randint(1, 3)))
                                 for _ in range(rng.randint(12, 25))),
            "sidebar": [" ".join(words.sentence(3, 8) for _ in range(2)) for _ in range(rng.randint(4, 10))],
            "footer": " ".join(words.paragraph(4, 8)),
            "skeleton": [s for s in _SECTIONS if rng.random() < 0.8] or ["Description"],
            "stock": {s: words.paragraph(1, 3) for s in _SECTIONS},  # sentences every page of the site has
            "name": words.word().capitalize() + " " + rng.choice(("Reference", "Manual", "Docs", "Handbook")),
        })
    texts: List[str] = []
    page_no = 0
    while len(texts) < n:
        tpl = templates[rng.randrange(len(templates))]
        topic = "_".join(words.word() for _ in range(rng.randint(1, 2)))
        base = {s: words.paragraph(2, 6) for s in tpl["skeleton"]}
        versions = []
        for _v in range(_heavy_size(rng, 25)):
            if not versions:
                versions.append(base)
                continue
            share = rng.uniform(0.1, 0.45)
            versions.append({s: _edit_sentences(rng, words, p, share) for s, p in base.items()})
        for v, body in enumerate(versions):
            release = f"{rng.randint(1, 9)}.{rng.randint(0, 20)}"
            for _c in range(_heavy_size(rng, 12)):
                if len(texts) >= n:
                    break
                page_no += 1
                crumbs = " > ".join((tpl["name"], rng.choice(("API", "Commands", "Guides", "Library")), topic))
                lines = [tpl["header"], crumbs, f"{topic} (version {release})", ""]
                for s in tpl["skeleton"]:
                    sentences = _touch_words(rng, words, body[s], rng.choice((0, 0, 1, 2)))
                    lines += [s, " ".join(tpl["stock"][s] + sentences), ""]
                lines += rng.sample(tpl["sidebar"], k=min(len(tpl["sidebar"]), rng.randint(2, 4)))
                lines += [f"Last updated {2000 + rng.randint(0, 25)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}. "
                          f"Page {page_no}.", tpl["footer"]]
                texts.append("\n".join(lines))
    return texts


# --------------------------------------------------------------------------- mail

def _quote(text: str, mark: str = "> ") -> str:
    return "\n".join((mark + line) if not line.startswith(">") else (">" + line) for line in text.split("\n"))


def mail_corpus(n: int, seed: int = 0) -> List[str]:
    rng = random.Random(seed * 104729 + 2)
    words = _Words(rng)
    people = []
    for _ in range(400):
        first, last = words.word().capitalize(), words.word().capitalize()
        people.append({"name": f"{first} {last}", "addr": f"{first.lower()}.{last.lower()}@{words.word()}.org",
                       "sig": f"-- \n{first} {last}\n" + " ".join(words.sentence(3, 9) for _ in range(rng.randint(0, 2)))})
    lists = [{"addr": f"{words.word()}-{rng.choice(('users', 'dev', 'announce'))}@lists.{words.word()}.org",
              "footer": "_" * 40 + "\n" + " ".join(words.paragraph(2, 3))} for _ in range(8)]
    texts: List[str] = []
    msg_no = 0
    while len(texts) < n:
        lst = rng.choice(lists)
        subject = " ".join(words.word() for _ in range(rng.randint(2, 6))).capitalize()
        thread: List[dict] = []
        for k in range(min(8, _heavy_size(rng, 8) + rng.randint(0, 2))):
            if len(texts) >= n:
                break
            sender = rng.choice(people)
            msg_no += 1
            date = f"{rng.choice(('Mon', 'Tue', 'Wed', 'Thu', 'Fri'))}, {rng.randint(1, 28)} " \
                   f"{rng.choice(('Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun'))} 20{rng.randint(10, 25)} " \
                   f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d} +0000"
            head = [f"From: {sender['name']} <{sender['addr']}>", f"To: {lst['addr']}", f"Date: {date}",
                    f"Subject: {'Re: ' if thread else ''}{subject}", f"Message-ID: <{msg_no}.{seed}@{words.word()}.org>", ""]
            greeting = rng.choice(("Hi all,", "Hello,", "Hi,", "Dear list,", "Thanks,", ""))
            if not thread:
                body = "\n\n".join(" ".join(words.paragraph()) for _ in range(rng.randint(2, 6)))
                text = "\n".join(head) + "\n" + greeting + "\n\n" + body + "\n\n" + sender["sig"]
            else:
                prev = thread[rng.randrange(len(thread))] if rng.random() < 0.3 else thread[-1]
                new = "\n\n".join(" ".join(words.paragraph(1, 3)) for _ in range(rng.randint(1, 2)))
                quoted = prev["quotable"]
                if rng.random() < 0.15:  # inline answers between quoted paragraphs
                    paras = quoted.split("\n\n")
                    mixed = []
                    for p in paras:
                        mixed.append(_quote(p))
                        if rng.random() < 0.4:
                            mixed.append(words.sentence())
                    quoted_text = "\n\n".join(mixed)
                else:
                    if rng.random() < 0.3:  # the signature trimmed from the quote
                        quoted = quoted.split("\n-- \n")[0]
                    quoted_text = _quote(quoted)
                attribution = f"On {prev['date']}, {prev['sender']} wrote:"
                body = new + "\n\n" + attribution + "\n" + quoted_text
                text = "\n".join(head) + "\n" + greeting + "\n\n" + body + "\n\n" + sender["sig"]
                if rng.random() < 0.5:  # a bottom-posted reply
                    text = "\n".join(head) + "\n" + attribution + "\n" + quoted_text + "\n\n" + new + "\n\n" + sender["sig"]
            quotable = text.split("\n\n", 1)[1] if "\n\n" in text else text
            thread.append({"quotable": quotable, "date": date, "sender": sender["name"]})
            texts.append(text + "\n" + lst["footer"])
            if rng.random() < 0.05 and len(texts) < n:  # cross-posted: another list's headers and footer
                other = rng.choice(lists)
                texts.append(text.replace(f"To: {lst['addr']}", f"To: {other['addr']}\nCc: {lst['addr']}")
                             + "\n" + other["footer"])
    return texts[:n]
