# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Private to the blackwell.gpu_node collection: not a public API, it may change in any release.
"""The monitoring role's decisions and the controller's Prometheus service-discovery file. Pure, so that the unit
tests import it directly.

DCGM comes from NVIDIA's CUDA repository (datacenter-gpu-manager-4-cuda<major>, whose nvidia-dcgm.service runs
nv-hostengine as root); dcgm-exporter has no package there: it is one Go binary that the user provides, as a file
on the controller or a URL, with its sha256, and that runs as an unprivileged user talking to nv-hostengine.
Root writes the exporter's unit (the role's template, from exporter_unit_values) and counters file from these
settings, so every value is checked first.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pragma: no mutate

import ipaddress
import re

from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.accounts import ACCOUNT_NAME
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.defaults import SERVER_PORT
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.text import control_character_problem
from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.systemd import HARDENING, systemd_quote

SHA256 = re.compile(r"[0-9a-fA-F]{64}")
URL = re.compile(r"https?://[^\s/]+/\S*")
# A host name (RFC 1123 labels); IP addresses are checked with the ipaddress module.
HOST_NAME = re.compile(r"(?=.{1,253}\Z)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*")
# A DCGM field or one of dcgm-exporter's own (DCGM_EXP_XID_ERRORS_COUNT...), as its counters CSV names them.
COUNTER_FIELD = re.compile(r"DCGM_(FI|EXP)_[A-Z0-9_]+")
COUNTER_TYPES = ("gauge", "counter", "label")
# dcgm-exporter's CSV help text: one field, so no comma; printable.
COUNTER_HELP = re.compile(r"[^,\x00-\x1f\x7f-\x9f\u2028\u2029]*")
# Where DCGM's nvidia-dcgm.service has nv-hostengine listen (its default port).
HOSTENGINE = "localhost:5555"
# A Debian package version as apt-cache madison prints it (epoch, upstream, revision).
DEBIAN_VERSION = re.compile(r"(\d+:)?\d[A-Za-z0-9.+~-]*")


def _port_problem(variable, value):
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < 65536:
        return "%s=%r is not a TCP port: a whole number from 1 to 65535" % (variable, value)
    return None


def _host_problem(variable, value, empty_means):
    """None for an IP address or a host name (or "" where empty_means says what that is), else a message."""
    if value == "" and empty_means:
        return None
    problem = control_character_problem(value, variable)
    if problem:
        return problem
    text = u"%s" % (value,)
    try:
        ipaddress.ip_address(text)
        return None
    except ValueError:
        pass
    if HOST_NAME.fullmatch(text):
        return None
    meaning = " (%s)" % empty_means if empty_means else ""
    return "%s=%r is not an IP address or a host name%s" % (variable, value, meaning)


def source_kind(src):
    """'url' or 'file' for monitoring_exporter_src, None when it is neither."""
    if not isinstance(src, str) or control_character_problem(src, "") is not None:
        return None
    if URL.fullmatch(src):
        return "url"
    if src.startswith("/"):
        return "file"
    return None


def counter_problems(counters, variable="monitoring_exporter_counters"):
    if not isinstance(counters, list) or not counters:
        return ["%s must be a non-empty list of {field, type, help}, like {field: DCGM_FI_DEV_XID_ERRORS, "
                "type: gauge, help: Value of the last XID error encountered.}" % variable]
    problems = []
    for index, counter in enumerate(counters):
        name = "%s[%d]" % (variable, index)
        if not isinstance(counter, dict):
            problems.append("%s=%r is not a {field, type, help} mapping" % (name, counter))
            continue
        field = counter.get("field")
        if not isinstance(field, str) or not COUNTER_FIELD.fullmatch(field):
            problems.append("%s.field=%r is not a DCGM field name like DCGM_FI_DEV_GPU_TEMP" % (name, field))
        if counter.get("type") not in COUNTER_TYPES:
            problems.append("%s.type=%r is none of %s" % (name, counter.get("type"), ", ".join(COUNTER_TYPES)))
        help_text = counter.get("help", "")
        if not isinstance(help_text, str) or not COUNTER_HELP.fullmatch(help_text):
            problems.append("%s.help=%r must be one line of text without a comma (it is a CSV field)"
                            % (name, help_text))
    return problems


def problems(settings):
    """Every problem with the monitoring role's settings (the variables without the monitoring_ prefix), each
    naming its variable and the fix; [] when they can be used."""
    found = []
    src, sha256 = settings.get("exporter_src"), settings.get("exporter_sha256")
    if not src:
        found.append("monitoring_exporter_src is not set: give dcgm-exporter's binary as a file on the controller "
                     "(an absolute path) or an http(s) URL the controller can download; NVIDIA publishes it as a "
                     "container image and as source (github.com/NVIDIA/dcgm-exporter), not as a package")
    elif source_kind(src) is None:
        found.append("monitoring_exporter_src=%r is neither an absolute path on the controller nor an http(s) URL"
                     % (src,))
    if not isinstance(sha256, str) or not SHA256.fullmatch(sha256):
        found.append("monitoring_exporter_sha256=%r is not a sha256 checksum (64 hexadecimal digits): give the "
                     "checksum of the binary in monitoring_exporter_src (sha256sum FILE); an unverified binary is "
                     "never installed" % (sha256,))
    found.append(_host_problem("monitoring_exporter_listen_address", settings.get("exporter_listen_address"),
                               "empty means every address"))
    found.append(_port_problem("monitoring_exporter_port", settings.get("exporter_port")))
    user = settings.get("exporter_user")
    if not isinstance(user, str) or not ACCOUNT_NAME.fullmatch(user) or user == "root":
        found.append("monitoring_exporter_user=%r is not an unprivileged user name useradd accepts: a lower-case "
                     "letter or '_', then up to 31 lower-case letters, digits, '_' or '-', not root" % (user,))
    found += counter_problems(settings.get("exporter_counters"))
    return [problem for problem in found if problem]


def listen_argument(address, port):
    """dcgm-exporter's --address: <host>:<port>, [<IPv6>]:<port>, or :<port> for every address."""
    if ":" in address:
        return "[%s]:%d" % (address, port)
    return "%s:%d" % (address, port)


