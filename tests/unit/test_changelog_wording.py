"""The changelog says what the collection does, not how it got there: no issue numbers, no commit hashes, no "as
before", "no longer" or "now" - in the released data (changelogs/changelog.yaml), the pending fragments and the
CHANGELOG.rst generated from them. Each phrase here is one that these files do not use legitimately; "--now" (an
argument of systemctl) is not the word "now"."""
import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CHANGELOGS = ROOT / "changelogs"

HISTORY = {
    "an issue reference": re.compile(r"\bissues?\s+#?\d+", re.I),
    "a commit hash": re.compile(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b"),
    '"as before"': re.compile(r"\bas\s+before\b", re.I),
    '"no longer"': re.compile(r"\bno\s+longer\b", re.I),
    '"now"': re.compile(r"(?<![\w-])now(?![\w-])", re.I),
}


def history_in(text):
    """Each phrase of HISTORY found in text, with the words around it."""
    text = " ".join(text.split())
    return [
        f"{what}: ...{text[max(0, found.start() - 60):found.end() + 60]}..."
        for what, pattern in HISTORY.items()
        for found in pattern.finditer(text)
    ]


def texts(data, key=None):
    """Every string of a changelog's YAML data, without the names of the fragment files a release was made from."""
    if key == "fragments":
        return
    if isinstance(data, str):
        yield data
    elif isinstance(data, dict):
        for child_key, value in data.items():
            yield from texts(value, child_key)
    elif isinstance(data, list):
        for value in data:
            yield from texts(value)


@pytest.mark.parametrize("path", [CHANGELOGS / "changelog.yaml", *sorted((CHANGELOGS / "fragments").glob("*.yml"))],
                         ids=lambda path: path.name)
def test_changelog_data_states_what_is(path):
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert [found for text in texts(data) for found in history_in(text)] == []


def test_generated_changelog_states_what_is():
    assert history_in((ROOT / "CHANGELOG.rst").read_text(encoding="utf-8")) == []


@pytest.mark.parametrize("text", [
    "a timeout (issue 12).", "see issues #7", "fixed in 3f3e8fb.", "as before, the role", "it no\nlonger fails",
    "Now the default", "is now ``auto``",
])
def test_history_is_recognised(text):
    assert history_in(text)


@pytest.mark.parametrize("text", [
    "``systemctl disable --now``", "known", "nowhere", "sha256 of its content", "``<name>.<profile>-<8 hex digits>``",
    "decoded", "1800 seconds", "the 20000 lines", "before anything changes", "no longest",
])
def test_what_is_is_not_taken_for_history(text):
    assert history_in(text) == []
