"""roles/runtime_env/defaults/main.yml: the JIT caches and HF_HOME default to the service user's home as the
service_user role keeps it. The upgrade includes runtime_env where that role's defaults are not in scope; the
fallback must then name the same home and user, or the upgrade and site would render two texts."""
from pathlib import Path

import yaml

ROLES = Path(__file__).resolve().parents[3] / "roles"


def defaults(role):
    return yaml.safe_load((ROLES / role / "defaults" / "main.yml").read_text())


def test_the_fallbacks_are_the_service_user_roles_own_defaults():
    runtime_env, service_user = defaults("runtime_env"), defaults("service_user")
    home = "{{ service_user_home | default('%s') }}" % service_user["service_user_home"]
    assert runtime_env["runtime_env_cache_root"] == home + "/.cache/blackwell-gpu-node"
    assert runtime_env["runtime_env_hf_home"] == home + "/.cache/huggingface"
    assert runtime_env["runtime_env_cache_owner"] == "{{ service_user_name | default('%s') }}" % (
        service_user["service_user_name"])
