"""mkdocs hook: links from a page to repository files outside docs/ go to GitHub.

The pages read well on GitHub and in a checkout, where `../examples/...` is a file next door;
on the site that file does not exist, so the link points at the repository instead.
"""

from __future__ import annotations

import posixpath
import re
from typing import Any

LINK = re.compile(r"\]\((?!https?:|mailto:|#)([^)\s]+)\)")


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    repo = config["repo_url"].rstrip("/")
    page_dir = posixpath.dirname(page.file.src_uri)

    def rewrite(match: re.Match[str]) -> str:
        target, _, anchor = match.group(1).partition("#")
        path = posixpath.normpath(posixpath.join("docs", page_dir, target))
        if path.startswith("docs/"):
            return match.group(0)  # a page or asset of the site: mkdocs checks it
        return f"]({repo}/blob/main/{path}{'#' + anchor if anchor else ''})"

    return LINK.sub(rewrite, markdown)
