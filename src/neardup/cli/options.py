"""The command-line flags of the options, made from their declarations in :mod:`neardup.config`:
a flag's name, help, default and choices are written once, beside the option they set.

A command adds the options of whole groups (``Sketch``) or single options (``"workers"``) and
sets ``config_names`` on its parser to the names it added, so that :func:`config_options`
gathers exactly those from the parsed arguments.
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import Dict, List, Optional

from ..config import GROUPS, OWNER, Fields, Switch, Texts, declaration


def declared(*items) -> List[dataclasses.Field]:
    """The fields of the given groups (classes) and options (names), in order."""
    out: List[dataclasses.Field] = []
    for item in items:
        if isinstance(item, str):
            out.extend(f for f in dataclasses.fields(GROUPS[OWNER[item]]) if f.name == item)
        else:
            out.extend(dataclasses.fields(item))
    return [f for f in out if declaration(f).cli]


def flag(f: dataclasses.Field) -> str:
    return declaration(f).flag or "--" + f.name.replace("_", "-")


def help_text(f: dataclasses.Field) -> str:
    """The option's help, with its default when that says something (not for a switch, nor
    None, nor when the help states it)."""
    text = declaration(f).help
    if f.default is None or isinstance(f.default, bool) or f.default == () or "default" in text:
        return text
    return f"{text} (default: {f.default})"


def add_options(container, *items, given_only: bool = False, help: Optional[Dict[str, str]] = None) -> List[str]:
    """Adds the flags of ``items`` (see :func:`declared`) to a parser or argument group; returns
    the option names added. ``given_only``: an option not given on the command line is left out
    of the parsed arguments (its help still says its default). ``help``: another help text for
    some options, where this command uses them differently."""
    names = []
    for f in declared(*items):
        check = declaration(f).check
        kwargs = {"help": (help or {}).get(f.name) or help_text(f), "dest": f.name,
                  "default": argparse.SUPPRESS if given_only else f.default}
        if isinstance(check, Switch):
            kwargs["action"] = "store_false" if f.default else "store_true"
        elif isinstance(check, Fields):
            kwargs["action"] = JoinedFields
        elif isinstance(check, Texts):
            kwargs["action"] = "append"
            if not given_only:
                kwargs["default"] = None  # (argparse would append to a shared default list)
        else:
            kwargs["type"] = check.type
            if hasattr(check, "choices"):
                kwargs["choices"] = check.choices
        container.add_argument(flag(f), **kwargs)
        names.append(f.name)
    return names


class JoinedFields(argparse.Action):
    """A flag of field names (:class:`neardup.config.Fields`) given several times: the names joined
    with commas, the first given replacing the default."""

    def __call__(self, parser, namespace, values, option_string=None):
        given = getattr(namespace, "_given_" + self.dest, False)
        setattr(namespace, self.dest, f"{getattr(namespace, self.dest)},{values}" if given else values)
        setattr(namespace, "_given_" + self.dest, True)


def add_sections(parser, *groups) -> Dict[str, argparse._ArgumentGroup]:
    """Adds the flags of ``groups``, each under the heading its group names (its ``section``);
    returns the argument groups by heading (a command adds its own flags to them) and sets
    ``config_names``."""
    sections: Dict[str, argparse._ArgumentGroup] = {}
    names: List[str] = []
    for group in groups:
        if group.section not in sections:
            sections[group.section] = parser.add_argument_group(group.section)
        names += add_options(sections[group.section], group)
    parser.set_defaults(config_names=names)
    return sections


def config_options(args: argparse.Namespace) -> dict:
    """The options a command line gave, by name (those its parser added, where given)."""
    return {name: getattr(args, name) for name in args.config_names if hasattr(args, name)}
