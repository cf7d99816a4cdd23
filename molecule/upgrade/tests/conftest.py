"""The node fixture of the tests of each outcome (in the directories below)."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from node import Node  # noqa: E402 (after its directory is on the path)


@pytest.fixture
def node(host):
    return Node(host)
