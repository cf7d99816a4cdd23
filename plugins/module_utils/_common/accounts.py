# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Private to the blackwell.gpu_node collection: not a public API, it may change in any release.
"""Users and groups, as the host's databases name them."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pragma: no mutate

import grp
import os
import pwd
import re

# POSIX's portable user name (a letter, digit, '.', '_' or '-', not starting with '-'), as useradd and groupadd
# accept it on Debian and Ubuntu with their default NAME_REGEX: lower-case, starting with a letter or '_', at most
# 32 characters, an optional trailing '$'.
ACCOUNT_NAME = re.compile(r"[a-z_][a-z0-9_-]{0,31}[$]?")


def user_name(uid):
    """The name of uid, None when the host has no such user."""
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return None


def group_name(gid):
    """The name of gid, or the number as text when the host has no such group."""
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return str(gid)


def described_user(uid):
    """uid as a message shows it: its name, or `uid N` when it has none."""
    return user_name(uid) or "uid %d" % uid


def account(name):
    """{"user", "uid", "gid", "home", "groups"} of the user name (groups: its supplementary group ids), None when
    the host has no such user."""
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        return None
    return {"user": entry.pw_name, "uid": entry.pw_uid, "gid": entry.pw_gid, "home": entry.pw_dir,
            "groups": sorted(set(os.getgrouplist(entry.pw_name, entry.pw_gid)) - set([entry.pw_gid]))}
