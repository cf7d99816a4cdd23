# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pragma: no mutate

from ansible_collections.blackwell.gpu_node.plugins.module_utils._gateway import releases as _releases
from ansible_collections.blackwell.gpu_node.plugins.module_utils._gateway import workers as _gateway


def gateway_fleet(nodes, gateway_host):
    workers, problems = _gateway.fleet_workers(nodes, gateway_host)
    return {"workers": workers, "problems": problems}


def gateway_release(profile, api_key=None, workers=None):
    return _releases.release(profile, api_key, workers or [])


def gateway_leftovers(installed, requirements):
    return _releases.leftovers(installed, requirements)


class FilterModule(object):
    def filters(self):
        return {"gateway_fleet": gateway_fleet, "gateway_release": gateway_release,
                "gateway_leftovers": gateway_leftovers}
