"""The run's options and the choice of bands and rows.

    options    every option declared once, in small frozen groups (its default, the check of its
               value, its command-line flag and help), and the :class:`Config` made of them
    params     the LSH S-curve, P(candidate | J = s) = 1 - (1 - s^r)^b, and the choice of bands
               and rows for a threshold and a signature length
    recall     the default choice's recall target (numpy-free: options declares it)
"""

from .options import (GROUPS, OWNER, PUNCTUATION_MODES, Choice, Config, Execution, Fields, Group, Indexes, Input,
                      Integer, Number, Option, Output, Shingling, Similarity, Sketch, Switch, Text, Texts,
                      Verification, declaration, default_workers, option)

__all__ = ["GROUPS", "OWNER", "PUNCTUATION_MODES", "Choice", "Config", "Execution", "Fields", "Group", "Indexes",
           "Input", "Integer", "Number", "Option", "Output", "Shingling", "Similarity", "Sketch", "Switch", "Text",
           "Texts", "Verification", "declaration", "default_workers", "option"]
