"""A release's site is built beside the current one and switched in one step, as the
tables' `latest/` is: the site folder is a symbolic link to one build, replaced by a
rename, so a reader never sees pages of two builds, and a build stopped halfway is never
seen. A new build starts as hard links to the current one's files (an unchanged page
costs no copy); the build replaces files, never writes into one, so the current build's
files stay as they are."""

import os
import shutil
import time
from pathlib import Path


def builds_dir(link: Path) -> Path:
    return link.with_name(link.name + ".builds")


def current(link: Path) -> Path | None:
    """The build the site link points at, if there is one."""
    return link.resolve() if link.is_symlink() and link.exists() else None


def stage(link: Path) -> Path:
    """A new build folder beside the current build, holding hard links to its files. A
    site folder of before this scheme becomes the first build (moved once, then linked)."""
    builds = builds_dir(link)
    builds.mkdir(parents=True, exist_ok=True)
    if link.is_dir() and not link.is_symlink():
        first = builds / f"{time.time_ns()}"
        link.rename(first)
        link.symlink_to(Path(builds.name) / first.name, target_is_directory=True)
    new = builds / f"{time.time_ns()}"
    now = current(link)
    if now is None:
        new.mkdir()
    else:
        shutil.copytree(now, new, copy_function=os.link)
    return new


def switch(link: Path, new: Path) -> None:
    """Point the site at `new` in one rename, then remove every other build but the one
    it replaced (a reader that resolved the link just before reads that one to the end);
    a build that stopped halfway goes with them."""
    previous = current(link)
    tmp = link.with_name(f".{link.name}.{new.name}.link")
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(Path(new.parent.name) / new.name, target_is_directory=True)
    os.replace(tmp, link)
    for p in builds_dir(link).iterdir():
        if p not in (new, previous):
            shutil.rmtree(p, ignore_errors=True)


def discard(new: Path) -> None:
    """A build that did not finish: removed, the current one untouched."""
    shutil.rmtree(new, ignore_errors=True)
