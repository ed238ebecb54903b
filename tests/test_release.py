"""What a release ships: the version written once, the licence the metadata names, a changelog."""

from __future__ import annotations

import re
import tomllib
from importlib.metadata import metadata
from pathlib import Path

from click.testing import CliRunner

from toolshell.frontends.cli import main
from toolshell.version import __version__

ROOT = Path(__file__).resolve().parents[1]


def test_the_version_is_written_once_and_every_reader_agrees() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in project["project"] and project["project"]["dynamic"] == ["version"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "toolshell.version.__version__"}
    assert metadata("toolshell")["Version"] == __version__
    assert CliRunner().invoke(main, ["--version"]).output == f"toolshell, version {__version__}\n"


def test_the_licence_file_is_the_apache_2_0_text_the_metadata_names() -> None:
    text = (ROOT / "LICENSE").read_text()
    assert tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["license"] == "Apache-2.0"
    assert "Apache License\n                           Version 2.0, January 2004" in text
    assert "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION" in text
    assert "END OF TERMS AND CONDITIONS" in text
    assert len(text.splitlines()) == 202  # the whole text, appendix included


def test_the_changelog_has_an_unreleased_section_and_this_version() -> None:
    text = (ROOT / "CHANGELOG.md").read_text()
    releases = re.findall(r"^## \[([^\]]+)\](?: - (\d{4}-\d{2}-\d{2}))?$", text, re.MULTILINE)
    assert releases[0] == ("Unreleased", "")
    assert (__version__, releases[1][1]) in releases[1:] and releases[1][1]
    for section in re.findall(r"^### (.+)$", text, re.MULTILINE):
        assert section in {"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}
