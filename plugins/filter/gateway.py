# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pragma: no mutate

from ansible_collections.blackwell.gpu_node.plugins.module_utils._gateway import workers as _gateway


def gateway_problems(settings):
    return _gateway.settings_problems(_gateway.normalized_settings(settings))


def gateway_fleet(hostnames, hostvars, gateway_host):
    workers, problems = _gateway.fleet_workers(hostnames, hostvars, gateway_host)
    return {"workers": workers, "problems": problems}


def gateway_registrations(workers):
    return [_gateway.registration(worker) for worker in workers]


def gateway_unit(settings, python, launcher, secrets_path, workers_path):
    return _gateway.unit_values(_gateway.normalized_settings(settings), python, launcher, secrets_path, workers_path)


def gateway_pip_sources(index_url, mirrors, offline, wheelhouse):
    return _gateway.pip_sources(index_url, mirrors, offline, wheelhouse)


def gateway_missing_pins(requirements_text, freeze_text):
    return _gateway.missing_pins(requirements_text, freeze_text)


class FilterModule(object):
    def filters(self):
        return {"gateway_problems": gateway_problems, "gateway_fleet": gateway_fleet,
                "gateway_registrations": gateway_registrations, "gateway_unit": gateway_unit,
                "gateway_pip_sources": gateway_pip_sources, "gateway_missing_pins": gateway_missing_pins}
