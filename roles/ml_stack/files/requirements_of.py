# Prints the Requires-Dist lines of a distribution as a JSON list: of the installed one (run by the
# virtualenv's Python), or of its only wheel in a folder (run by the controller's Python, which has not
# installed it). Arguments: NAME [WHEEL_FOLDER]
import email.parser
import importlib.metadata
import json
import os
import re
import sys
import zipfile


def normalized(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def requires_in_wheel(name, folder):
    wheels = [
        entry for entry in sorted(os.listdir(folder))
        if entry.endswith(".whl") and normalized(entry.split("-", 1)[0]) == normalized(name)
    ]
    if len(wheels) != 1:
        sys.exit("%s holds %d wheels of %s (%s); expected exactly one" % (folder, len(wheels), name, ", ".join(wheels)))
    with zipfile.ZipFile(os.path.join(folder, wheels[0])) as archive:
        metadata = [entry for entry in archive.namelist() if re.match(r"^[^/]+\.dist-info/METADATA$", entry)]
        text = archive.read(metadata[0]).decode("utf-8")
    return email.parser.Parser().parsestr(text).get_all("Requires-Dist") or []


name = sys.argv[1]
if len(sys.argv) > 2:
    print(json.dumps(requires_in_wheel(name, sys.argv[2])))
else:
    print(json.dumps(importlib.metadata.requires(name) or []))
