# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Private to the blackwell.gpu_node collection: not a public API, it may change in any release.
"""The service_user role's checks of its settings, before anything on the host changes. Pure, so that the unit
tests import it directly.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pragma: no mutate

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.accounts import ACCOUNT_NAME
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.text import control_character_problem


def _name_problem(variable, value):
    if not isinstance(value, str) or not ACCOUNT_NAME.fullmatch(value):
        return ("%s=%r is not a user or group name useradd accepts: a lower-case letter or '_', then up to 31 "
                "lower-case letters, digits, '_' or '-'" % (variable, value))
    return None


def problems(settings):
    """Every problem with the role's settings (the variables without the service_user_ prefix), each naming its
    variable; [] when the settings can be used."""
    found = [_name_problem("service_user_name", settings.get("name")),
             _name_problem("service_user_group", settings.get("group"))]
    groups = settings.get("groups")
    if not isinstance(groups, list):
        found.append("service_user_groups=%r must be a list of group names, like [video, render]" % (groups,))
    else:
        found += [_name_problem("service_user_groups[%d]" % index, name) for index, name in enumerate(groups)]
    home = settings.get("home")
    home_problem = control_character_problem(home, "service_user_home")
    if home_problem is None and (not isinstance(home, str) or not home.startswith("/") or home.rstrip("/") == ""):
        home_problem = "service_user_home=%r is not an absolute path below /" % (home,)
    found.append(home_problem)
    return [problem for problem in found if problem]
