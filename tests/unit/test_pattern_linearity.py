"""Every regular expression of the collection's Python runs in linear time, whatever the text it is given.

The collection parses what it does not control: a command's output, a log, a gateway's answer. A pattern with
nested or adjacent quantifiers that can match the same characters backtracks polynomially (or worse) on a line
built for it, and Python's re cannot be interrupted: one 6 KB line can hold a module for minutes, past any
timeout. So no pattern may do that, and this test finds one that does without knowing its purpose.

For each pattern (every compiled pattern a module under plugins/ keeps, at any depth of its constants, every
literal pattern passed to a function of re, and every entry of the diagnosis catalogue), the classic attack
strings for its shape are built from its own parse tree: the part before a quantifier, then the text between two
quantifiers (or one quantifier's body) repeated, then a character that makes the match fail and backtrack. Each is
run at growing sizes with the method(s) the code applies to the pattern: search, sub, findall and split try every
start, match and fullmatch only the first. A pattern is superlinear when its time grows far faster than the input
once it is measurable.
"""
import ast
import importlib
import itertools
import json
import math
import os
import re
import select
import signal
import time
from pathlib import Path

try:
    from re import _parser as sre_parse, _constants as sre_constants
except ImportError:  # Python < 3.11
    import sre_constants
    import sre_parse

import pytest

PLUGINS = Path(__file__).resolve().parents[2] / "plugins"
PACKAGE = "ansible_collections.blackwell.gpu_node.plugins"
# The attack string grows by GROWTH_STEP each time, from a few characters, until matching it takes MEASURABLE_S;
# the time is then compared with the one a quarter the size took: a linear pattern takes about a quarter of it
# (exponent 1), a quadratic one a sixteenth (2). Small steps at first keep an exponential pattern from jumping to
# an input it would never finish.
FIRST_SIZE, LINEAR_UNTIL, LAST_SIZE, GROWTH_STEP = 4, 48, 4096, 1.5
MEASURABLE_S = 0.2
MAX_EXPONENT = 1.5
# A quadratic pattern with a long pump (a word repeated) is still quick at LAST_SIZE: past it the time is compared
# once more with that of FINAL_GROWTH times the input, the best of three runs each, where it takes more than
# FINAL_MEASURABLE_S (no linear pattern of the collection takes a tenth of it): linear is FINAL_GROWTH times slower,
# quadratic its square.
FINAL_GROWTH = 4
FINAL_MEASURABLE_S = 0.02
# Python's re cannot be interrupted: a pattern's whole check runs in a child, killed after this long.
PATTERN_DEADLINE_S = 60
SCANNING = frozenset(("search", "sub", "subn", "findall", "finditer", "split"))
ANCHORED = frozenset(("match", "fullmatch"))
# Characters that end an attack string: none of the patterns' texts ends a match on them.
FAILING_ENDS = ("\x00", "\n")
# A set's members tried as its sample: the first, and those the collection's texts are full of.
SET_SAMPLES = (" ", "a", "0", "|", ":", "-", ".", "\t")


def _modules():
    # plugins/ and its folders are namespace packages (no __init__.py), which pkgutil does not walk.
    for path in sorted(PLUGINS.rglob("*.py")):
        if path.name == "__init__.py":
            continue
        name = ".".join((PACKAGE,) + path.relative_to(PLUGINS).with_suffix("").parts)
        try:
            yield importlib.import_module(name)
        except Exception:  # a module that needs what this machine lacks has no pattern to check here
            continue


def _compiled(value, depth=0):
    if isinstance(value, re.Pattern):
        yield value
    elif depth < 4 and isinstance(value, (tuple, list, frozenset, set)):
        for item in value:
            yield from _compiled(item, depth + 1)
    elif depth < 4 and isinstance(value, dict):
        for item in value.values():
            yield from _compiled(item, depth + 1)


def _methods_by_name(tree):
    """{global name: methods called on it} and [(literal pattern, re function)] of a module's source."""
    methods, literals = {}, []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        owner, method = node.func.value, node.func.attr
        if isinstance(owner, ast.Name) and owner.id == "re" and method != "compile":
            if node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                literals.append((node.args[0].value, method))
        elif isinstance(owner, ast.Name):
            methods.setdefault(owner.id, set()).add(method)
        elif isinstance(owner, ast.Attribute):
            methods.setdefault(owner.attr, set()).add(method)
    return methods, literals


