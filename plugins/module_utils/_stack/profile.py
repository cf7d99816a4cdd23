# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Private to the blackwell.gpu_node collection: not a public API, it may change in any release.
"""Stack profiles: the versions that travel together (CUDA toolkit, driver branch, Python stack).

The profiles themselves are data (roles/stack/defaults/main.yml, and the user's own in inventory);
this checks that the chosen one is complete, so that every role reads the same, valid answer.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pragma: no mutate

import re

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.text import control_character_problem

PIN = "an exact version as the installed distribution reports it, like 2.9.1+cu130 (quoted in YAML if it has one dot)"
SOURCE = ("an http(s):// or file:// URL: a package index (PEP 503, like https://pypi.org/simple) or one wheel "
          "(ending in .whl)")
KERNEL_DISTRIBUTIONS = ("sgl-kernel", "sglang-kernel")
# `python -m sglang.launch_server`, or `sglang serve`, which SGLang recommends from 0.5.10 on.
ENTRYPOINTS = ("launch_server", "serve")
GATEWAY_PACKAGES = ("sglang-router", "smg")
# What an older profile in inventory leaves out means what it meant before the field existed.
DEFAULTS = {
    "aliases": [],
    "python": {"sgl_kernel": {"distribution": "sgl-kernel"}, "sglang": {"entrypoint": "launch_server"}, "lock": None},
    "gateway": {"package": "sglang-router", "version": "0.3.2"},
}
# Every pattern is used with fullmatch: match with "$" would accept a trailing newline.
# PEP 440 public version with an optional local label (+cu130); pip matches it exactly with ===.
PIN_PATTERN = re.compile(r"\d+(\.\d+)*((a|b|rc)\d+)?(\.post\d+)?(\.dev\d+)?(\+[a-z0-9]+(\.[a-z0-9]+)*)?")
# cuda.home is written unquoted into a shell profile and into ld.so.conf.d: no character that a shell or the
# linker's configuration reads as syntax.
PLAIN_PATH = re.compile(r"/[A-Za-z0-9._+/-]*")
PROFILE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


def _fullmatch(pattern, value):
    return isinstance(value, str) and re.fullmatch(pattern, value) is not None


def _lock_name(value):
    """A shipped lock's file name, or an absolute path on the controller, of a .json file."""
    return isinstance(value, str) and value.endswith(".json") and (
        _fullmatch(PROFILE_NAME, value) or _fullmatch(PLAIN_PATH, value))


def _pin(value):
    return _fullmatch(PIN_PATTERN, value)


def _source(value):
    return _fullmatch(r"(https?://[^/\s]+|file://)/\S*", value)


def _strings(value):
    return isinstance(value, list) and value != [] and all(isinstance(item, str) for item in value)


def _version(value, parts):
    return _fullmatch(r"\d+(\.\d+){%d}" % (parts - 1), value)


# Every field a role reads, with a test and what it must be.
FIELDS = (
    ("description", lambda value: isinstance(value, str) and value != "", "a non-empty string"),
    ("aliases", lambda value: isinstance(value, list) and all(_fullmatch(PROFILE_NAME, alias) for alias in value),
     "a list of other names of the profile (letters, digits, '.', '_', '-')"),
    ("operating_systems", lambda value: _strings(value) and all(_fullmatch(r"[a-z]+\d+", os_id) for os_id in value),
     "a non-empty list of OS ids like debian12, ubuntu2404"),
    ("architectures", lambda value: _strings(value) and set(value) <= {"x86_64", "aarch64"},
     "a non-empty list among x86_64, aarch64"),
    ("cuda.version", lambda value: _version(value, 3), "a CUDA release like 13.0.1"),
    ("cuda.series", lambda value: _version(value, 2), "major.minor like 13.0"),
    ("cuda.apt_package", lambda value: _fullmatch(r"[a-z0-9][a-z0-9.+-]+", value),
     "a Debian package name like cuda-toolkit-13-0"),
    ("cuda.apt_version", lambda value: _fullmatch(r"\d[\w.+~:-]*", value),
     "a Debian version like 13.0.1-1"),
    ("cuda.home", lambda value: _fullmatch(PLAIN_PATH, value),
     "an absolute path of letters, digits, '.', '_', '+', '-' and '/'"),
    ("cuda.driver_branch_min", lambda value: isinstance(value, int) and not isinstance(value, bool) and value > 0,
     "the oldest driver branch, an integer like 580"),
    # The Python stack the ml_stack role installs into a virtualenv: each package's exact version and where it
    # comes from; torch also names the CUDA version it must report.
    ("python.min_version", lambda value: _version(value, 2), "major.minor like 3.10 (quoted in YAML)"),
    ("python.torch.version", _pin, PIN),
    ("python.torch.source", _source, SOURCE),
    ("python.torch.cuda", lambda value: _version(value, 2), "the CUDA version torch.version.cuda reports, like 13.0"),
    # SGLang's kernel package was renamed from sgl-kernel to sglang-kernel; both import as sgl_kernel.
    ("python.sgl_kernel.distribution", lambda value: value in KERNEL_DISTRIBUTIONS,
     "the kernel's distribution name, one of %s" % ", ".join(KERNEL_DISTRIBUTIONS)),
    ("python.sgl_kernel.version", _pin, PIN),
    ("python.sgl_kernel.source", _source, SOURCE),
    ("python.flashinfer_python.version", _pin, PIN),
    ("python.flashinfer_python.source", _source, SOURCE),
    # flashinfer 0.6.5 and later carry their kernels without the separate cubin package.
    ("python.flashinfer_cubin.version", lambda value: value is None or _pin(value), PIN + ", or null for none"),
    ("python.flashinfer_cubin.source", _source, SOURCE),
    # flashinfer runs without its JIT cache (it compiles kernels on first use instead).
    ("python.flashinfer_jit_cache.version", lambda value: value is None or _pin(value), PIN + ", or null for none"),
    ("python.flashinfer_jit_cache.source", _source, SOURCE),
    ("python.sglang.version", _pin, PIN),
    ("python.sglang.source", _source, SOURCE),
    ("python.sglang.entrypoint", lambda value: value in ENTRYPOINTS,
     "how the release starts its server, one of %s" % ", ".join(ENTRYPOINTS)),
    # The lock of the profile's whole Python stack, every distribution with its wheels' sha256.
    ("python.lock", lambda value: value is None or _lock_name(value),
     "null (no lock: pip resolves the requirements at install), the file name of a shipped lock "
     "(like sglang-0.5.17-cu130.json) or an absolute path on the controller"),
    # The gateway release that matches the profile's SGLang.
    ("gateway.package", lambda value: value in GATEWAY_PACKAGES, "one of %s" % ", ".join(GATEWAY_PACKAGES)),
    ("gateway.version", _pin, PIN),
)


