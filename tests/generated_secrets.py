"""Generated secrets for the redaction tests (issue 29): a seeded generator of passwords and user
names holding ``@ / : % ? #`` and unicode, and what a search for a leaked one looks for."""

from __future__ import annotations

import random
import string
from urllib.parse import quote, unquote

MIN_SEARCHED = 6  # neardup.io.storage.paths.MIN_SEARCHED: shorter parts of a secret are not searched for

SPECIALS = "@/:%?#"
ALPHABET = string.ascii_letters + string.digits + "ßéжΩ€漢😀"


def generated_secret(rng: random.Random, specials: str = SPECIALS) -> str:
    """Two to four words of MIN_SEARCHED to 9 characters (letters, digits, unicode) joined, led or
    ended by one or two of ``specials``."""
    def sep():
        return "".join(rng.choice(specials) for _ in range(rng.randint(1, 2))) if specials else ""

    words = ["".join(rng.choice(ALPHABET) for _ in range(rng.randint(MIN_SEARCHED, 9)))
             for _ in range(rng.randint(2, 4))]
    out = rng.choice(["", sep()]) + words[0]
    for w in words[1:]:
        out += sep() + w
    return out + rng.choice(["", sep()])


def words(secret: str) -> set:
    """What must not be found of ``secret``: its runs of letters, digits and unicode (each of
    MIN_SEARCHED characters or more: the generator's words), raw and percent-encoded."""
    out = set()
    for form in (secret, unquote(secret)):
        run = ""
        for c in form + "\0":
            if c in ALPHABET:
                run += c
            else:
                if len(run) >= MIN_SEARCHED:
                    out.update({run, quote(run, safe="")})
                run = ""
    return out


def leaked(secret: str, text: str) -> list:
    """The words of ``secret`` found in ``text`` (none, when it was hidden)."""
    return sorted(w for w in words(secret) if w in text)