def _assigned(tree):
    """The names a module's top level assigns."""
    return set(target.id for node in tree.body if isinstance(node, ast.Assign)
               for target in node.targets if isinstance(target, ast.Name))


def collected():
    """[(where, pattern, methods)] of every pattern under plugins/: a pattern is named after the module that
    defines it, and checked with every method any module applies to it."""
    found = {}

    def add(key, where, pattern, methods, defines):
        entry = found.setdefault(key, [where, pattern, set()])
        entry[2] |= methods
        if defines:
            entry[0] = where

    for module in _modules():
        tree = ast.parse(Path(module.__file__).read_text())
        methods, literals = _methods_by_name(tree)
        defined = _assigned(tree)
        short = module.__name__.rsplit(".", 1)[-1]
        for name, value in sorted(vars(module).items()):
            for index, pattern in enumerate(_compiled(value)):
                used = methods.get(name, set()) & (SCANNING | ANCHORED)
                add((pattern.pattern, pattern.flags), "%s.%s[%d]" % (short, name, index), pattern, used,
                    name in defined)
        for text, method in literals:
            pattern = re.compile(text)
            add((pattern.pattern, pattern.flags), "%s: re.%s(%r)" % (short, method, text[:40]), pattern,
                {method if method in SCANNING | ANCHORED else "search"}, True)
        for entry in getattr(module, "DIAGNOSES", ()):
            for field in ("pattern", "where"):
                if isinstance(entry, dict) and isinstance(entry.get(field), str):
                    pattern = re.compile(entry[field])
                    add((pattern.pattern, pattern.flags), "diagnoses %s %s" % (entry.get("id"), field), pattern,
                        {"search"}, True)
    # A pattern no code applies by name (one kept in a table and looped over) is checked as searched.
    return [(where, pattern, methods or {"search"}) for where, pattern, methods in found.values()]


# --- attack strings from a pattern's parse tree ------------------------------------------------------------------

def _category_sample(category):
    name = str(category).lower()
    if "not" in name:
        return "\x01" if "space" in name else " "
    return {"digit": "0", "space": " ", "word": "a", "linebreak": "\n"}.get(
        next((kind for kind in ("digit", "space", "word", "linebreak") if kind in name), "word"), "a")


def _set_samples(items):
    """Characters one set ([...]) matches: those of SET_SAMPLES it takes, then its own members."""
    members = []
    for op, arg in items:
        if op is sre_constants.LITERAL:
            members.append(chr(arg))
        elif op is sre_constants.RANGE:
            members.append(chr(arg[0]))
        elif op is sre_constants.CATEGORY:
            members.append(_category_sample(arg))
    matcher = re.compile(_set_regex(items))
    return list(dict.fromkeys(c for c in SET_SAMPLES + tuple(members) if matcher.fullmatch(c))) or ["a"]


def _set_regex(items):
    parts, negated = [], False
    for op, arg in items:
        if op is sre_constants.NEGATE:
            negated = True
        elif op is sre_constants.LITERAL:
            parts.append(re.escape(chr(arg)))
        elif op is sre_constants.RANGE:
            parts.append("%s-%s" % (re.escape(chr(arg[0])), re.escape(chr(arg[1]))))
        elif op is sre_constants.CATEGORY:
            parts.append({"digit": r"\d", "not_digit": r"\D", "space": r"\s", "not_space": r"\S", "word": r"\w",
                          "not_word": r"\W"}.get(str(arg).lower().replace("category_", ""), r"\w"))
    return "[%s%s]" % ("^" if negated else "", "".join(parts) or r"\x00")


def _samples(items, limit=3):
    """A few strings each of which the sequence of parse items matches (or nearly: lookarounds and anchors are
    skipped)."""
    results = [""]
    for op, arg in items:
        choices = _item_samples(op, arg, limit)
        if not choices:
            continue
        results = [left + right for left, right in itertools.product(results, choices)][:limit * 3]
    return results


