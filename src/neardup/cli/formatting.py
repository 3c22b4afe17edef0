"""The help formatter every subcommand uses."""

from __future__ import annotations

import argparse


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows "(default: X)" only where it says something: not None, not an on/off switch, and not
    when the help text already states the default. Every subcommand uses it."""

    def _get_help_string(self, action):
        text = action.help or ""
        if action.default in (None, False, True, argparse.SUPPRESS) or action.nargs == 0 or "default" in text:
            return text
        return super()._get_help_string(action)
