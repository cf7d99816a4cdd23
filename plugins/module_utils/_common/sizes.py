# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Private to the blackwell.gpu_node collection: not a public API, it may change in any release.
"""Sizes as the collection's messages and reports give them."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pragma: no mutate

# Decimal, as storage and its throughput are given.
GB = 1000 ** 3


def size_text(count):
    """A number of bytes as a reader takes it in: GB, MB or bytes."""
    if count >= GB:
        return "%.2f GB" % (count / GB)
    if count >= 1000 ** 2:
        return "%.1f MB" % (count / 1000 ** 2)
    return "%d bytes" % count
