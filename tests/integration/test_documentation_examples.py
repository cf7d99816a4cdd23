"""Every example and command of the documentation stays runnable.

The documents are README.md, CONTRIBUTING.md, docs/guides/*.md and the role READMEs. In their fenced blocks:

- each shell command is one the collection can answer: an `ansible-playbook` command names playbooks of the
  collection (and an inventory and tags that exist), `make` names Makefile targets, `ansible-galaxy collection
  install` names this collection's tarball, repository or checkout, `ansible-doc` names a role, module or filter
  the collection has;
- each YAML block parses; one that is a play, or a list of tasks, is syntax-checked;
- every playbook named and every such example goes through `ansible-playbook --syntax-check` against
  inventory/example, all in one call.
"""
import re
import shlex
import subprocess
import sys
from pathlib import Path

import yaml
from conftest import COLLECTIONS
from process_tree import run_bounded

CHECKOUT = Path(__file__).resolve().parents[2]
COLLECTION = "blackwell.gpu_node."
SHELL = {"sh", "shell", "bash", "console"}
YAML = {"yaml", "yml"}
# Blocks that are neither commands nor Ansible content: output, a command line quoted as text.
PASSIVE = {"text"}


def documents():
    paths = [CHECKOUT / "README.md", CHECKOUT / "CONTRIBUTING.md"]
    paths += sorted((CHECKOUT / "docs" / "guides").glob("*.md"))
    paths += sorted((CHECKOUT / "roles").glob("*/README.md"))
    return paths


def fenced_blocks(text):
    """(language, body, line number of the opening fence) of each fenced block, indented ones included."""
    blocks = []
    inside = False
    for number, line in enumerate(text.split("\n"), 1):
        stripped = line.strip()
        if not inside and stripped.startswith("```"):
            inside, language, start, lines = True, stripped[3:].strip(), number, []
            indent = len(line) - len(line.lstrip())
        elif inside and stripped == "```":
            blocks.append((language, "\n".join(body[indent:] for body in lines), start))
            inside = False
        elif inside:
            lines.append(line)
    return blocks


def shell_commands(body):
    """Each command of a shell block as argv: continuation lines joined, comments and a leading `$ ` dropped,
    leading VARIABLE=value assignments removed."""
    commands = []
    for line in re.sub(r"\\\n", " ", body).split("\n"):
        argv = shlex.split(re.sub(r"^\$ ", "", line.strip()), comments=True)
        while argv and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", argv[0]):
            argv = argv[1:]
        if argv:
            commands.append(argv)
    return commands


def galaxy():
    return yaml.safe_load((CHECKOUT / "galaxy.yml").read_text())


def makefile_targets():
    return set(re.findall(r"^([A-Za-z0-9_.-]+):", (CHECKOUT / "Makefile").read_text(), re.M))


def known_tags():
    """Every tag a playbook or role names (`tags: [a, b]` or `tags: a`)."""
    tags = set()
    for path in list((CHECKOUT / "playbooks").glob("*.yml")) + list((CHECKOUT / "roles").glob("*/tasks/*.yml")):
        for value in re.findall(r"^\s*tags:\s*(.+)$", path.read_text(), re.M):
            tags.update(tag.strip(" '\"") for tag in value.strip("[] ").split(","))
    return tags


def playbook_problems(argv):
    """The problems of one ansible-playbook command, and the FQCNs of the collection's playbooks it names."""
    problems, playbooks = [], []
    options_with_value = {"-i", "--inventory", "-e", "--extra-vars", "-t", "--tags", "--skip-tags", "-l", "--limit",
                          "-f", "--forks", "-u", "--user", "-c", "--connection"}
    arguments = iter(argv[1:])
    for argument in arguments:
        if argument in options_with_value:
            value = next(arguments, "")
            if argument in ("-i", "--inventory") and not (CHECKOUT / value).exists():
                problems.append("inventory %s does not exist" % value)
            if argument in ("-t", "--tags"):
                unknown = sorted(set(value.split(",")) - known_tags())
                if unknown:
                    problems.append("no playbook or role has the tag(s) %s" % ", ".join(unknown))
        elif argument.startswith("-"):
            continue
        elif argument.startswith(COLLECTION):
            name = argument[len(COLLECTION):]
            if not (CHECKOUT / "playbooks" / ("%s.yml" % name)).is_file():
                problems.append("the collection has no playbook %s (playbooks/%s.yml)" % (argument, name))
            else:
                playbooks.append(argument)
        else:
            problems.append("%s is not a playbook of the collection (blackwell.gpu_node.NAME)" % argument)
    if not playbooks and not problems:
        problems.append("names no playbook")
    return problems, playbooks