def _item_samples(op, arg, limit):
    if op is sre_constants.LITERAL:
        return [chr(arg)]
    if op is sre_constants.NOT_LITERAL:
        return ["a" if chr(arg) != "a" else "b"]
    if op is sre_constants.ANY:
        return ["a"]
    if op is sre_constants.IN:
        return _set_samples(arg)[:limit]
    if op is sre_constants.CATEGORY:
        return [_category_sample(arg)]
    if op is sre_constants.SUBPATTERN:
        return _samples(arg[-1], limit)
    if op is sre_constants.BRANCH:
        return [sample for branch in arg[1] for sample in _samples(branch, 1)][:limit * 2]
    if op in (sre_constants.MAX_REPEAT, sre_constants.MIN_REPEAT, getattr(sre_constants, "POSSESSIVE_REPEAT", None)):
        low, _high, body = arg
        once = _samples(body, limit)
        return [sample * max(low, 1) for sample in once]
    if op is getattr(sre_constants, "ATOMIC_GROUP", None):
        return _samples(arg, limit)
    return []  # anchors, lookarounds, group references


def _flattened(items):
    """The pattern's items in order, groups opened, so that quantifiers inside a group sit beside those around it."""
    flat = []
    for op, arg in items:
        if op is sre_constants.SUBPATTERN:
            flat.extend(_flattened(arg[-1]))
        else:
            flat.append((op, arg))
    return flat


def _is_repeat(op, arg):
    return op in (sre_constants.MAX_REPEAT, sre_constants.MIN_REPEAT) and arg[1] > 1


def _repeat_bodies(items):
    """Every quantifier's body at any depth, flattened with what surrounds it in its own sequence."""
    sequences = [_flattened(items)]
    for op, arg in list(sequences[0]):
        if op in (sre_constants.MAX_REPEAT, sre_constants.MIN_REPEAT):
            sequences.extend(_repeat_bodies(arg[2]))
        elif op is sre_constants.BRANCH:
            for branch in arg[1]:
                sequences.extend(_repeat_bodies(branch))
    return sequences


def attacks(pattern):
    """(prefix, pump, suffixes) triples: prefix + pump * n + suffix is the classic attack on each pair of
    quantifiers i <= j of each sequence of the pattern."""
    found = set()
    for sequence in _repeat_bodies(sre_parse.parse(pattern.pattern, pattern.flags)):
        repeats = [index for index, (op, arg) in enumerate(sequence) if _is_repeat(op, arg)]
        for first, last in itertools.combinations_with_replacement(repeats, 2):
            prefixes = _samples(sequence[:first], 2)
            pumps = _samples(sequence[first:last + 1], 4) if first != last else _samples(sequence[first][1][2], 4)
            rest = _samples(sequence[last + 1:], 1)
            for prefix, pump in itertools.product(prefixes, pumps):
                if pump:
                    found.add((prefix, pump, tuple(rest[0][:-1] + end for end in FAILING_ENDS) + FAILING_ENDS))
    return sorted(found)


def _run(pattern, method, text):
    started = time.perf_counter()
    if method in ("sub", "subn"):
        getattr(pattern, method)("", text)
    elif method == "finditer":
        for _found in pattern.finditer(text):
            pass
    else:
        getattr(pattern, method)(text)
    return time.perf_counter() - started


def _sizes():
    """One character more at a time up to LINEAR_UNTIL, where an exponential pattern doubles its time with each,
    then GROWTH_STEP times more."""
    size = FIRST_SIZE
    while size <= LAST_SIZE:
        yield int(size)
        size = size + 1 if size < LINEAR_UNTIL else size * GROWTH_STEP


