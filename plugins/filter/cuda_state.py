# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pragma: no mutate

from ansible_collections.blackwell.gpu_node.plugins.module_utils._cuda.state import registration_links


class FilterModule(object):
    def filters(self):
        return {"cuda_registration_links": registration_links}