def galaxy_problems(argv):
    if argv[1:3] == ["collection", "build"]:
        return []
    if argv[1:3] != ["collection", "install"] or len(argv) < 4:
        return ["only `ansible-galaxy collection build` and `collection install SOURCE` are checked"]
    meta = galaxy()
    source = argv[3]
    tarball = "%s-%s-%s.tar.gz" % (meta["namespace"], meta["name"], meta["version"])
    if source.startswith("git+"):
        repository = re.sub(r"\.git(,.*)?$", "", source[len("git+"):])
        return [] if repository == meta["repository"] else [
            "%s is not the repository galaxy.yml names (%s)" % (source, meta["repository"])]
    if source.endswith(".tar.gz"):
        return [] if Path(source).name == tarball else [
            "%s is not the tarball galaxy.yml builds (%s)" % (source, tarball)]
    if source == ".":
        return []
    return ["%s is neither this collection's repository, its tarball nor a checkout" % source]


def ansible_doc_problems(argv):
    plugin_type, names, arguments = "module", [], iter(argv[1:])
    for argument in arguments:
        if argument in ("-t", "--type"):
            plugin_type = next(arguments, "")
        elif argument in ("-l", "--list"):
            return []
        elif not argument.startswith("-"):
            names.append(argument)
    where = {"role": "roles/%s/meta/argument_specs.yml", "module": "plugins/modules/%s.py",
             "filter": "plugins/filter/%s.yml"}
    if plugin_type not in where:
        return ["ansible-doc -t %s is not checked" % plugin_type]
    problems = []
    for name in names:
        if not name.startswith(COLLECTION) or not (CHECKOUT / (where[plugin_type] % name[len(COLLECTION):])).is_file():
            problems.append("the collection has no %s %s" % (plugin_type, name))
    return problems


def command_problems(argv):
    """The problems of one shell command, and the collection's playbooks it names."""
    program = argv[0]
    if program == "ansible-playbook":
        return playbook_problems(argv)
    if program == "ansible-galaxy":
        return galaxy_problems(argv), []
    if program == "make":
        unknown = [target for target in argv[1:] if not target.startswith("-") and "=" not in target
                   and target not in makefile_targets()]
        return ["the Makefile has no target %s" % ", ".join(unknown)] if unknown else [], []
    if program == "ansible-doc":
        return ansible_doc_problems(argv), []
    if program == "ansible-builder":
        files = [argv[index + 1] for index, argument in enumerate(argv[:-1]) if argument in ("-f", "--file")]
        return ["%s does not exist" % name for name in files if not (CHECKOUT / name).is_file()], []
    if program.rsplit("/", 1)[-1] in ("python", "python3") and len(argv) > 1 and not argv[1].startswith("-"):
        return ([] if (CHECKOUT / argv[1]).is_file() else ["%s does not exist" % argv[1]]), []
    return ["`%s` is a command this test does not know how to check: teach it" % program], []


def yaml_problems(body):
    """The problems of one YAML block, and the play it is or wraps (None when it is variables or a config)."""
    try:
        content = yaml.safe_load(body)
    except yaml.YAMLError as error:
        return ["does not parse as YAML: %s" % str(error).replace("\n", " ")], None
    if not isinstance(content, list):
        return [], None
    if not all(isinstance(item, dict) for item in content):
        return ["a list whose items are not all plays or tasks"], None
    if all("hosts" in item or "ansible.builtin.import_playbook" in item or "import_playbook" in item
           for item in content):
        return [], content
    return [], [{"name": "A documented example's tasks", "hosts": "all", "gather_facts": False, "tasks": content}]


def examine(documents_and_texts):
    """(problems, the collection's playbooks named, the plays of the examples as {label: plays})."""
    problems, playbooks, plays = [], set(), {}
    for path, text in documents_and_texts:
        for language, body, line in fenced_blocks(text):
            where = "%s:%d" % (path, line)
            if language in SHELL:
                for argv in shell_commands(body):
                    found, named = command_problems(argv)
                    problems += ["%s: `%s`: %s" % (where, " ".join(argv), problem) for problem in found]
                    playbooks.update(named)
            elif language in YAML:
                found, play = yaml_problems(body)
                problems += ["%s: %s" % (where, problem) for problem in found]
                if play is not None:
                    plays[where] = play
            elif language not in PASSIVE:
                problems.append("%s: a fenced block of language %r: say sh, yaml or text" % (where, language))
    return problems, playbooks, plays


def the_documents():
    return [(path.relative_to(CHECKOUT), path.read_text()) for path in documents()]


