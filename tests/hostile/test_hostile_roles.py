"""The runtime_env and ml_stack roles, run by ansible-playbook with a local connection inside the namespace,
against a virtualenv whose owner's .pth makes sysconfig name the system's dist-packages: each role fails, naming
the problem, writes nothing outside the tree and runs nothing of the owner's as root."""
import test_hostile_ml_stack_converged_info as ml_stack_case
from test_hostile_runtime_env_state import REDIRECT

RUNTIME_ENV = """
- hosts: localhost
  gather_facts: false
  roles:
    - role: blackwell.gpu_node.runtime_env
      vars:
        runtime_env_venv_path: {venv}
        runtime_env_cuda_home: /usr/local/cuda-13.0
        runtime_env_nccl_profile: pcie_blackwell
"""
# Offline, from an empty wheelhouse in the tree: the role has no package index to reach (a build from the stack
# index fixture costs minutes), so it must stop at what it can check on the host, before any change.
ML_STACK = """
- hosts: localhost
  gather_facts: false
  roles:
    - role: blackwell.gpu_node.ml_stack
      vars:
        ml_stack_venv_path: {venv}
        # The service user the role's dependency keeps is the tree's owner, an existing account: the role is
        # judged on the virtualenv alone, whatever accounts the machine has.
        service_user_name: {owner}
        ml_stack_venv_owner: {owner}
        ml_stack_python: /usr/bin/python3
        ml_stack_system_packages: []
        ml_stack_offline: true
        ml_stack_wheelhouse_path: {wheelhouse}
        ml_stack_gpus_required: false
"""


def failed_tasks(run):
    """(task name, its message) of each task that failed on localhost, from the json callback's report."""
    failed = []
    for play in (run.result or {}).get("plays", []):
        for task in play.get("tasks", []):
            host = task.get("hosts", {}).get("localhost", {})
            if host.get("failed") and not host.get("ignore_errors"):
                failed.append((task["task"]["name"], host.get("msg") or host.get("stderr") or ""))
    return failed


def judged(case, run, needles):
    """Mark the playbook's report as refused when a task failed naming one of needles; problems otherwise."""
    failed = failed_tasks(run)
    if run.result is not None:
        run.result["failed"] = bool(failed)
        run.result["msg"] = " | ".join("%s: %s" % (name, msg) for name, msg in failed)
    if run.result is not None and not failed:
        return ["the role did not fail (rc %s)" % run.rc]
    if failed and not any(needle in msg for _name, msg in failed for needle in needles):
        return ["the role failed without naming %s: %s" % (" or ".join(needles), run.msg[:300])]
    return []


def test_the_runtime_env_role_refuses_a_virtualenv_whose_sysconfig_lies(hostile):
    case = hostile("runtime_env role", "sysconfig-redirect .pth")
    venv = case.make_venv()
    venv.pth("00-aaa-redirect.pth", REDIRECT)
    run = case.playbook(RUNTIME_ENV.format(venv=venv.stable))
    problems = judged(case, run, ["/usr/lib/python3/dist-packages", "sysconfig"])
    if not run.probes:
        problems.append("the role never ran the virtualenv's interpreter (no probe line)")
    case.check(run, "refused", problems=problems)
    case.finish()


def test_the_ml_stack_role_stops_before_changing_a_virtualenv_whose_sysconfig_lies(hostile):
    case = hostile("ml_stack role", "sysconfig-redirect .pth (offline, empty wheelhouse)")
    venv, args = ml_stack_case.setting(case)
    venv.pth("00-aaa-redirect.pth", REDIRECT)
    wheelhouse = case.root_dir("wheelhouse")
    run = case.playbook(ML_STACK.format(venv=args["settings"]["venv_path"], owner=case.user.name,
                                        wheelhouse=wheelhouse))
    problems = judged(case, run, ["wheelhouse", "ml_stack_wheelhouse_path", "sysconfig"])
    case.check(run, "refused", problems=problems)
    case.finish()
