"""What Galaxy, the documentation site and the changelog read from the collection."""
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

CHECKOUT = Path(__file__).resolve().parents[2]
ROLES = sorted(path.name for path in (CHECKOUT / "roles").iterdir() if (path / "meta").is_dir())


def entry_point(role):
    return yaml.safe_load((CHECKOUT / "roles" / role / "meta" / "argument_specs.yml").read_text())[
        "argument_specs"]["main"]


@pytest.mark.parametrize("role", ROLES)
def test_every_role_has_a_readme_whose_example_is_the_documented_one(role):
    """Galaxy's importer refuses a collection whose roles have no README.md; the site shows the spec's example."""
    readme = (CHECKOUT / "roles" / role / "README.md").read_text()
    assert readme.startswith("# blackwell.gpu_node.%s\n" % role)
    assert "(meta/argument_specs.yml)" in readme
    assert "ansible-doc -t role blackwell.gpu_node.%s" % role in readme
    (example,) = re.findall(r"## Example\n\n```yaml\n(.*?)```", readme, re.S)
    assert entry_point(role)["examples"] == example
    assert "blackwell.gpu_node.%s" % role in example


@pytest.mark.parametrize("role", ROLES)
def test_every_role_says_when_it_was_added(role):
    """antsibull-changelog lists a role under New Roles only with version_added."""
    assert entry_point(role)["version_added"] == "0.1.0"


# antsibull-changelog adds the New Modules, Plugins, Roles and Playbooks sections by itself.
ANNOUNCES_NEW_CONTENT = re.compile(r"^\S+ - new (module|role|filter|playbook)\b|^Playbooks ``", re.I)


def changelog_entries():
    texts = []
    for fragment in sorted((CHECKOUT / "changelogs" / "fragments").glob("*.yml")):
        texts.append((fragment.name, yaml.safe_load(fragment.read_text())))
    for version, release in yaml.safe_load((CHECKOUT / "changelogs" / "changelog.yaml").read_text())[
            "releases"].items():
        texts.append(("changelog.yaml %s" % version, release.get("changes", {})))
    for source, sections in texts:
        for section, entries in sections.items():
            if section.startswith("add "):  # antsibull-changelog's own list of new playbooks
                continue
            for entry in ([entries] if isinstance(entries, str) else entries):
                yield source, section, entry


def test_no_changelog_entry_announces_what_antsibull_changelog_lists_itself():
    duplicates = ["%s (%s): %s" % (source, section, entry[:60]) for source, section, entry in changelog_entries()
                  if ANNOUNCES_NEW_CONTENT.search(entry)]
    assert not duplicates


def test_the_documentation_sites_guides_are_written_from_docs_guides():
    """docs/docsite/rst is generated from docs/guides/*.md: one text to edit, checked here."""
    done = subprocess.run([sys.executable, str(CHECKOUT / "docs" / "docsite" / "guides.py"), "--check"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr


def test_the_documentation_site_lists_every_guide():
    """A guide the site's table of contents does not name is written but never shown."""
    sections = yaml.safe_load((CHECKOUT / "docs" / "docsite" / "extra-docs.yml").read_text())["sections"]
    listed = sorted(page for section in sections for page in section["toctree"])
    assert listed == sorted("guide_%s" % source.stem for source in (CHECKOUT / "docs" / "guides").glob("*.md"))


def test_the_readme_opens_with_the_two_commands_that_set_everything_up():
    """A newcomer finds `make demo` and `make test` before installing anything, as the Makefile's targets."""
    readme = (CHECKOUT / "README.md").read_text()
    front = readme[:readme.index("\n## Install")]
    assert "\n## Two commands\n" in front
    block = front[front.index("```sh\n") + 6:]
    block = block[:block.index("```")]
    assert [line.split("#")[0].strip() for line in block.splitlines()] == ["make demo", "make test"]
    makefile = (CHECKOUT / "Makefile").read_text()
    for target in ("demo", "test"):
        assert "\n%s:" % target in makefile
