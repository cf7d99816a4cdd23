import base64
import functools
import json
import random
import time
from urllib.parse import quote, quote_plus

import pytest

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.secrets import (
    MASK,
    masked_argv,
    masked_result_text,
    masked_text,
    secret_values,
)


def test_both_spellings_of_every_secret_flag_are_masked():
    argv = ["python", "-m", "sglang.launch_server", "--api-key", "k1", "--admin-api-key=k2", "--port", "30000"]
    assert masked_argv(argv) == ["python", "-m", "sglang.launch_server", "--api-key", MASK,
                                 "--admin-api-key=" + MASK, "--port", "30000"]
    assert secret_values(argv) == ["k1", "k2"]


def test_a_flag_the_user_adds_is_masked_and_others_are_not():
    argv = ["--hf-token", "hf_x", "--api-key", "k", "--model-path=/m"]
    assert masked_argv(argv, ("--hf-token",)) == ["--hf-token", MASK, "--api-key", "k", "--model-path=/m"]


def test_a_secret_flag_as_the_last_word_leaves_nothing_to_mask():
    assert masked_argv(["--port", "1", "--api-key"]) == ["--port", "1", "--api-key"]


def test_server_args_line_and_given_values_are_masked():
    line = ("[2026-11-30 10:00:00] server_args=ServerArgs(model_path='/m', api_key='s3cr3t', "
            "admin_api_key=\"k9admin\", port=30000) token hf_abc")
    shown = masked_text(line, values=["hf_abc"])
    assert "s3cr3t" not in shown and "k9admin" not in shown and "hf_abc" not in shown
    assert "api_key='%s'" % MASK in shown and "admin_api_key='%s'" % MASK in shown
    assert "model_path='/m'" in shown and "port=30000" in shown


def test_empty_values_do_not_mask_everything():
    assert masked_text("plain line", values=["", None]) == "plain line"


def test_abbreviations_that_argparse_accepts_are_masked_too():
    argv = ["--api-ke=k1", "--admin-api", "k2", "--ap", "k3", "--port", "30000", "--", "x"]
    assert masked_argv(argv) == ["--api-ke=" + MASK, "--admin-api", MASK, "--ap", MASK, "--port", "30000", "--", "x"]
    assert secret_values(argv) == ["k1", "k2", "k3"]


def test_the_shortest_abbreviation_is_masked_and_a_bare_double_dash_is_not():
    assert masked_argv(["--a", "k", "--", "v"]) == ["--a", MASK, "--", "v"]


def test_a_longer_value_is_masked_before_a_value_inside_it():
    assert masked_text("token abcdef and abc", values=["abc", "abcdef"]) == "token %s and %s" % (MASK, MASK)


def test_the_whole_masked_server_args_line_and_a_flag_of_any_case():
    line = "server_args=ServerArgs(api_key='s3', admin_api_key=\"k9\", port=1)"
    assert masked_text(line) == "server_args=ServerArgs(api_key='%s', admin_api_key='%s', port=1)" % (MASK, MASK)
    assert masked_text("XAI_key='v' key='w'", secret_flags=("--XAI-key",)) == "XAI_key='%s' key='w'" % MASK


def test_a_result_text_is_masked_after_its_escapes_go_and_before_its_lines_are_cut():
    mask = functools.partial(masked_text, values=["p4ssw0rd"])
    text = "login p4ss\x1b[1mw0rd\n" + "x" * 2044 + "p4ssw0rd --api-key=\x1b[0mk-1"
    assert masked_result_text(text, mask) == "login %s\n%s [... %d bytes cut]" % (
        MASK, "x" * 2044 + MASK[:4], len(MASK) - 4 + len(" --api-key=") + len(MASK))


# A key with what JSON and URLs escape ('/', '+', '"', '\\', a space) and whose base64 differs between the standard
# and the URL-safe alphabet ('+' and '/' against '-' and '_'); 22 bytes, so its base64 alone is padded.
KEY = 'sk-Li~e/9f+2 "Q\\x_7>?q'


