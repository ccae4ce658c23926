"""What a pip user reads before installing: the package metadata on PyPI, the
README rendered there, and its links into the documentation site.

The site's own links are checked by `make docs` (mkdocs --strict); these are
the links mkdocs never sees: README.md's and the examples' READMEs'.
"""

import re
from pathlib import Path

import pytest
import tomllib

ROOT = Path(__file__).resolve().parents[2]
REPOSITORY = "https://github.com/rewardbox/rewardbox"
SITE = "https://rewardbox.github.io/rewardbox/"
LINK = re.compile(r"\]\(([^)\s]+)\)")
READMES = [ROOT / "README.md", *sorted((ROOT / "examples").glob("*/README.md")), ROOT / "bench" / "README.md"]


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def site_page(url: str) -> tuple[str, str] | None:
    """The docs/ file and the anchor a link into the site names, or None for
    another address.

    >>> site_page("https://rewardbox.github.io/rewardbox/images/#tags")
    ('images.md', 'tags')
    >>> site_page("https://rewardbox.github.io/rewardbox/")
    ('index.md', '')
    >>> site_page("https://github.com/rewardbox/rewardbox") is None
    True
    """
    if not url.startswith(SITE):
        return None
    path, _, anchor = url[len(SITE):].partition("#")
    return (f"{path.strip('/')}.md" if path.strip("/") else "index.md"), anchor


def anchors(markdown: str) -> set[str]:
    """The ids mkdocs gives the headings of a page (toc's default slugs).

    >>> sorted(anchors("# Sandbox images\\n## What the data imports\\n```\\n# not a heading\\n```\\n"))
    ['sandbox-images', 'what-the-data-imports']
    """
    found, fenced = set(), False
    for line in markdown.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (match := re.match(r"#{1,6} (.+)", line)):
            text = re.sub(r"[`*]", "", match.group(1)).strip().lower()
            found.add(re.sub(r"[\s]+", "-", re.sub(r"[^\w\s-]", "", text)))
    return found


def test_the_metadata_names_the_repository_the_site_and_the_issues():
    urls = _project()["urls"]
    assert urls["Homepage"] == urls["Source"] == REPOSITORY
    assert urls["Documentation"] == SITE
    assert urls["Issues"] == f"{REPOSITORY}/issues"


def test_the_license_file_is_the_apache_license_the_metadata_names():
    project = _project()
    assert project["license"] == "Apache-2.0"
    for name in project["license-files"]:
        text = (ROOT / name).read_text()
        assert "Apache License" in text and "Version 2.0, January 2004" in text


def test_typed_is_claimed_where_the_marker_ships():
    assert "Typing :: Typed" in _project()["classifiers"]
    assert (ROOT / "rewardbox" / "py.typed").is_file()


def test_the_readme_links_only_to_absolute_addresses():
    # PyPI renders README.md away from the repository: a relative link is broken there.
    relative = [url for url in LINK.findall((ROOT / "README.md").read_text()) if not re.match(r"https?://", url)]
    assert relative == []


@pytest.mark.parametrize("readme", READMES, ids=lambda path: str(path.relative_to(ROOT)))
def test_links_into_the_site_name_its_pages_and_headings(readme):
    broken = []
    for url in LINK.findall(readme.read_text()):
        target = site_page(url)
        if target is None:
            continue
        page, anchor = target
        source = ROOT / "docs" / page
        if not source.is_file() or (anchor and anchor not in anchors(source.read_text())):
            broken.append(url)
    assert broken == []


def test_every_site_page_the_readme_names_is_in_the_navigation():
    nav = (ROOT / "mkdocs.yml").read_text()
    pages = {site_page(url)[0] for url in LINK.findall((ROOT / "README.md").read_text()) if site_page(url)}
    assert pages and all(re.search(rf":\s*{re.escape(page)}\s*$", nav, re.MULTILINE) for page in pages)