def syntax_check(playbooks, plays, work_dir):
    """One ansible-playbook --syntax-check over the playbooks (FQCNs) and the plays (written to work_dir)."""
    files = []
    for index, (label, play) in enumerate(sorted(plays.items())):
        path = work_dir / ("example_%02d.yml" % index)
        path.write_text("# %s\n%s" % (label, yaml.safe_dump(play, sort_keys=False)))
        files.append(str(path))
    argv = [str(Path(sys.executable).with_name("ansible-playbook")), "--syntax-check",
            "-i", str(CHECKOUT / "inventory" / "example")] + sorted(playbooks) + files
    environ = {"ANSIBLE_COLLECTIONS_PATH": str(COLLECTIONS), "ANSIBLE_FORCE_COLOR": "0",
               "ANSIBLE_NOCOLOR": "1", "PATH": str(Path(sys.executable).parent) + ":/usr/bin:/bin",
               "HOME": str(work_dir)}
    try:
        return run_bounded(argv, timeout=300, env=environ, cwd=str(work_dir))
    except subprocess.TimeoutExpired:
        raise AssertionError("ansible-playbook --syntax-check did not end within 300 s; its processes were killed")


def test_the_quickstarts_site_run_warns_of_no_group_the_example_inventory_leaves_out(tmp_path):
    """The example inventory has no gateway group: site's gateway play matches no host, without a warning."""
    argv = [str(Path(sys.executable).with_name("ansible-playbook")), "--list-hosts",
            "-i", str(CHECKOUT / "inventory" / "example"), "blackwell.gpu_node.site"]
    environ = {"ANSIBLE_COLLECTIONS_PATH": str(COLLECTIONS), "ANSIBLE_NOCOLOR": "1", "HOME": str(tmp_path),
               "PATH": str(Path(sys.executable).parent) + ":/usr/bin:/bin"}
    try:
        listed = run_bounded(argv, timeout=120, env=environ, cwd=str(tmp_path))
    except subprocess.TimeoutExpired:
        raise AssertionError("ansible-playbook --list-hosts did not end within 120 s; its processes were killed")
    assert listed.returncode == 0, listed.stdout + listed.stderr
    assert "Run SGLang's model gateway in front of the GPU nodes" in listed.stdout
    assert "WARNING" not in listed.stdout + listed.stderr, listed.stdout + listed.stderr


def test_every_command_and_yaml_example_of_the_documentation_is_sound():
    problems = examine(the_documents())[0]
    assert not problems, "\n".join(problems)


def test_the_readme_quickstart_runs_site_then_validate_on_the_example_inventory():
    (quickstart,) = re.findall(r"\n## Quickstart\n(.*?)\n## ", (CHECKOUT / "README.md").read_text(), re.S)
    commands = [argv for language, body, _line in fenced_blocks(quickstart) if language in SHELL
                for argv in shell_commands(body)]
    assert [argv[-1] for argv in commands] == ["blackwell.gpu_node.site", "blackwell.gpu_node.validate"]
    assert all(argv[:3] == ["ansible-playbook", "-i", "inventory/example"] for argv in commands)


def test_every_playbook_and_example_play_the_documentation_shows_passes_the_syntax_check(tmp_path):
    problems, playbooks, plays = examine(the_documents())
    assert not problems, "\n".join(problems)
    assert "blackwell.gpu_node.site" in playbooks and plays
    done = syntax_check(playbooks, plays, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr


BROKEN = """# A broken guide

```sh
ansible-playbook -i inventory/example blackwell.gpu_node.sites
make no-such-target
ansible-galaxy collection install blackwell-gpu_node-9.9.9.tar.gz
ansible-doc -t role blackwell.gpu_node.no_such_role
curl https://example.com
```

```yaml
- hosts: gpu_nodes
  roles: [
```

```
no language
```
"""


def test_a_missing_playbook_a_broken_yaml_example_and_unknown_commands_are_each_named():
    problems, playbooks, plays = examine([(Path("broken.md"), BROKEN)])
    assert playbooks == set() and plays == {}
    assert len(problems) == 7, problems
    for expected in ("the collection has no playbook blackwell.gpu_node.sites", "no target no-such-target",
                     "not the tarball galaxy.yml builds", "no role blackwell.gpu_node.no_such_role",
                     "`curl` is a command this test does not know", "broken.md:11: does not parse as YAML",
                     "broken.md:16: a fenced block of language ''"):
        assert any(expected in problem for problem in problems), (expected, problems)


def test_a_python_script_the_documentation_runs_must_exist():
    assert command_problems([".venv/bin/python", "bench/test_steps.py", "--dry-run"]) == ([], [])
    assert command_problems(["python3", "bench/no_such_bench.py"]) == (["bench/no_such_bench.py does not exist"], [])


def test_an_example_play_with_a_module_that_does_not_exist_fails_the_syntax_check(tmp_path):
    typo = "```yaml\n- name: A typo\n  blackwell.gpu_node.wait_for_servr:\n    log_path: /var/log/x.log\n```\n"
    problems, _commands, plays = examine([(Path("typo.md"), typo)])
    assert not problems and list(plays) == ["typo.md:1"]
    done = syntax_check(set(), plays, tmp_path)
    assert done.returncode != 0 and "wait_for_servr" in done.stdout + done.stderr
