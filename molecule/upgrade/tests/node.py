"""What decides the stack the node runs, read from inside the node, for the tests of each outcome."""
import json
import shlex

VENV = "/opt/ml-env"
PORT = 28310
CUDA = {"cu128": "/usr/local/cuda-12.8", "cu130": "/usr/local/cuda-13.0"}
TORCH = {"cu128": "2.9.1+cu128", "cu130": "2.9.1+cu130"}


class Node(object):
    def __init__(self, host):
        self.host = host

    def run(self, *argv):
        return self.host.check_output(" ".join(shlex.quote(word) for word in argv))

    def link_target(self):
        return self.run("readlink", VENV)

    def profile(self):
        return json.loads(self.host.file(VENV + "/ml-stack.json").content_string)["profile"]

    def environment(self):
        """What an interpreter of the virtualenv gets from the rendered environment, started with none."""
        return json.loads(self.run("env", "-i", VENV + "/bin/python", "-c",
                                   "import json, os; print(json.dumps(dict(os.environ)))"))

    def server(self):
        """The recorded server, its live command line, and what its log says since it started."""
        state = json.loads(self.host.file("/var/lib/blackwell-gpu-node/sglang.json").content_string)
        cmdline = self.host.file("/proc/%d/cmdline" % state["pid"]).content.split(b"\0")[:-1]
        log = self.host.file(state["log_path"]).content[state["offset"]:].decode()
        return state, [word.decode() for word in cmdline], log

    def health(self):
        return self.run("python3", "-c", 'import urllib.request as u; print(u.urlopen("http://127.0.0.1:%d/health").status)'
                        % PORT)


def assert_runs(node, profile):
    """The link, the linker, login shells, the rendered environment and the live server are profile's."""
    assert node.link_target().startswith("ml-env.%s-" % profile)
    assert node.profile() == profile
    assert node.run("update-alternatives", "--query", "cuda").count("Value: " + CUDA[profile]) == 1
    assert node.host.file("/etc/ld.so.conf.d/000-blackwell-gpu-node-cuda.conf").content_string.strip().endswith(
        CUDA[profile] + "/lib64")
    assert "CUDA_HOME=" + CUDA[profile] in node.host.file("/etc/profile.d/blackwell-gpu-node-cuda.sh").content_string
    environment = node.environment()
    assert environment["CUDA_HOME"] == CUDA[profile]
    state, cmdline, log = node.server()
    assert cmdline == state["argv"]
    assert cmdline[0] == VENV + "/bin/python"
    assert "stand-in: torch %s," % TORCH[profile] in log
    assert "The server is fired up and ready to roll!" in log
    assert node.health() == "200"
    return environment
