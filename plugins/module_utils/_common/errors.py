# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Private to the blackwell.gpu_node collection: not a public API, it may change in any release.
"""The exception every core raises for a bad option: its message names the option and the fix."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pragma: no mutate


class InvalidOption(ValueError):
    """A problem with an option, its message naming the option and the fix."""
