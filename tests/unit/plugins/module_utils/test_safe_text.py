import pytest

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.text import (
    bounded_int,
    control_character_problem,
    control_character_problems,
)


@pytest.mark.parametrize("value", [
    "a\nExecStartPre=/bin/sh -c id", "trailing\n", "a\rb", "nul\0", "tab\there", "esc\x1b[2J", "del\x7f",
    "next line\x85", "line\u2028separator", "paragraph\u2029separator",
])
def test_control_characters_are_named_with_the_variable(value):
    problem = control_character_problem(value, "sglang_server_env.FOO")
    assert problem.startswith("sglang_server_env.FOO: the value holds the control character U+")
    assert "remove it" in problem


@pytest.mark.parametrize("value", ["", "/home/sglang/ml-env", "--api-key=s3cr3t", "ünïcödé ok", 16777216, 1.5])
def test_printable_values_pass(value):
    assert control_character_problem(value, "x") is None


def test_position_and_code_point_are_reported():
    assert "U+000A at position 3" in control_character_problem("abc\ndef", "name")


def test_every_bad_pair_is_reported():
    assert control_character_problems([("a", "ok"), ("b", "x\n"), ("c", "\ry")]) == [
        control_character_problem("x\n", "b"), control_character_problem("\ry", "c")]


def test_the_whole_message_says_where_and_how_to_fix():
    # All of it, so that a changed word in the fix is seen, not only its first and last words.
    assert control_character_problem("ab\x1b", "sglang_server_args.x") == (
        "sglang_server_args.x: the value holds the control character U+001B at position 2; values written into "
        "files (units, Python, shell, INI) must be one line of printable text: remove it")


@pytest.mark.parametrize("text, digits, number", [
    ("0", 20, 0), ("580", 20, 580), ("18446744073709551615", 20, 18446744073709551615),
    ("184467440737095516150", 20, None), ("200", 3, 200), ("2000", 3, None), ("", 20, None), ("-1", 20, None),
    (" 1", 20, None), ("1.0", 20, None), ("\u00b2", 20, None), ("\u0661\u0662", 20, None), ("9" * 5000, 20, None),
    (None, 20, None),
])
def test_a_number_from_outside_is_ascii_digits_within_a_bound(text, digits, number):
    """int() refuses "\u00b2" (which isdigit() accepts), reads "\u0661\u0662" as 12, and past 4,300 digits raises."""
    assert bounded_int(text, digits) == number
