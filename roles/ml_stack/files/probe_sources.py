# Run by the ml_stack role before it changes anything: does each package source answer, and does each index
# list the pinned version? Argument: a JSON list of {"url", "project", "version"}. An index is asked for the
# project's page (PEP 503: <index>/<project>/), which must name a wheel of that version; a wheel, or an index
# without project, for its own URL. Prints the list back, each with "asked" (the URL requested) and "error"
# (null when all is well). Certificates and proxies as pip takes them from its environment (PIP_CERT, https_proxy, ...).
import json
import os
import re
import ssl
import sys
import urllib.error
import urllib.parse
import urllib.request

TIMEOUT_S = 30


def asked(source):
    if source["project"]:
        return source["url"].rstrip("/") + "/" + source["project"] + "/"
    return source["url"]


def fetch(url, read):
    """The page's text when read is true, else ''; raises OSError (URLError, HTTPError) when it fails."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme == "file":
        path = urllib.request.url2pathname(parts.path)
        if not os.path.exists(path):
            raise OSError("%s does not exist" % path)
        if not read:
            return ""
        with open(os.path.join(path, "index.html") if os.path.isdir(path) else path, encoding="utf-8") as page:
            return page.read()
    context = ssl.create_default_context(cafile=os.environ.get("PIP_CERT") or None)
    request = urllib.request.Request(url, headers={"User-Agent": "blackwell.gpu_node ml_stack source probe"})
    # Without read, only the status matters: the body (a whole wheel, for one) is never read.
    with urllib.request.urlopen(request, timeout=TIMEOUT_S, context=context) as response:
        return response.read().decode("utf-8", "replace") if read else ""


def lists_version(page, project, version):
    """The page links a wheel of project at version (the + of a local version may be percent-encoded)."""
    name = re.sub(r"[-_.]+", "_", project)
    return any(
        re.search(r"[/>\"]%s-%s-[^\"<]*\.whl" % (re.escape(name), re.escape(spelled)), page, re.IGNORECASE)
        for spelled in (version, version.replace("+", "%2B"))
    )


def error_of(source):
    check_version = bool(source.get("project") and source.get("version"))
    try:
        page = fetch(asked(source), check_version)
    except urllib.error.HTTPError as exc:
        return "HTTP %d %s" % (exc.code, exc.reason)
    except (urllib.error.URLError, OSError) as exc:
        return str(getattr(exc, "reason", None) or exc)
    if check_version and not lists_version(page, source["project"], source["version"]):
        return "lists no wheel of %s %s" % (source["project"], source["version"])
    return None


print(json.dumps([dict(source, asked=asked(source), error=error_of(source)) for source in json.loads(sys.argv[1])]))
