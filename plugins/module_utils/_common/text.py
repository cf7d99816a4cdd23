# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Private to the blackwell.gpu_node collection: not a public API, it may change in any release.
"""One rule for every value that root writes into a file from inventory.

A value that reaches a systemd unit, a Python module, a shell profile, an INI file or
an ld.so.conf.d entry must not carry a character that ends a line or a directive there:
a newline in an environment value becomes a new ``ExecStartPre=`` line in a unit, a new
statement in a Python file, a new command in a shell profile. Every role and module
checks its values with ``control_character_problem`` before it writes anything, and
names the variable in its message.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pragma: no mutate

import re

# C0 controls (newline, carriage return, NUL, tab, escape...), DEL, C1 controls (NEL
# among them) and the Unicode line and paragraph separators, which Python's splitlines()
# and some parsers take for line ends.
CONTROL_CHARACTER = re.compile(u"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def control_character_problem(value, variable):
    """A message naming variable when the text of value holds a control character, else None."""
    found = CONTROL_CHARACTER.search(u"%s" % (value,))
    if found is None:
        return None
    return ("%s: the value holds the control character U+%04X at position %d; values written into files "
            "(units, Python, shell, INI) must be one line of printable text: remove it"
            % (variable, ord(found.group()), found.start()))


def control_character_problems(values):
    """Messages for every (variable, value) pair whose value holds a control character."""
    problems = []
    for variable, value in values:
        problem = control_character_problem(value, variable)
        if problem:
            problems.append(problem)
    return problems


# A number read from outside has at most this many digits: an unsigned 64-bit counter has 20. int() of a longer run
# is slow, past 4,300 digits Python refuses it with a traceback, and no count, index or size is that large.
NUMBER_DIGITS = 20
ASCII_DIGITS = u"0123456789"


def bounded_int(text, digits=NUMBER_DIGITS):
    """The number text spells in ASCII digits (str.isdigit() is also true for "²" and "١", which int() refuses or
    reads as other digits), at most digits of them; None for anything else."""
    text = u"%s" % (text,)
    if not 0 < len(text) <= digits or text.strip(ASCII_DIGITS):
        return None
    return int(text)


# What a result shows of text the collection does not control (a log line, a traceback, the kernel's messages):
# each line at most this many bytes, so that one huge line cannot make a result of megabytes per host.
RESULT_LINE_BYTES = 2048
# Terminal control sequences (colours, cursor moves: CSI and OSC) are removed whole, then any other control
# character but the tab: a result is read in a terminal, a log viewer or a browser, where they would act.
TERMINAL_SEQUENCE = re.compile(u"\x1b\\[[0-?]*[ -/]*[@-~]|\x1b\\][^\x07\x1b]*(?:\x07|\x1b\\\\)?|\x9b[0-?]*[ -/]*[@-~]")
RESULT_CONTROL = re.compile(u"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")


def printable_text(text):
    """text without terminal sequences and control characters, its line ends and tabs kept."""
    return RESULT_CONTROL.sub(u"", TERMINAL_SEQUENCE.sub(u"", u"%s" % (text,)))


def result_line(line, limit=RESULT_LINE_BYTES):
    """One line as a result may show it: terminal sequences and control characters removed, cut to limit bytes
    of UTF-8 (on a character boundary) with the number of bytes left out said at its end."""
    clean = printable_text(line).replace(u"\n", u" ")
    data = clean.encode("utf-8")
    if len(data) <= limit:
        return clean
    kept = data[:limit].decode("utf-8", "ignore")
    return u"%s [... %d bytes cut]" % (kept, len(data) - len(kept.encode("utf-8")))


def result_text(text, limit=RESULT_LINE_BYTES):
    """Text of several lines as a result may show it: result_line applied to each line."""
    return u"\n".join(result_line(line, limit) for line in (u"%s" % (text,)).split(u"\n"))
