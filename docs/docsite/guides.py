"""Write the documentation site's guides (docs/docsite/rst/) from the Markdown they are maintained in.

The guides live in the README (and the real-hardware notes in tests/device/README.md), where a reader of the
repository finds them; Galaxy and the documentation site read reStructuredText from docs/docsite/rst. This turns
the subset of Markdown those sections use into reStructuredText, so that there is one text to edit.
`python3 docs/docsite/guides.py` rewrites the pages; `--check` fails when one is out of date (the unit tests run it).
"""
import re
import sys
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[2]
RST = CHECKOUT / "docs" / "docsite" / "rst"

# page file: (title, reference label, source Markdown, first heading of the section, headings it ends before)
GUIDES = {
    "guide_whole_node.rst": ("A whole node: the playbooks", "ansible_collections.blackwell.gpu_node.docsite.whole_node",
                             "README.md", "## A whole node: the playbooks", "## "),
    "guide_awx.rst": ("Running from AWX / Automation Platform", "ansible_collections.blackwell.gpu_node.docsite.awx",
                      "README.md", "## Running from AWX / Automation Platform", "## "),
    "guide_upgrade.rst": ("Upgrading a fleet", "ansible_collections.blackwell.gpu_node.docsite.upgrade",
                          "README.md", "## Upgrading a fleet (`upgrade`)", "## "),
    "guide_real_hardware.rst": ("Runs on a real GPU host", "ansible_collections.blackwell.gpu_node.docsite.real_hardware",
                                "tests/device/README.md", "# Runs on a real GPU host", "# "),
}
UNDERLINES = {1: "-", 2: "~", 3: "^"}
LANGUAGES = {"sh": "shell", "": "text"}
UNCLOSED = "\0"  # marks a line whose inline code goes on in the next line


def section(markdown, first_heading, ends_before):
    """The lines from first_heading up to the next heading of its level, fenced code skipped."""
    lines = markdown.split("\n")
    start = lines.index(first_heading)
    fenced = False
    for end in range(start + 1, len(lines)):
        if lines[end].startswith("```"):
            fenced = not fenced
        elif not fenced and lines[end].startswith(ends_before):
            return lines[start + 1:end]
    return lines[start + 1:]


def inline(text):
    """Markdown's inline code and links as reStructuredText; everything else passes through."""
    parts = re.split(r"(`[^`]+`)", text)
    out = []
    for part in parts:
        if part.startswith("`") and part.endswith("`") and len(part) > 1:
            out.append("``%s``" % part[1:-1])
            continue
        # [text](https://...) becomes a link; a link to a file of the repository becomes its text.
        part = re.sub(r"\[([^\]]+)\]\((https?://[^)]+)\)", r"`\1 <\2>`__", part)
        part = re.sub(r"\[([^\]]+)\]\(([^)]+)\)", r"\1", part)
        out.append(part)
    return "".join(out)


def list_table(rows, indent):
    """A Markdown pipe table (header, separator, rows) as a list-table directive."""
    cells = [[inline(cell.strip()) for cell in row.strip().strip("|").split("|")] for row in rows]
    out = [indent + ".. list-table::", indent + "   :header-rows: 1", ""]
    for row in [cells[0]] + cells[2:]:
        out += [indent + "   %s %s" % ("* -" if index == 0 else "  -", cell or "..") for index, cell in enumerate(row)]
    return out + [""]


def to_rst(lines, section_level):
    """The section's lines as reStructuredText; its subheadings become the page's sections."""
    out = []
    fence = None
    table = []
    for line in lines + [""]:
        if fence is None and line.lstrip().startswith("|"):
            table.append(line)
            continue
        if table:
            out += list_table(table, table[0][:len(table[0]) - len(table[0].lstrip())])
            table = []
        if fence is not None:
            if line.startswith("```"):
                fence = None
                out.append("")
            else:
                out.append(("    " + line) if line else "")
            continue
        if line.startswith("```"):
            fence = line[3:].strip()
            out += [".. code-block:: %s" % LANGUAGES.get(fence, fence), ""]
            continue
        heading = re.fullmatch(r"(#+) (.*)", line)
        if heading:
            title = inline(heading.group(2))
            level = len(heading.group(1)) - section_level
            out += [title, UNDERLINES[level] * len(title)]
            continue
        if out and out[-1].count("`") % 2 and out[-1].endswith(UNCLOSED):
            # Inline code that Markdown lets run over a line break: convert both lines as one.
            out[-1] = inline(out[-1][:-len(UNCLOSED)] + "\n" + line)
        elif line.count("`") % 2:
            out.append(line + UNCLOSED)
        else:
            out.append(inline(line))
    return "\n".join(out).split("\n")


def page(title, label, source, first_heading, ends_before):
    markdown = (CHECKOUT / source).read_text()
    body = to_rst(section(markdown, first_heading, ends_before), first_heading.index(" "))
    header = [".. Generated by docs/docsite/guides.py from %s (%s): edit that, then run the script." % (
        source, first_heading.lstrip("# ")), "", ".. _%s:" % label, "", title, "=" * len(title), ""]
    text = "\n".join(header + body).rstrip("\n") + "\n"
    return re.sub(r"\n{3,}", "\n\n", text)


def main(argv):
    stale = []
    for name, spec in GUIDES.items():
        text = page(*spec)
        target = RST / name
        if "--check" in argv:
            if not target.is_file() or target.read_text() != text:
                stale.append(str(target.relative_to(CHECKOUT)))
        else:
            target.write_text(text)
    if stale:
        print("out of date with the Markdown they come from: %s; run python3 docs/docsite/guides.py"
              % ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