def json_escaped(value, which="all", upper=False, slash=False):
    """value as a JSON string's text: the characters at the indexes which (all of them for "all") as \\uXXXX, hex
    digits in upper case where upper (True, or the indexes), the others as json.dumps writes them (\\/ for '/'
    where slash)."""
    spelled = []
    for index, character in enumerate(value):
        if which == "all" or index in which:
            spelled.append(("\\u%04X" if upper is True or index in (upper or ()) else "\\u%04x") % ord(character))
        elif character == "/" and slash:
            spelled.append("\\/")
        else:
            spelled.append(json.dumps(character)[1:-1])
    return "".join(spelled)


def percent_encoded(value, which="all", upper=True):
    return "".join("".join(("%%%02X" if upper else "%%%02x") % byte for byte in character.encode("utf-8"))
                   if which == "all" or index in which else character for index, character in enumerate(value))


def b64(data, alphabet="standard", padded=True):
    encoded = (base64.b64encode if alphabet == "standard" else base64.urlsafe_b64encode)(data.encode()).decode()
    return encoded if padded else encoded.rstrip("=")


@pytest.mark.parametrize("echoed", [
    json_escaped(KEY, {0}),
    json_escaped(KEY),
    json_escaped(KEY, upper=True),
    json_escaped(KEY, {0, 3, 7, 10, 13, 14, 16}, upper={3, 13}),
    json_escaped(KEY, (), slash=True),
    json_escaped(KEY, ()),
], ids=["one character", "every character", "upper-case hex", "some characters, mixed case", "\\/ \\\" \\\\",
        "json.dumps"])
def test_a_json_escaped_key_is_masked_whichever_characters_are_escaped(echoed):
    assert KEY not in echoed
    body = '{"error": "invalid api key %s", "code": 401}' % echoed
    assert masked_text(body, values=[KEY]) == '{"error": "invalid api key %s", "code": 401}' % MASK


def test_a_character_beyond_the_basic_plane_is_masked_as_its_json_surrogate_pair():
    key = u"k-\U0001F511-0042"
    echoed = json.dumps(key)[1:-1]
    assert "\\ud83d\\udd11" in echoed
    assert masked_text("key " + echoed.replace("d83d", "D83D"), values=[key]) == "key " + MASK


@pytest.mark.parametrize("echoed", [
    percent_encoded(KEY, {0}),
    percent_encoded(KEY),
    percent_encoded(KEY, upper=False),
    quote(KEY, safe=""),
    quote(KEY, safe="/").replace("%3F", "%3f"),
    quote_plus(KEY),
], ids=["one character", "every character", "lower-case hex", "quote", "quote, mixed case", "quote_plus"])
def test_a_url_encoded_key_is_masked_whichever_characters_are_encoded(echoed):
    assert KEY not in echoed
    assert masked_text("GET /v1/models?key=%s&x=1" % echoed, values=[KEY]) == "GET /v1/models?key=%s&x=1" % MASK


@pytest.mark.parametrize("echoed", [
    b64(KEY), b64(KEY, padded=False), b64(KEY, "urlsafe"), b64(KEY, "urlsafe", padded=False),
    b64(KEY).replace("/", "\\/"), b64(KEY).replace("+", "%2B").replace("/", "%2f"),
], ids=["standard", "standard unpadded", "url-safe", "url-safe unpadded", "JSON-escaped '/'", "URL-encoded '+' '/'"])
def test_the_base64_of_a_key_is_masked_in_either_alphabet_padded_or_not(echoed):
    assert masked_text("token=%s;" % echoed, values=[KEY]) == "token=%s;" % MASK


@pytest.mark.parametrize("user", ["admin", "bob", "anna"], ids=["aligned", "1 byte in", "2 bytes in"])
def test_a_key_inside_basic_credentials_is_masked_at_each_alignment(user):
    """In base64(user:key), the characters that encode only user: stay; from the first that holds a bit of the
    key on, all is masked."""
    encoded = b64(user + ":" + KEY)
    kept = len(user + ":") * 8 // 6
    assert masked_text("Authorization: Basic %s\n" % encoded, values=[KEY]) == (
        "Authorization: Basic %s%s\n" % (encoded[:kept], MASK))
    assert masked_text("Basic %s" % b64(user + ":" + KEY + ":tail", padded=False), values=[KEY]).count(MASK) == 1


