"""The argument parser of every command: no abbreviations, and a "did you mean" on a typo.

argparse before Python 3.14 neither suggests a close option or command name nor refuses a
prefix of an option (``--thresh`` would silently mean ``--threshold``, and would change meaning
the day another ``--thresh...`` option is added). An unknown option is reported by the
subcommand it was given to, with that subcommand's usage, not by the top-level parser.

Placeholders follow one rule in every subcommand: a value is shown as the option's name in
capitals (``--threshold THRESHOLD``, ``--num-perm NUM_PERM``), a path as ``FILE`` or ``DIR``.
"""

from __future__ import annotations

import argparse
import difflib
import re
from typing import List, Optional, Sequence

_INVALID_CHOICE = re.compile(r"invalid choice: '(?P<given>[^']*)' \(choose from (?P<choices>.*)\)")


def closest(given: str, candidates: Sequence[str]) -> Optional[str]:
    """The candidate most like ``given`` (difflib's ratio >= 0.6), or None."""
    found = difflib.get_close_matches(given, list(candidates), n=1, cutoff=0.6)
    return found[0] if found else None


class ArgumentParser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` with ``allow_abbrev=False`` and suggestions for typos; its
    subparsers are of the same class."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def parse_args(self, args=None, namespace=None):
        import sys
        self._remember(list(sys.argv[1:] if args is None else args))
        namespace, extras = self.parse_known_args(args, namespace)
        if extras:
            parser = self._chosen_subparser(namespace) or self
            parser.error(parser.unrecognized(extras))
        return namespace

    def _remember(self, args: List[str]) -> None:
        """Keeps the command line on every parser, so that an error raised before the unknown
        arguments are known (a missing required one) can still point at a typo."""
        self._given = args
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                for parser in action.choices.values():
                    if isinstance(parser, ArgumentParser):
                        parser._remember(args)

    def _chosen_subparser(self, namespace) -> Optional["ArgumentParser"]:
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                chosen = action.choices.get(getattr(namespace, action.dest, None))
                if isinstance(chosen, ArgumentParser):
                    return chosen._chosen_subparser(namespace) or chosen
        return None

    def unrecognized(self, extras: List[str]) -> str:
        """argparse's message for unknown arguments, with the closest option of this parser."""
        message = "unrecognized arguments: " + " ".join(extras)
        options = [s for s in self._option_string_actions if s.startswith("--")]
        hints = []
        for arg in extras:
            if not arg.startswith("--"):
                continue
            guess = closest(arg.split("=", 1)[0], options)
            if guess and guess not in hints:
                hints.append(guess)
        if hints:
            message += " (did you mean " + " or ".join(hints) + "?)"
        return message

    def error(self, message: str):
        if message.startswith("the following arguments are required") and getattr(self, "_given", None):
            known = self._option_string_actions
            unknown = [a for a in self._given if a.startswith("--") and a.split("=", 1)[0] not in known]
            if unknown:
                message += "; " + self.unrecognized(unknown)
        m = _INVALID_CHOICE.search(message)
        if m:
            choices = re.findall(r"'([^']*)'", m.group("choices")) or \
                [c.strip() for c in m.group("choices").split(",")]
            guess = closest(m.group("given"), choices)
            if guess:
                message += f" (did you mean {guess!r}?)"
        super().error(message)
