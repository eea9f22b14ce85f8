"""The HTML report (``--html PATH``): one self-contained page; every value from user code is
text, never markup (a program whose names and strings are markup: tests/data/hostile_markup.py);
rendered in a real headless Chromium (Debian's ``chromium``, installed by ``make browser``) with
no console message, its timeline built by the page's script."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from conftest import EXAMPLES, cli

from chaossloth import html_report

DATA = Path(__file__).parent / "data"
HOSTILE = DATA / "hostile_markup.py"


class _Tags(HTMLParser):
    """Every element of a page with its attributes, and the text of the embedded data."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.data = ""
        self._in_data = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        self._in_data = dict(attrs).get("id") == "cs-data"

    def handle_endtag(self, tag: str) -> None:
        self._in_data = False

    def handle_data(self, data: str) -> None:
        if self._in_data:
            self.data += data


def _parse(page: str) -> _Tags:
    p = _Tags()
    p.feed(page)
    p.close()
    return p


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """The hostile program checked once: (its directory with report.html, the JSON report)."""
    d = tmp_path_factory.mktemp("hostile")
    shutil.copy(HOSTILE, d / "hostile.py")
    r = cli(
        "check", "hostile.py", "--no-telemetry", "--json", "report.json", "--html",
        "report.html", cwd=d,
    )  # fmt: skip
    assert r.returncode == 1, r.stdout + r.stderr
    return d, json.loads((d / "report.json").read_text(encoding="utf-8"))


def test_embedded_json_cannot_end_the_script() -> None:
    value = {"a": "</script><!-- & -->", "b": float("nan"), "c": [float("inf"), 1.5]}
    text = html_report.embed_json(value)
    assert not set("<>&") & set(text)
    assert json.loads(text) == {"a": "</script><!-- & -->", "b": None, "c": [None, 1.5]}


def test_user_values_are_text_in_the_page(hostile: tuple[Path, dict[str, Any]]) -> None:
    d, report = hostile
    # the markup reached the report: the failure, the task names, the source lines
    assert "<script>document.title='pwned-msg'</script>" in report["failure"]["message"]
    tasks = {s["task"] for s in report["timeline"]}
    assert any("</script>" in t for t in tasks)
    assert any(
        '"<b id=pwned-line>"' in a["text"] for s in report["timeline"] for a in s["accesses"]
    )
    page = (d / "report.html").read_text(encoding="utf-8")
    parsed = _parse(page)
    # only the page's own elements: no id from the program, two scripts (the data, the code)
    assert not [a for _, a in parsed.tags if (a.get("id") or "").startswith("pwned")]
    assert [t for t, _ in parsed.tags if t == "img"] == []
    assert [a.get("type") for t, a in parsed.tags if t == "script"] == ["application/json", None]
    assert "&lt;script&gt;document.title=&#x27;pwned-msg&#x27;&lt;/script&gt;" in page
    # the data the script draws is the report's timeline, whole
    data = json.loads(parsed.data)
    assert [s["task"] for s in data["timeline"]] == [s["task"] for s in report["timeline"]]
    assert (
        data["timeline"][1]["accesses"][0]["text"] == report["timeline"][1]["accesses"][0]["text"]
    )


def test_the_page_loads_nothing(hostile: tuple[Path, dict[str, Any]]) -> None:
    page = (hostile[0] / "report.html").read_text(encoding="utf-8")
    parsed = _parse(page)
    assert not [(t, a) for t, a in parsed.tags if {"src", "href"} & set(a)]
    assert [t for t, _ in parsed.tags if t in ("link", "iframe", "object", "embed")] == []
    [csp] = [
        a["content"] for t, a in parsed.tags if a.get("http-equiv") == "Content-Security-Policy"
    ]
    assert csp is not None and csp.startswith("default-src 'none';")


def test_fix_writes_the_page_with_the_patch(tmp_path: Path) -> None:
    shutil.copy(EXAMPLES / "bank_transfer.py", tmp_path / "bank_transfer.py")
    r = cli(
        "fix", "bank_transfer.py", "--no-telemetry", "--html", "fix.html", "--sarif", "fix.sarif",
        cwd=tmp_path,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    page = (tmp_path / "fix.html").read_text(encoding="utf-8")
    assert re.search(
        r"<section id=diff><h2>Patch: verified on \d+ schedules \(complete\)</h2>", page
    )
    assert '<span class="add">+        async with self._lock_balances:</span>' in page
    assert json.loads((tmp_path / "fix.sarif").read_text(encoding="utf-8"))["runs"][0]["results"]


# ------------------------------------------------------------------ in a real browser

_CONSOLE = re.compile(r":CONSOLE[:(]")


def _chromium() -> str:
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    pytest.skip(
        "no Chromium on PATH: `make browser` installs Debian's chromium (it needs root and "
        "apt-get; make test runs it)"
    )


def _browse(page: Path, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Headless Chromium on a file (no sandbox: CI runs as root), console messages on stderr."""
    return subprocess.run(
        [
            _chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
            f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0", *args,
            page.resolve().as_uri(),
        ],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def _console(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if _CONSOLE.search(line)]


@pytest.mark.slow
def test_the_console_check_sees_a_script_error(tmp_path: Path) -> None:
    page = tmp_path / "broken.html"
    page.write_text("<!DOCTYPE html><script>notDefined();</script>", encoding="utf-8")
    r = _browse(page, tmp_path / "profile", "--dump-dom")
    assert any("notDefined" in line for line in _console(r.stderr)), r.stderr


@pytest.mark.slow
def test_chromium_renders_the_page_escaped_and_without_errors(
    hostile: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    d, report = hostile
    r = _browse(d / "report.html", tmp_path / "profile", "--dump-dom")
    assert r.returncode == 0, r.stderr
    assert _console(r.stderr) == []
    dom = r.stdout
    # the script ran to its end and drew one lane per task, the diagnosis' accesses highlighted
    assert 'data-timeline="rendered"' in dom
    # (a callback's step with no shared access and no await is not drawn)
    drawn = [s for s in report["timeline"] if s["is_task"] or s["accesses"] or s["await"]]
    assert len(drawn) < len(report["timeline"])
    lanes = len({s["task"] for s in drawn})
    assert f'data-lanes="{lanes}"' in dom
    marked = sum(a["highlight"] for s in report["timeline"] for a in s["accesses"])
    assert marked > 0
    assert len(re.findall(r'class="acc (?:read|write) hl"', dom)) == marked
    # nothing from the program became an element, nothing it carried ran
    tags = _parse(dom).tags
    assert "pwned-" in dom
    assert not [a for _, a in tags if (a.get("id") or "").startswith("pwned")]
    assert [t for t, _ in tags if t == "img"] == []
    assert [t for t, _ in tags if t == "script"] == ["script", "script"]
    assert re.search(r"<title>ChaosSloth report: hostile\.py</title>", dom)
    assert "&lt;script&gt;document.title='pwned-msg'&lt;/script&gt;" in dom


@pytest.mark.slow
def test_chromium_takes_a_screenshot(tmp_path: Path) -> None:
    shutil.copy(EXAMPLES / "bank_transfer.py", tmp_path / "bank_transfer.py")
    r = cli("check", "bank_transfer.py", "--html", "report.html", cwd=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    shot = tmp_path / "report.png"
    b = _browse(tmp_path / "report.html", tmp_path / "profile", "--window-size=1280,2000",
                f"--screenshot={shot}")  # fmt: skip
    assert b.returncode == 0 and _console(b.stderr) == [], b.stderr
    png = shot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20_000