def dcgm_plan(madison_lines, package, version):
    """{version, problems}: the DCGM version to install, from apt-cache madison's lines for package (newest first,
    "package | version | source"): the one asked for (monitoring_dcgm_version), or the newest."""
    available = []
    for line in madison_lines:
        fields = [field.strip() for field in line.split("|")]
        if len(fields) == 3 and fields[0] == package and DEBIAN_VERSION.fullmatch(fields[1]):
            available.append(fields[1])
    if not available:
        return {"version": None, "problems": [
            "monitoring_dcgm_package=%s is not in the host's apt repositories: DCGM 4 comes from NVIDIA's CUDA "
            "repository (the cuda role adds it) as datacenter-gpu-manager-4-cuda<CUDA major>; add that repository "
            "or its mirror, or name the package the repository has. Nothing was installed" % package]}
    if version and version not in available:
        return {"version": None, "problems": [
            "monitoring_dcgm_version=%s of %s is not in the repository; available: %s. Set monitoring_dcgm_version "
            "to one of them, or leave it empty for the newest. Nothing was installed"
            % (version, package, ", ".join(available))]}
    return {"version": version or available[0], "problems": []}


def counters_csv(counters):
    """dcgm-exporter's counters file (its -f/--collectors): one "field, type, help" line per counter."""
    lines = ["# Written by blackwell.gpu_node.monitoring (monitoring_exporter_counters). Format: DCGM field, "
             "Prometheus metric type, help message"]
    lines += ["%s, %s, %s" % (counter["field"], counter["type"], counter.get("help", "")) for counter in counters]
    return "\n".join(lines) + "\n"


def exporter_unit_values(settings, binary, counters_path):
    """What the role's templates/dcgm-exporter.service.j2 places, each already quoted for systemd: `user` (User=
    and Group=), `exec_start` (ExecStart=: the exporter reading the GPUs through nv-hostengine, listening where the
    settings say) and `hardening` (the directives every unit of the collection has). Raises ValueError naming
    each problem of settings: root writes the unit, so nothing unchecked reaches it."""
    found = problems(settings)
    if found:
        raise ValueError("; ".join(found))
    argv = [binary, "--collectors", counters_path,
            "--address", listen_argument(settings["exporter_listen_address"], settings["exporter_port"]),
            "--remote-hostengine-info", HOSTENGINE]
    return {"user": systemd_quote(settings["exporter_user"]),
            "exec_start": " ".join(systemd_quote(word) for word in argv),
            "hardening": list(HARDENING)}


def _node_value(node, key, default):
    value = node.get(key)
    return default if value is None or value == "" else value


def _port(node, key, default):
    """The port a node's setting holds; digits given on the command line (-e) arrive as text."""
    value = _node_value(node, key, default)
    return int(value) if isinstance(value, str) and value.isdigit() else value


def _enabled(node, key):
    return boolean(_node_value(node, key, False), strict=False)


def scrape_target_groups(nodes):
    """Prometheus' file_sd_configs content for nodes: a target group per metrics endpoint, labelled with the
    node's inventory name and a job (sglang for the server's /metrics, dcgm for the exporter's). Each node is a
    mapping of its own settings, None or empty where unset: name (its inventory name), server_metrics and
    server_port (its sglang_server_enable_metrics and sglang_server_port), monitoring and exporter_port (its
    gpu_node_monitoring and monitoring_exporter_port), metrics_address and address (its gpu_node_metrics_address
    and ansible_host). A node is reached at metrics_address, else address, else its name. Raises ValueError
    naming the host and the variable."""
    groups = []
    for node in nodes:
        hostname = node["name"]
        endpoints = []
        if _enabled(node, "server_metrics"):
            endpoints.append(("sglang", "sglang_server_port", _port(node, "server_port", SERVER_PORT)))
        if _enabled(node, "monitoring"):
            endpoints.append(("dcgm", "monitoring_exporter_port", _port(node, "exporter_port", 9400)))
        if not endpoints:
            continue
        address = _node_value(node, "metrics_address", _node_value(node, "address", hostname))
        found = [_host_problem("gpu_node_metrics_address (or ansible_host)", address, None)]
        found += [_port_problem(variable, port) for job, variable, port in endpoints]
        found = [problem for problem in found if problem]
        if found:
            raise ValueError("host %s: %s; fix the inventory. The service-discovery file was not written"
                             % (hostname, "; ".join(found)))
        host = "[%s]" % address if ":" in address else address
        groups += [{"targets": ["%s:%d" % (host, port)], "labels": {"job": job, "node": hostname}}
                   for job, variable, port in endpoints]
    return groups