def _attack_text(prefix, pump, suffix, size):
    return prefix + pump * max(1, size // len(pump)) + suffix


def _best(pattern, method, text, runs=2):
    return min(_run(pattern, method, text) for _time in range(runs))


def _growth(pattern, method, prefix, pump, suffix):
    """(size, seconds, exponent) where the time became measurable, or at the final comparison; None when it never
    did."""
    times = []
    for size in _sizes():
        text = _attack_text(prefix, pump, suffix, size)
        took = _run(pattern, method, text)
        times.append((len(text), took))
        if took >= MEASURABLE_S:
            earlier = [(length, seconds) for length, seconds in times if length * 4 <= len(text)]
            length, seconds = earlier[-1] if earlier else times[0]
            # Once more, the best of three each: a pause of the process (another job on the machine) lengthens one
            # run, never all three.
            shorter = prefix + pump * max(1, (length - len(prefix) - len(suffix)) // len(pump)) + suffix
            seconds = _best(pattern, method, shorter, 3)
            took = _best(pattern, method, text, 3)
            exponent = math.log(took / max(seconds, 1e-7)) / math.log(len(text) / float(length))
            return len(text), took, exponent
    small = _attack_text(prefix, pump, suffix, LAST_SIZE)
    large = _attack_text(prefix, pump, suffix, LAST_SIZE * FINAL_GROWTH)
    took = _best(pattern, method, large, 3)
    if took < FINAL_MEASURABLE_S:
        return None
    seconds = _best(pattern, method, small, 3)
    return len(large), took, math.log(took / max(seconds, 1e-7)) / math.log(len(large) / float(len(small)))


def _superlinear(pattern, methods):
    for prefix, pump, suffixes in attacks(pattern):
        for method, suffix in itertools.product(sorted(methods), suffixes):
            grown = _growth(pattern, method, prefix, pump, suffix)
            if grown and grown[2] > MAX_EXPONENT:
                return "%s on %r + %r * n + %r: %.3f s at %d characters, time ~ n^%.1f" % (
                    method, prefix[:40], pump[:40], suffix, grown[1], grown[0], grown[2])
    return None


def superlinear(pattern, methods, deadline=PATTERN_DEADLINE_S):
    """How the pattern backtracks superlinearly with one of methods (the attack, the size, the time), or None."""
    reader, writer = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child's outcome is read by the parent
        os.close(reader)
        try:
            os.write(writer, json.dumps(_superlinear(pattern, methods)).encode())
        finally:
            os._exit(0)
    os.close(writer)
    ready = select.select([reader], [], [], deadline)[0]
    if not ready:
        os.kill(child, signal.SIGKILL)
    answer = os.read(reader, 1 << 16) if ready else b""
    os.close(reader)
    os.waitpid(child, 0)
    if not ready:
        return "no answer within %d s: at least one attack string never finished" % deadline
    return json.loads(answer.decode() or "null")


PATTERNS = collected()


def test_the_patterns_are_found():
    """The collection is found and read: a search that finds nothing would pass every pattern."""
    names = [where for where, _pattern, _methods in PATTERNS]
    assert len(PATTERNS) > 50, names
    assert any(name.startswith("text.TERMINAL_SEQUENCE") for name in names), names
    assert any(name.startswith("diagnoses ") for name in names), names


@pytest.mark.parametrize("where, pattern, methods", PATTERNS, ids=[entry[0] for entry in PATTERNS])
def test_no_pattern_backtracks_superlinearly(where, pattern, methods):
    found = superlinear(pattern, methods)
    assert found is None, "%s (%r) backtracks: %s" % (where, pattern.pattern, found)


@pytest.mark.parametrize("text, method", [
    # the DCGM table row pattern that took minutes on a 6 KB row: three overlapping quantifiers over spaces
    (r"\|\s*(?P<test>[^|]*?)\s*\|\s*(?P<result>Pass|Fail|Warn|Skip)\b(?P<detail>[^|]*)\|", "match"),
    # the NVLink counter pattern, quadratic on a line of repeated "Errors"
    (r"\s*Link (?P<link>\d+): (?P<name>[^:]*[Ee]rrors?[^:]*): (?P<value>\d+)\s*$", "match"),
    # the unit after a value of nvidia-smi's, quadratic on a run of spaces
    (r"\s*\[[^\]]*\]$", "search"),
    # the CUDA home a snapshot restores, quadratic on a path of repeated names saying CUDA
    (r"(?:/[A-Za-z0-9_+-][A-Za-z0-9._+-]*)*/[A-Za-z0-9._+-]*[Cc][Uu][Dd][Aa][A-Za-z0-9._+-]*", "fullmatch"),
    # the catalogue's NVSHMEM init function, quadratic on a name of repeated "init"
    (r"nvshmemi?_\w*init\w* failed", "search"),
    # the classics
    (r"(a+)+$", "match"),
    (r"(\w+\s?)*$", "match"),
    (r"\s*\S+\s*=", "search"),
])
def test_a_backtracking_pattern_is_found(text, method):
    """The check itself: the patterns the audit broke, those this check found in the collection before they were
    rewritten, and the textbook ones, are found superlinear."""
    assert superlinear(re.compile(text), {method}) is not None


@pytest.mark.parametrize("text, method", [
    (r"GPU (?P<bus_id>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])$", "match"),
    (r"\x1b\[[0-?]*[ -/]*[@-~]", "sub"),
    (r"[^|]*", "match"),
])
def test_a_linear_pattern_passes(text, method):
    assert superlinear(re.compile(text), {method}) is None
