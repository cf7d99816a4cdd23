# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.gpu_node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Private to the blackwell.gpu_node collection: not a public API, it may change in any release.
"""Masking of the server's secrets wherever they would be shown: results, diffs, log lines.

SGLang takes its secrets as flags (``--api-key KEY`` or ``--api-key=KEY``) and logs its
whole configuration at start-up (``server_args=ServerArgs(..., api_key='KEY', ...)``),
so a secret can reach a result through the command line or through the log. A server can also echo a key it
was sent (a 401 that quotes the request) in another spelling, so each secret value is masked in every spelling a
server's answer can give it (masked_text says which).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type  # pragma: no mutate

import functools
import re

from ansible_collections.blackwell.gpu_node.plugins.module_utils._common.text import printable_text, result_text

# SGLang 0.5.9's flags whose value is a credential.
SECRET_FLAGS = ("--api-key", "--admin-api-key")
MASK = "********"


def is_secret_flag(word, secret_flags=SECRET_FLAGS):
    """True for a secret flag or an abbreviation of one: SGLang's argparse takes `--api-ke` for `--api-key`."""
    return len(word) > 2 and word.startswith("--") and any(flag.startswith(word) for flag in secret_flags)


def masked_argv(argv, secret_flags=SECRET_FLAGS):
    """argv with the value of every secret flag masked, in both spellings (`--flag VALUE`, `--flag=VALUE`)."""
    shown = []
    hide_next = False
    for word in argv:
        flag, equals, _value = word.partition("=")
        if hide_next:
            shown.append(MASK)
            hide_next = False
        elif equals and is_secret_flag(flag, secret_flags):
            shown.append(flag + "=" + MASK)
        else:
            shown.append(word)
            hide_next = is_secret_flag(word, secret_flags)
    return shown


def secret_values(argv, secret_flags=SECRET_FLAGS):
    """The values that masked_argv hides, for masking them in text too."""
    values = []
    for original, shown in zip(argv, masked_argv(argv, secret_flags)):
        if original != shown:
            values.append(original.partition("=")[2] if shown.endswith("=" + MASK) else original)
    return values


def _flags(secret_flags):
    """SECRET_FLAGS and secret_flags, each once: SGLang's own secret flags are always masked."""
    return tuple(SECRET_FLAGS) + tuple(flag for flag in secret_flags or () if flag not in SECRET_FLAGS)


def _fields(secret_flags):
    # --admin-api-key is logged as admin_api_key='...' inside server_args=ServerArgs(...).
    names = [flag.lstrip("-").replace("-", "_") for flag in secret_flags]
    return re.compile(r"\b(%s)=('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")" % "|".join(re.escape(name) for name in names))


# A long option in free text, with its value after '=' or whitespace: the value ends at whitespace, or at the
# quote it started with.
FLAG_IN_TEXT = re.compile(r"(?<![\w-])(--[A-Za-z0-9][A-Za-z0-9-]*)(=|[ \t]+)(\'[^\']*\'?|\"[^\"]*\"?|[^\s\'\"]+)")


# JSON's two-character escapes (RFC 8259, section 7); any character may be written as \uXXXX instead.
JSON_ESCAPES = {u'"': u'\\"', u"\\": u"\\\\", u"/": u"\\/", u"\b": u"\\b", u"\f": u"\\f", u"\n": u"\\n",
                u"\r": u"\\r", u"\t": u"\\t"}
