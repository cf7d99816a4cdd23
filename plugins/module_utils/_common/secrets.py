# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Private to the blackwell.gpu_node collection: not a public API, it may change in any release.
"""Masking of the server's secrets wherever they would be shown: results, diffs, log lines.

SGLang takes its secrets as flags (``--api-key KEY`` or ``--api-key=KEY``) and logs its
whole configuration at start-up (``server_args=ServerArgs(..., api_key='KEY', ...)``),
so a secret can reach a result through the command line or through the log.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pragma: no mutate

import re

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.text import printable_text, result_text

# SGLang 0.5.9's flags whose value is a credential.
SECRET_FLAGS = ("--api-key", "--admin-api-key")
MASK = "********"


def is_secret_flag(word, secret_flags=SECRET_FLAGS):
    """True for a secret flag or an abbreviation of one: SGLang's argparse takes `--api-ke` for `--api-key`."""
    return len(word) > 2 and word.startswith("--") and any(flag.startswith(word) for flag in secret_flags)


def masked_argv(argv, secret_flags=SECRET_FLAGS):
    """argv with the value of every secret flag masked, in both spellings (`--flag VALUE`, `--flag=VALUE`)."""
    shown = []
    hide_next = False
    for word in argv:
        flag, equals, _value = word.partition("=")
        if hide_next:
            shown.append(MASK)
            hide_next = False
        elif equals and is_secret_flag(flag, secret_flags):
            shown.append(flag + "=" + MASK)
        else:
            shown.append(word)
            hide_next = is_secret_flag(word, secret_flags)
    return shown


def secret_values(argv, secret_flags=SECRET_FLAGS):
    """The values that masked_argv hides, for masking them in text too."""
    values = []
    for original, shown in zip(argv, masked_argv(argv, secret_flags)):
        if original != shown:
            values.append(original.partition("=")[2] if shown.endswith("=" + MASK) else original)
    return values


def _flags(secret_flags):
    """SECRET_FLAGS and secret_flags, each once: SGLang's own secret flags are always masked."""
    return tuple(SECRET_FLAGS) + tuple(flag for flag in secret_flags or () if flag not in SECRET_FLAGS)


def _fields(secret_flags):
    # --admin-api-key is logged as admin_api_key='...' inside server_args=ServerArgs(...).
    names = [flag.lstrip("-").replace("-", "_") for flag in secret_flags]
    return re.compile(r"\b(%s)=('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")" % "|".join(re.escape(name) for name in names))


# A long option in free text, with its value after '=' or whitespace: the value ends at whitespace, or at the
# quote it started with.
FLAG_IN_TEXT = re.compile(r"(?<![\w-])(--[A-Za-z0-9][A-Za-z0-9-]*)(=|[ \t]+)(\'[^\']*\'?|\"[^\"]*\"?|[^\s\'\"]+)")


def masked_text(text, values=(), secret_flags=SECRET_FLAGS):
    """text with every secret masked: each of values (the secrets of a command line and secret_env's values), the
    value after each secret flag written out as `--flag VALUE` or `--flag=VALUE` (abbreviations too), and every
    secret field of SGLang's server_args line. SGLang's own secret flags are masked whatever secret_flags says."""
    flags = _flags(secret_flags)
    for value in sorted((value for value in values if value), key=len, reverse=True):
        text = text.replace(value, MASK)

    def flag_value(found):
        if not is_secret_flag(found.group(1), flags) or found.group(3).startswith("--"):
            return found.group(0)
        return found.group(1) + found.group(2) + MASK
    text = FLAG_IN_TEXT.sub(flag_value, text)
    return _fields(flags).sub(lambda found: "%s='%s'" % (found.group(1), MASK), text)


def masked_result_text(text, mask=masked_text):
    """text as a result may show it (result_text) with the secrets that mask hides masked. Terminal sequences and
    control characters go first, so that none can split a secret and keep it from being found; lines are cut
    last, so that a cut cannot leave part of a secret behind."""
    return result_text(mask(printable_text(text)))