class StackProfileError(ValueError):
    pass


def _lookup(profile, dotted):
    value = profile
    for key in dotted.split("."):
        if not isinstance(value, dict) or key not in value:
            return False, None
        value = value[key]
    return True, value


def _merge(base, override):
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            value = _merge(merged[key], value)
        merged[key] = value
    return merged


def _check_profiles(profiles, variable):
    if not (isinstance(profiles, dict) and all(isinstance(name, str) and isinstance(profile, dict)
                                               for name, profile in profiles.items())):
        raise StackProfileError("%s must map profile names to profiles (mappings); fix %s in inventory."
                                % (variable, variable))


def _texts(value):
    """The strings of a field's value: itself, or the items of a list."""
    if isinstance(value, str):
        return [value]
    return [item for item in value if isinstance(item, str)] if isinstance(value, list) else []


def _canonical(name, profiles, custom):
    """The profile that name or one of its aliases names; an alias that two names claim is refused."""
    owners = {}
    for profile_name in sorted(set(profiles) | set(custom)):
        aliases = _merge(profiles.get(profile_name, {}), custom.get(profile_name, {})).get("aliases") or []
        for alias in [profile_name] + (aliases if isinstance(aliases, list) else []):
            owners.setdefault(alias, []).append(profile_name)
    claimed = dict((alias, names) for alias, names in owners.items() if len(names) > 1)
    if claimed:
        raise StackProfileError("Stack profile names are ambiguous: %s. Rename the alias under "
                                "stack_profiles_custom.<profile>.aliases so that each name means one profile."
                                % "; ".join("%s names %s" % (alias, " and ".join(names))
                                            for alias, names in sorted(claimed.items())))
    if name not in owners:
        raise StackProfileError("stack_profile=%s is not a known profile; known: %s. Set stack_profile to one of "
                                "them, or define it under stack_profiles_custom." % (name, ", ".join(sorted(owners))))
    return owners[name][0]


def resolve(name, profiles, custom=None):
    """The profile called name, with custom's fields laid over the shipped ones; every problem at once."""
    custom = {} if custom is None else custom
    _check_profiles(profiles, "stack_profiles")
    _check_profiles(custom, "stack_profiles_custom")
    name = _canonical(name, profiles, custom)
    profile = _merge(DEFAULTS, _merge(profiles.get(name, {}), custom.get(name, {})))
    origin = "stack_profiles_custom.%s" % name if name in custom else "stack_profiles.%s" % name
    problems = []
    for field, valid, expected in FIELDS:
        present, value = _lookup(profile, field)
        # Fields reach files (cuda.home a shell profile and ld.so.conf.d, sources pip.conf): name the variable
        # that holds a control character exactly, the custom profile or the shipped one.
        variable = "%s.%s.%s" % ("stack_profiles_custom" if _lookup(custom.get(name, {}), field)[0]
                                 else "stack_profiles", name, field)
        controls = [control_character_problem(text, variable) for text in _texts(value)]
        if not present:
            problems.append("%s is missing (it must be %s)" % (field, expected))
        elif any(controls):
            problems.extend(problem for problem in controls if problem)
        elif not valid(value):
            problems.append("%s=%r is not %s" % (field, value, expected))
    if problems:
        raise StackProfileError("Stack profile %s is incomplete; fix %s:\n- %s" % (name, origin, "\n- ".join(problems)))
    return dict(profile, name=name)
