# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Private to the blackwell.gpu_node collection: not a public API, it may change in any release.
"""The model gateways the collection runs, and every way in which they differ: SGLang's sglang-router 0.3.2 and its
successor, the Shepherd Model Gateway smg 1.13.0. A stack profile names one (its `gateway`: package and version);
the gateway role ships a requirements file with the whole pinned closure of each release below.

What is alike in both, and so is not in the table: the command line the role passes (--host, --port,
--prometheus-host/-port, --policy, the health-check, retry, timeout and grace-period flags, --log-level,
--control-plane-api-keys, --api-key), POST /workers with {url, api_key, labels} answered 202, GET /workers as
{"workers": [{id, url, is_healthy, ...}]}, DELETE /workers/<id>, worker ids as hyphenated UUIDs (sglang-router v4,
smg v7), /liveness, the smg_* metrics, and SIGTERM ending the requests in flight within the grace period.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pragma: no mutate

import re

GATEWAYS = {
    "sglang-router": {
        # The module whose launch_router() and parse_router_args() the role's launcher calls.
        "module": "sglang_router.launch_router",
        # What launch_router() retitles the process to (setproctitle).
        "title": "sglang::router",
        # --policy choices but power_of_two, which refuses to start without two --worker-urls: the role starts
        # the gateway without any (each worker is registered with its own key through the API).
        "policies": ("random", "round_robin", "cache_aware", "manual"),
        # Where GET /workers puts a worker's labels.
        "labels": "metadata",
        # The request that changes a registered worker's key and labels.
        "update": "PUT",
        # The status GET /workers gives a removed worker while its requests in flight end: none, it is gone at once.
        "draining": None,
        # Whether a client's own Authorization header reaches the worker in place of the worker's key.
        "forwards_client_key": False,
        # Shipped versions, each with the oldest Python its pinned closure installs on.
        "versions": {"0.3.2": "3.11"},
    },
    "smg": {
        "module": "smg.launch_router",
        "title": "smg::router",
        "policies": ("random", "round_robin", "passthrough", "cache_aware", "least_load", "manual",
                     "consistent_hashing", "prefix_hash"),
        "labels": "labels",
        # PUT /workers/<id> replaces the whole worker (its url required) and registers it anew.
        "update": "PATCH",
        # Listed with is_healthy false and sent no new request until its requests in flight end.
        "draining": "draining",
        # smg sends the worker's key only to a client that sent no Authorization of its own.
        "forwards_client_key": True,
        "versions": {"1.13.0": "3.10"},
    },
}
DEFAULT_PACKAGE = "sglang-router"
# pip's own seed of a virtualenv, which no requirements file pins and the gateway's virtualenv keeps.
SEED = ("pip", "setuptools", "wheel")


def gateway(package):
    """The table of package (a key of GATEWAYS)."""
    return GATEWAYS[package]


def titles():
    """Every title a gateway gives its process: a switch from one package to the other still recognises the
    process the module started before it."""
    return tuple(sorted(entry["title"] for entry in GATEWAYS.values()))


def shipped():
    """`package version` of every release the role ships, in a stable order."""
    return ["%s %s" % (package, version) for package in sorted(GATEWAYS)
            for version in sorted(GATEWAYS[package]["versions"])]


def requirements_file(package, version):
    """The name of the role's requirements file (roles/gateway/files) of one release."""
    return "requirements-%s-%s.txt" % (package, version)


def release(profile, api_key=None, workers=()):
    """What the gateway role installs and runs for the stack profile (stack_selected): {package, version,
    requirements (the file's name), python (the oldest Python its closure takes), problems}. Problems name the
    variable: a release the role ships no requirements for, and with smg, a client key (api_key) that is not each
    worker's own key (smg hands the client's Authorization to the worker, so a worker with another key refuses
    every request)."""
    found = profile.get("gateway") or {}
    package, version = found.get("package"), found.get("version")
    result = {"package": package, "version": version, "requirements": None, "python": None, "problems": []}
    if package not in GATEWAYS or version not in GATEWAYS[package]["versions"]:
        name = profile.get("name")
        result["problems"].append(
            "stack profile %s names the gateway %s %s (its gateway.package and gateway.version, in "
            "stack_profiles.%s or stack_profiles_custom.%s), which the gateway role ships no requirements for: set "
            "them to one of %s" % (name, package, version, name, name, ", ".join(shipped())))
        return result
    result.update(requirements=requirements_file(package, version), python=GATEWAYS[package]["versions"][version])
    if GATEWAYS[package]["forwards_client_key"] and api_key:
        for worker in workers:
            if worker.get("api_key") and worker["api_key"] != api_key:
                result["problems"].append(
                    "host %s: its sglang_server_api_key is not gateway_api_key, and %s sends a client's own key "
                    "(gateway_api_key) to the worker, which would refuse every request: give the node "
                    "gateway_api_key as its sglang_server_api_key, or leave gateway_api_key unset"
                    % (worker.get("name") or worker.get("url"), package))
    return result


def _normalized(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def pinned(requirements):
    """The normalized names a requirements file's text pins (`name==version`, continuation lines of hashes
    skipped)."""
    found = re.findall(r"(?m)^([A-Za-z0-9][A-Za-z0-9._-]*)==", requirements)
    return sorted(set(_normalized(name) for name in found))


def leftovers(installed, requirements):
    """The distributions of a virtualenv (pip list --format=json: [{name, version}]) that requirements (a file's
    text) does not pin and that are not pip's seed: what a release installed before left there."""
    keep = set(pinned(requirements)) | set(SEED)
    return sorted(set(entry["name"] for entry in installed if _normalized(entry["name"]) not in keep))
