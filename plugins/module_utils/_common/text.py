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