BASE64_ALPHABETS = (u"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/",
                    u"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
# A value's base64 is masked from this many bytes on. Shorter, too few characters encode its bits alone to tell
# them from other text: those of a 3-byte value are 3 or 4 letters and digits, which a log holds by chance. 6 bytes
# give at least 7 (48 bits with the characters they share), which no other text matches by chance.
BASE64_MIN_BYTES = 6


def _hex(number, digits):
    """number in hexadecimal as a pattern, each letter in either case."""
    return u"".join(u"[%s%s]" % (digit, digit.upper()) if digit.isalpha() else digit
                    for digit in u"%0*x" % (digits, number))


def _json_spellings(character):
    """Patterns of character escaped in a JSON string: \\uXXXX (a UTF-16 pair beyond U+FFFF), its two-character
    escape."""
    units = character.encode("utf-16-be", "surrogatepass")
    spellings = [u"".join(u"\\\\u" + _hex(units[index] << 8 | units[index + 1], 4)
                          for index in range(0, len(units), 2))]
    if character in JSON_ESCAPES:
        spellings.append(re.escape(JSON_ESCAPES[character]))
    return spellings


def _url_spellings(character):
    """Patterns of character URL-encoded: %XX for each byte of its UTF-8, '+' for a space."""
    spellings = [u"".join(u"%" + _hex(byte, 2) for byte in bytearray(character.encode("utf-8", "surrogatepass")))]
    if character == u" ":
        spellings.append(u"\\+")
    return spellings


def _spelled(value, spellings, escape):
    """A pattern of value with any of its characters spelled as spellings gives. The escape character ('\\' in
    JSON, '%' in a URL) is never as it is, where every escape begins: at each place one spelling at most matches,
    so that the search never tries several ways to read a run of them."""
    places = []
    for character in value:
        found = spellings(character)
        places.append(u"(?:%s)" % u"|".join(found if character == escape else [re.escape(character)] + found))
    return re.compile(u"".join(places))


def _base64_patterns(data):
    """Patterns of data's base64 (standard or URL-safe alphabet) wherever it lies in a longer base64 text: one per
    alignment of its first byte in a 3-byte group (0 is data encoded alone, with or without padding). A character
    that also encodes bits of the bytes around it is one of those its value's bits allow; the characters that
    encode none of data's bits are left out. '+' and '/' may be JSON-escaped or URL-encoded too."""
    patterns = []
    for skew in range(3):
        bits = u"?" * (8 * skew) + u"".join(u"{0:08b}".format(byte) for byte in bytearray(data))
        bits += u"?" * (-len(bits) % 6)
        places = []
        for start in range(0, len(bits), 6):
            chunk = bits[start:start + 6]
            if chunk == u"??????":
                continue
            indexes = [index for index in range(64)
                       if all(bit == u"?" or int(bit) == index >> (5 - place) & 1 for place, bit in enumerate(chunk))]
            characters = sorted(set(alphabet[index] for alphabet in BASE64_ALPHABETS for index in indexes))
            places.append(u"(?:%s)" % u"|".join(
                [u"[%s]" % u"".join(re.escape(character) for character in characters)]
                + [spelling for character in characters if character in u"+/"
                   for spelling in _json_spellings(character) + _url_spellings(character)]))
        patterns.append(u"".join(places) + u"={0,2}")
    return patterns


@functools.lru_cache(maxsize=32)
def _spellings_of(value):
    """(value JSON-escaped, URL-encoded, in base64 or None) as patterns, compiled once per value: a log is masked a
    line at a time."""
    data = value.encode("utf-8", "surrogatepass")
    return (_spelled(value, _json_spellings, u"\\"), _spelled(value, _url_spellings, u"%"),
            re.compile(u"|".join(_base64_patterns(data))) if len(data) >= BASE64_MIN_BYTES else None)


def masked_text(text, values=(), secret_flags=SECRET_FLAGS):
    """text with every secret masked: each of values (the secrets of a command line and secret_env's values), the
    value after each secret flag written out as `--flag VALUE` or `--flag=VALUE` (abbreviations too), and every
    secret field of SGLang's server_args line. SGLang's own secret flags are masked whatever secret_flags says.

    Each value is masked in every spelling a server's answer can echo it in: as it is; JSON-escaped, any of its
    characters as \\uXXXX (hex digits in either case) or its two-character escape (\\/ \\" \\\\); URL-encoded, any
    of its characters as %XX (either case), a space as '+'; and, from BASE64_MIN_BYTES bytes on, in base64 of
    either alphabet, padded or not, alone or inside a longer base64 text at any of the 3 alignments (the
    credentials of `Basic base64(user:key)`; the character or two it shares with the bytes around it are masked
    too). Not masked: a value encoded twice or two ways at once (the base64 of its JSON escape, %5C and \\u0073 in
    one echo), base64 broken across lines, hexadecimal, HTML character references, and a value that a server cut
    or changed. At each place of the text one spelling at most matches: a value costs at most its length in steps
    per character of the text."""
    flags = _flags(secret_flags)
    for value in sorted((value for value in values if value), key=len, reverse=True):
        json_escaped, url_encoded, base64_encoded = _spellings_of(value)
        text = text.replace(value, MASK)
        # An escaped spelling holds its escape character: a text without it is not searched for one.
        if u"\\" in text:
            text = json_escaped.sub(MASK, text)
        if u"%" in text or u"+" in text:
            text = url_encoded.sub(MASK, text)
        if base64_encoded is not None:
            text = base64_encoded.sub(MASK, text)

    def flag_value(found):
        if not is_secret_flag(found.group(1), flags) or found.group(3).startswith("--"):
            return found.group(0)
        return found.group(1) + found.group(2) + MASK
    text = FLAG_IN_TEXT.sub(flag_value, text)
    return _fields(flags).sub(lambda found: "%s='%s'" % (found.group(1), MASK), text)


def masked_result_text(text, mask=masked_text):
    """text as a result may show it (result_text) with the secrets that mask hides masked. Terminal sequences and
    control characters go first, so that none can split a secret and keep it from being found; lines are cut
    last, so that a cut cannot leave part of a secret behind."""
    return result_text(mask(printable_text(text)))
