# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Private to the blackwell.gpu_node collection: not a public API, it may change in any release.
"""Speculative decoding settings: what SGLang 0.5.9 refuses at start-up, found before anything changes.

The role (``sglang_server_speculative_*``) and the module (``speculative.*``) check the same rules and
name their own variables; validate reads the settings back from the running server's command line.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pragma: no mutate

import os
import re

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.text import control_character_problems

# SGLang 0.5.9's --speculative-algorithm choices that run a draft model (NGRAM drafts from the prompt, with no
# model, so it is not offered here; NEXTN is SGLang's alias of EAGLE for MTP layers).
DRAFT_ALGORITHMS = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE")
FLAGS = (("algorithm", "--speculative-algorithm"), ("draft_model_path", "--speculative-draft-model-path"),
         ("num_steps", "--speculative-num-steps"), ("eagle_topk", "--speculative-eagle-topk"),
         ("num_draft_tokens", "--speculative-num-draft-tokens"))
COUNTS = ("num_steps", "eagle_topk", "num_draft_tokens")
# Text too: `-e sglang_server_speculative_num_steps=3` reaches the role as "3", and the module converts it.
POSITIVE_INTEGER = re.compile(r"[1-9][0-9]*")


def problems(settings, prefix):
    """Every reason SGLang 0.5.9 would refuse these settings, each naming prefix + key; empty when none.

    settings holds algorithm, draft_model_path and optionally num_steps, eagle_topk, num_draft_tokens."""
    found = control_character_problems([(prefix + key, settings[key]) for key in ("algorithm", "draft_model_path")
                                        if settings.get(key) is not None])
    if not settings.get("draft_model_path"):
        found.append("%sdraft_model_path is required with speculative decoding: the draft model's directory "
                     "(with its config.json)" % prefix)
    if settings.get("algorithm") not in DRAFT_ALGORITHMS:
        found.append("%salgorithm=%s is not one SGLang 0.5.9 runs with a draft model: use one of %s (EAGLE3 for "
                     "an EAGLE-3 draft)" % (prefix, settings.get("algorithm"), ", ".join(DRAFT_ALGORITHMS)))
    for key in COUNTS:
        value = settings.get(key)
        if value is not None and (isinstance(value, bool) or not POSITIVE_INTEGER.fullmatch(str(value))):
            found.append("%s%s=%r must be a positive integer, or unset for SGLang's choice" % (prefix, key, value))
    # SGLang picks steps, top-k and draft tokens together when num_steps is unset, and asserts that the other
    # two are unset then: a top-k or a draft-token count alone stops the server at start-up.
    if settings.get("num_steps") is None:
        alone = [prefix + key for key in ("eagle_topk", "num_draft_tokens") if settings.get(key) is not None]
        if alone:
            named = " and ".join(alone)
            found.append("%s set without %snum_steps: SGLang 0.5.9 chooses the three together and refuses one "
                         "alone; set %snum_steps too, or unset %s" % (named, prefix, prefix, named))
    return found


def draft_model_problem(path, variable):
    """A message naming variable when path holds no config.json (the first thing SGLang reads of a draft)."""
    if os.path.isfile(os.path.join(path, "config.json")):
        return None
    return ("%s=%s has no config.json: point it at the draft model's directory (for EAGLE-3, the "
            "EAGLE3 checkpoint matching the served model), or download it there first" % (variable, path))


def from_argv(argv):
    """The speculative decoding a command line runs: enabled, and each setting (None when not given)."""
    argv = list(argv or [])
    settings = dict((key, argv[argv.index(flag) + 1] if flag in argv[:-1] else None) for key, flag in FLAGS)
    for key in COUNTS:
        if settings[key] is not None and settings[key].isdigit():
            settings[key] = int(settings[key])
    settings["enabled"] = settings["algorithm"] is not None
    return settings
