"""Offline stand-in for the get-pip.py that ansible-test downloads.

ansible-test bootstraps pip in each of its virtualenvs with a script it fetches from a
host this network cannot reach, unless a cached copy sits at
~/.ansible/test/cache/get_pip_<version>.py; `make sanity` puts this one there.
It does what that script does with the same arguments: install pip into the running
interpreter (ensurepip's bundled wheel), then install the requested packages.
ansible-test sets PIP_CONFIG_FILE=/dev/null, so the system's trust settings are
ignored: the CA bundle is passed explicitly.
"""
import os
import subprocess
import sys

GET_PIP_ONLY_OPTIONS = ("--no-setuptools", "--no-wheel")
CA_BUNDLES = ("/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt")


def main():
    subprocess.check_call([sys.executable, "-m", "ensurepip", "--default-pip"])
    options = [arg for arg in sys.argv[1:] if arg not in GET_PIP_ONLY_OPTIONS]
    cert = [f"--cert={path}" for path in CA_BUNDLES if os.path.exists(path)][:1]
    subprocess.check_call([sys.executable, "-m", "pip", "install", *cert, *options])


if __name__ == "__main__":
    main()
