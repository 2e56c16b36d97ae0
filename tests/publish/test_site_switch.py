"""The site is as atomic as the tables (issue 33: a kill during the site build could leave
pages of two releases, search-data.js was written in place): a build is made beside the
current one and switched to in one rename; until then readers see the previous build
whole, and a build that stops is never seen."""

import os

from assets.publish import build, switch


def _first_build(link) -> None:
    new = switch.stage(link)
    build._write(new / "index.html", "release 1")
    build._write(new / "pair/a.html", "release 1")
    build._sync_static(new, "var data = 1;")
    switch.switch(link, new)


def test_a_new_build_never_changes_the_current_one(tmp_path):
    link = tmp_path / "site"
    _first_build(link)
    before = switch.current(link)
    new = switch.stage(link)
    # unchanged files are shared (hard links), changed ones replaced
    assert os.path.samefile(new / "pair/a.html", before / "pair/a.html")
    build._write(new / "index.html", "release 2")
    build._sync_static(new, "var data = 2;")
    (new / "pair/a.html").unlink()  # a page of a pair no longer in the tables
    # before the switch a reader sees release 1 whole, search data included
    assert (link / "index.html").read_text() == "release 1"
    assert (link / "pair/a.html").exists()
    assert (link / "static/search-data.js").read_text() == "var data = 1;"
    switch.switch(link, new)
    assert (link / "index.html").read_text() == "release 2"
    assert not (link / "pair/a.html").exists()
    assert (link / "static/search-data.js").read_text() == "var data = 2;"
    # a reader that resolved the previous build keeps reading it whole
    assert (before / "index.html").read_text() == "release 1"
    assert (before / "static/search-data.js").read_text() == "var data = 1;"


def test_a_build_that_stops_is_never_seen_and_is_cleared(tmp_path):
    link = tmp_path / "site"
    _first_build(link)
    first = switch.current(link)
    killed = switch.stage(link)  # a process killed here: never switched to
    build._write(killed / "index.html", "half of release 2")
    assert switch.current(link) == first
    assert (link / "index.html").read_text() == "release 1"
    done = switch.stage(link)
    build._write(done / "index.html", "release 3")
    switch.switch(link, done)
    # the current build and the one before it stay; the stopped one is gone
    assert {p.name for p in switch.builds_dir(link).iterdir()} == {first.name, done.name}


def test_a_site_folder_of_before_becomes_the_first_build(tmp_path):
    link = tmp_path / "site"
    link.mkdir()
    (link / "index.html").write_text("old")
    new = switch.stage(link)
    assert link.is_symlink() and (link / "index.html").read_text() == "old"
    assert (new / "index.html").read_text() == "old"
