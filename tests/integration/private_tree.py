"""Run a command where the host's CUDA registration is a test's tree: in a private mount namespace, the paths a
restore of node_snapshot changes are bind mounts of directories under TREE, so that the command (Ansible running
the module as root) changes the tree and never this machine's /etc or /usr/local.

    unshare -m --propagation private python private_tree.py TREE [--full PATH] -- ARGV...

TREE holds etc/ld.so.conf.d, etc/profile.d, etc/alternatives, var/lib/dpkg/alternatives (update-alternatives'
state), var/log (its log), usr/local and an executable `ldconfig`, which stands in for /usr/sbin/ldconfig: the
real one would rewrite this machine's /etc/ld.so.cache from the tree's few files. --full PATH (one of the bound
directories) puts a 16 KiB tmpfs there, filled up, holding a copy of the tree's directory: writes there fail
with ENOSPC as on a full disk; what the command left there is copied back to the tree afterwards.
"""
import errno
import os
import shutil
import subprocess
import sys

BOUND = ("/etc/ld.so.conf.d", "/etc/profile.d", "/etc/alternatives", "/var/lib/dpkg/alternatives", "/var/log",
         "/usr/local")
FILLER = ".filler"


def mount(*args):
    subprocess.run(["mount"] + list(args), check=True)


def copy_entries(source, destination):
    """Copy the files and links of source into destination, owners and modes kept (the trees are flat)."""
    for name in os.listdir(source):
        if name == FILLER:
            continue
        origin, copy = os.path.join(source, name), os.path.join(destination, name)
        info = os.lstat(origin)
        if os.path.islink(origin):
            os.symlink(os.readlink(origin), copy)
        else:
            shutil.copy2(origin, copy)
        os.lchown(copy, info.st_uid, info.st_gid)


def fill(directory):
    """Write into directory until the file system is full."""
    with open(os.path.join(directory, FILLER), "wb", buffering=0) as filler:
        try:
            while True:
                filler.write(b"\0" * 512)
        except OSError as exc:
            if exc.errno != errno.ENOSPC:
                raise


def main(argv):
    separator = argv.index("--")
    tree, options, command = argv[0], argv[1:separator], argv[separator + 1:]
    full = options[options.index("--full") + 1] if "--full" in options else None
    for path in BOUND:
        mount("--bind", os.path.join(tree, path.lstrip("/")), path)
    mount("--bind", os.path.join(tree, "ldconfig"), "/usr/sbin/ldconfig")
    if full is not None:
        mount("-t", "tmpfs", "-o", "size=16k,mode=0755", "tmpfs", full)
        copy_entries(os.path.join(tree, full.lstrip("/")), full)
        fill(full)
    returncode = subprocess.run(command, check=False).returncode
    if full is not None:
        kept = os.path.join(tree, full.lstrip("/"))
        for name in os.listdir(kept):
            os.unlink(os.path.join(kept, name))
        copy_entries(full, kept)
    return returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
