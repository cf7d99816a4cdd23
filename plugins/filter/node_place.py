# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pragma: no mutate

from ansible.errors import AnsibleFilterError


def node_place(host, nodes, first_address, port):
    """A host's place in a multi-node server: nnodes, node_rank and dist_init_addr (None for one node)."""
    nodes = list(nodes or [host])
    if host not in nodes:
        raise AnsibleFilterError("%s is not one of the server's nodes (%s)" % (host, ", ".join(nodes)))
    multi = len(nodes) > 1
    return dict(nnodes=len(nodes), node_rank=nodes.index(host),
                dist_init_addr="%s:%d" % (first_address, int(port)) if multi else None)


class FilterModule(object):
    def filters(self):
        return {"node_place": node_place}
