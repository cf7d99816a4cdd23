# Run by the runtime_env role with the virtualenv's interpreter; prints one JSON object.
# Arguments: the names of the variables whose values to report.
import json
import os
import sys
import sysconfig

purelib = sysconfig.get_path("purelib")
hook = sys.modules.get("_blackwell_gpu_node_env")
print(json.dumps({
    "in_venv": sys.prefix != sys.base_prefix,
    "prefix": sys.prefix,
    "purelib": purelib,
    "hook": getattr(hook, "__file__", None),
    "environ": dict((name, os.environ.get(name)) for name in sys.argv[1:]),
}))