def test_a_value_with_regular_expression_characters_is_masked_as_written_and_only_so():
    value = "a.b*c(d)[e]{2}|^$?+"
    text = "x %s y a_b-c(d)[e]{2}|^$?+ z %s" % (value, json_escaped(value, {1, 3}))
    assert masked_text(text, values=[value]) == "x %s y a_b-c(d)[e]{2}|^$?+ z %s" % (MASK, MASK)


def test_a_value_of_the_characters_that_begin_escapes_is_masked_in_each_spelling():
    value = "p%\\\\%25\\u005cx"
    for spelled in (value, json.dumps(value)[1:-1], json_escaped(value), quote(value, safe=""), percent_encoded(value)):
        assert masked_text("[%s]" % spelled, values=[value]) == "[%s]" % MASK, spelled


def test_a_short_value_is_masked_as_written_and_escaped_but_not_in_base64():
    """The base64 of a value of fewer than 6 bytes is a few letters that other text holds by chance: masking it
    would mask unrelated words; its escapes begin with \\ or %, which other text rarely does."""
    text = "k1x %6B1x \\u006b1x azF4 YWJjazF4 ok"
    assert masked_text(text, values=["k1x"]) == "%s %s %s azF4 YWJjazF4 ok" % (MASK, MASK, MASK)


def test_base64_is_masked_from_six_bytes_on():
    assert masked_text("t=" + b64("k1x2y3"), values=["k1x2y3"]) == "t=" + MASK
    assert masked_text("t=" + b64("k1x2y"), values=["k1x2y"]) == "t=" + b64("k1x2y")


def test_a_passphrase_url_encoded_with_plus_signs_alone_is_masked():
    assert quote_plus("open sesame now") == "open+sesame+now"
    assert masked_text("GET /?pass=open+sesame+now", values=["open sesame now"]) == "GET /?pass=" + MASK


def test_unrelated_text_is_not_masked():
    generator = random.Random(7)
    noise = base64.b64encode(bytes(generator.getrandbits(8) for _byte in range(1 << 16))).decode()
    almost = KEY[:-1]
    text = "\n".join([
        noise, base64.urlsafe_b64encode(noise.encode()).decode(),
        json_escaped("sk-Li~e/9f+2 and more words"), percent_encoded("https://example.com/a b?c=d"),
        almost, json_escaped(almost), percent_encoded(almost), b64(almost), b64("admin:" + almost),
        KEY[1:], json_escaped(KEY[1:]), b64(KEY[1:]),
    ])
    assert masked_text(text, values=[KEY, "hf_AbCdEfGhIjKlMnOp"]) == text


@pytest.mark.parametrize("name, text", [
    ("escapes", "\\u0073" * ((1 << 20) // 6)),
    ("the key but its last character", (KEY[:-1] + " ") * ((1 << 20) // len(KEY))),
    ("its escape but the last", json_escaped(KEY)[:-6] * ((1 << 20) // (6 * len(KEY)))),
    ("percent signs", "%" * (1 << 20)),
    ("backslashes", "\\" * (1 << 20)),
    ("its base64 but the last", b64(KEY)[:-4] * ((1 << 20) // 26)),
    ("one letter", "A" * (1 << 20)),
])
def test_a_mebibyte_of_hostile_text_is_masked_in_linear_time(name, text):
    start = time.monotonic()
    shown = masked_text(text, values=[KEY])
    # Linear: well under a second here, and within the bound under make test's load too.
    assert time.monotonic() - start < 5.0, name
    assert shown == text


def test_an_escaped_key_split_by_terminal_sequences_is_masked_after_they_go():
    echoed = json_escaped(KEY, {0, 5})
    text = echoed[:4] + "\x1b[1m" + echoed[4:9] + "\x07" + echoed[9:]
    assert masked_result_text(text, functools.partial(masked_text, values=[KEY])) == MASK
