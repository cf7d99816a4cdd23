"""Make the collection importable as ansible_collections.blackwell.gpu_node.

`make units` links the checkout into .build/collections; this puts that on sys.path
so the tests import the code the way Ansible does.
"""
import sys
from pathlib import Path

COLLECTIONS = Path(__file__).resolve().parents[2] / ".build" / "collections"
if not (COLLECTIONS / "ansible_collections" / "blackwell" / "gpu_node").exists():
    raise RuntimeError("%s is missing: run the unit tests through `make units`" % COLLECTIONS)
sys.path.insert(0, str(COLLECTIONS))
