"""Make the collection importable as ansible_collections.blackwell.gpu_node.

`ansible-test units` runs from a checkout that already is ansible_collections/blackwell/gpu_node and puts the
directory above ansible_collections on sys.path itself. A plain checkout (`make units`, pytest) is not laid out
that way: `make units` links it into .build/collections, and this puts that on sys.path, so that the tests
import the code the way Ansible does either way.
"""
import re
import sys
from pathlib import Path

import pytest

CHECKOUT = Path(__file__).resolve().parents[2]
COLLECTIONS = CHECKOUT / ".build" / "collections"


def collections_root():
    """The directory that holds ansible_collections/blackwell/gpu_node for this checkout, or None."""
    if CHECKOUT.parent.name == "blackwell" and CHECKOUT.parents[1].name == "ansible_collections":
        return CHECKOUT.parents[2]
    if (COLLECTIONS / "ansible_collections" / "blackwell" / "gpu_node").exists():
        return COLLECTIONS
    return None


ROOT = collections_root()
if ROOT is None:
    raise RuntimeError("%s is missing: run the unit tests through `make units` (or `ansible-test units` from "
                       "an ansible_collections/blackwell/gpu_node checkout)" % COLLECTIONS)
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


@pytest.fixture
def recorder():
    """recorder(outputs) -> (run, calls): a stand-in for the run(argv) a core is given, answering from outputs (a
    dict of argv without the program's name -> what run returns) and noting each argv in calls."""
    def make(outputs):
        calls = []

        def run(argv):
            calls.append(argv)
            return outputs[tuple(argv[1:])]
        return run, calls
    return make


# What no result may show of text from outside: any control character but the line end and the tab (ESC starts
# every terminal sequence; U+009B is the C1 CSI), and the Unicode line and paragraph separators.
RESULT_CONTROL = re.compile(u"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")


def _control_text(value):
    if isinstance(value, dict):
        return [found for key, item in value.items() for found in _control_text(key) + _control_text(item)]
    if isinstance(value, (list, tuple)):
        return [found for item in value for found in _control_text(item)]
    return [value] if isinstance(value, str) and RESULT_CONTROL.search(value) else []


@pytest.fixture
def control_text():
    """control_text(value) -> every text of value (a result, keys too, at any depth) that holds a control
    character: [] for a result fit to show."""
    return _control_text
