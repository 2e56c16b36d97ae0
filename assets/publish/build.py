"""Render the site incrementally into a folder, with a manifest of what each page was
built from.

Each part of a page is hashed over the rows it shows (and the code that renders it); a
page whose part hashes equal the manifest's is not touched, and a changed page renders
only its changed parts, reusing the others from its own file (each part sits between
`<!--part:name-->` markers). The site has a version of its own, raised by every build
that changed a file, and `versions.jsonl` keeps every version's table versions.
"""

import contextlib
import datetime as dt
import hashlib
import json
import multiprocessing
import os
import time
import types
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import jinja2
import jinja2.runtime
import polars as pl

from assets.publish import charts, pages, words, workbench
from assets.publish import data as tables
from assets.publish.data import SiteData
from assets.publish.search_index import search_data

HERE = Path(__file__).parent
TEMPLATES, STATIC = HERE / "templates", HERE / "static"
MANIFEST, VERSIONS = "manifest.json", "versions.jsonl"
# The build's head: what it was made of and its pages, without the parts' hashes (the
# manifest's 50 MB took 1.5 s to parse, the most of a refresh that finds nothing to do).
HEAD = "build.json"
# Renderings kept for parts of equal hash: those repeat on consecutive pages (a model's
# pair pages), so a few suffice where keeping all held every page's HTML at once.
SHARED = 64


@dataclass
class BuildStats:
    pages: int
    written: int
    unchanged: int
    removed: int
    parts_rendered: int
    parts_reused: int
    seconds: float
    bytes_on_disk: int
    site_version: int


_DICT_NAMES = frozenset(dir(dict))
_PLAIN = (types.FunctionType, types.BuiltinFunctionType, types.MethodType)


class _Context(jinja2.runtime.Context):
    """Jinja's context, calling a plain function (one that takes no context, environment
    or eval context: it has no `jinja_pass_arg`) the short way, as Context.call ends up
    calling it (a site's pages make two million such calls)."""

    def call(__self, __obj, *args, **kwargs):  # noqa: N805 (Jinja's own signature)
        if type(__obj) in _PLAIN and not hasattr(__obj, "jinja_pass_arg"):
            kwargs.pop("_block_vars", None)
            kwargs.pop("_loop_vars", None)
            try:
                return __obj(*args, **kwargs)
            except StopIteration:
                return __self.environment.undefined(
                    "value was undefined because a callable raised a StopIteration exception"
                )
        return super().call(__obj, *args, **kwargs)


class _Environment(jinja2.Environment):
    """Jinja's environment, finding a row's field (`r.total_gib` on a dict) the short way:
    a key of a plain dict that is no name of dict's is what Environment.getattr finds
    after the attribute lookup fails (six million failed lookups a site)."""

    context_class = _Context

    def getattr(self, obj, attribute):
        if type(obj) is dict and attribute not in _DICT_NAMES and attribute in obj:
            return obj[attribute]
        return super().getattr(obj, attribute)


def environment() -> jinja2.Environment:
    env = _Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=jinja2.StrictUndefined,
        # One build reads each template once: without this, every get_template of a
        # site's 80,000 parts checks the file's time again.
        auto_reload=False,
    )
    env.globals.update(
        words=words,
        charts=charts,
        pair_path=pages.pair_path,
        model_path=pages.model_path,
        gpu_path=pages.gpu_path,
        model_name=pages.model_name,
        workbench_path=workbench.data_path,
    )
    # As filters, not globals: Jinja calls a filter directly, a global through the
    # context (a page's tables make some 400 such calls: 16 % of rendering a pair page).
    env.filters.update(
        gib=words.gib,
        num=words.num,
        tokens=words.tokens,
        gb=words.gb_from_bytes,
        verdict=words.verdict_html,
        source_text=words.source_text,
        source_link=words.source_link,
    )
    return env


def code_digest() -> str:
    """A hash of the templates and the modules that turn rows into pages (and of the
    Polars version, whose row hashes the part hashes rest on): changing any of them
    renders every part again."""
    h = hashlib.sha256(pl.__version__.encode())
    for f in sorted([*TEMPLATES.glob("*.j2"), *HERE.glob("*.py")]):
        h.update(f.name.encode() + f.read_bytes())
    return h.hexdigest()


def _hash(*parts: object) -> str:
    # Keys keep the order the code builds them in (rows: the tables' column order).
    text = json.dumps(parts, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def part_hashes(data: SiteData, page: pages.Page, code: str) -> dict[str, str]:
    """Per part, a hash of the row groups it shows (and of the rendering code)."""
    return {
        name: _hash(code, name, [(g, repr(k), data.hashes[g].get(k)) for g, k in inputs])
        for name, inputs in page.inputs.items()
    }


def current(out: Path, versions: dict[str, dict]) -> BuildStats | None:
    """The last build's figures when it was made from these very table versions by this
    code (a version means a change: then no row can differ); None otherwise."""
    old = made_of(out, versions)
    if old is None:
        return None
    n = len(old["pages"])
    return BuildStats(n, 0, n, 0, 0, 0, 0.0, _size(out), old["site_version"])


def build_tables(
    base: str | None,
    out: Path,
    storage_options: Mapping[str, str] | None = None,
    models: list[str] | None = None,
) -> BuildStats:
    """Read the tables (data.load) and bring `out` up to date with them, the workbench data
    packed by a process of its own from the start: it reads its own tables, so it waits
    for none of the rows the pages show."""
    started = time.monotonic()
    out.mkdir(parents=True, exist_ok=True)
    versions = tables.table_versions(base, storage_options)
    scan = tables.Scanner(versions, base, storage_options, models)
    with _packing(scan, versions, out) as packing:
        site = tables.load(base, storage_options, models, cache_dir=out, versions=versions)
        return _build(site, out, started, packing)


def build(data: SiteData, out: Path) -> BuildStats:
    """Bring `out` up to date with the tables in `data`, the workbench data packed by a
    process of its own meanwhile."""
    started = time.monotonic()
    out.mkdir(parents=True, exist_ok=True)
    with _packing(data.scan, data.versions, out) as packing:
        return _build(data, out, started, packing)


@contextlib.contextmanager
def _packing(
    scan: tables.Scanner | None, versions: dict[str, dict], out: Path
) -> Iterator[Future | None]:
    """The workbench data packed (workbench.sync) by a process of its own while the pages
    render (none without a scan): on a thread beside the rendering, the packing and the
    rendering took turns at the GIL (a full site: 65 s of packing stretched the
    rendering's 136 s of work to 202 s). Spawned, not forked: Polars' threads do not
    survive a fork."""
    if scan is None:
        yield None
        return
    with ProcessPoolExecutor(
        max_workers=1, mp_context=multiprocessing.get_context("spawn"), initializer=_yield_cpu
    ) as pool:
        with _allocator():
            packing = pool.submit(workbench.sync, scan, versions, out)
        yield packing


def _yield_cpu() -> None:
    """A worker's priority below the rendering's: the rendering is one thread, the
    workers' Polars and zlib threads take whatever core it leaves (the rendering had
    finished last)."""
    if hasattr(os, "nice"):
        os.nice(10)


# Polars' allocator (jemalloc) in the worker processes keeps freed pages for 20 s before
# giving them back, where Polars sets 0.5 s (its __init__, for memory's sake: polars
# issue 18088): the packing frees and takes again about a gigabyte per group of models,
# and faulting those pages in again cost a full site 10-18 s of system time (page faults
# 7.9 M -> 2.4 M; the packing's peak resident memory 1.9 -> 2.7 GB). Polars appends the
# variable's value to its own when a process imports it, and the last setting counts.
ALLOCATOR = ("_RJEM_MALLOC_CONF", "dirty_decay_ms:20000,muzzy_decay_ms:20000")


@contextlib.contextmanager
def _allocator() -> Iterator[None]:
    """ALLOCATOR in the environment of the processes a pool starts meanwhile (a
    ProcessPoolExecutor with spawn starts one at each submit while it has fewer)."""
    name, value = ALLOCATOR
    before = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if before is None:
            del os.environ[name]
        else:
            os.environ[name] = before


def _build(data: SiteData, out: Path, started: float, packing: Future | None) -> BuildStats:
    env, code = environment(), code_digest()
    old = _read_manifest(out)
    entries, written, unchanged, rendered, reused = {}, 0, 0, 0, 0
    shared: OrderedDict[tuple[str, str, str], str] = OrderedDict()
    # A part's stamp names its tables' versions: one rendering per set of tables.
    stamp_html: dict[tuple[str, ...], str] = {}
    stamp = env.get_template("macros.html.j2").module.stamp  # type: ignore[attr-defined]
    for page in pages.all_pages(data):
        if page.kind != "pair" and isinstance(data.runs, tables.Pending):
            data.runs.start()  # the GPU pages' filter rows, while the model pages render
        hashes = part_hashes(data, page, code)
        shell = _hash(code, page.title, page.kind)
        prev = old.get("pages", {}).get(page.path)
        target = out / page.path
        if prev and prev["shell"] == shell and prev["parts"] == hashes and target.exists():
            entries[page.path] = prev
            unchanged += 1
            continue
        existing = _parts_of(target.read_text()) if prev and target.exists() else {}
        html, stamps = [], {}
        root = "../" * page.path.count("/")
        for p in page.make():
            if prev and prev["parts"].get(p.name) == hashes[p.name] and p.name in existing:
                html.append((p.name, existing[p.name]))
                stamps[p.name] = prev["stamps"][p.name]
                reused += 1
                continue
            stamps[p.name] = {t: data.versions[t] for t in p.tables}
            if p.tables not in stamp_html:
                stamp_html[p.tables] = stamp(stamps[p.name])
            # A part shows its input rows only, so parts of equal hash at the same depth
            # (a model's alternatives on each of its pair pages) are one rendering.
            key = (p.template, hashes[p.name], root)
            if key in shared:
                shared.move_to_end(key)
            else:
                shared[key] = env.get_template(p.template).render(
                    **p.context(), stamp=stamp_html[p.tables], root=root, page=page
                )
                if len(shared) > SHARED:  # the least recently used goes
                    shared.popitem(last=False)
            html.append((p.name, shared[key]))
            rendered += 1
        _write(target, env.get_template("page.html.j2").render(page=page, parts=html, root=root))
        written += 1
        entries[page.path] = {"kind": page.kind, "shell": shell, "parts": hashes, "stamps": stamps}
    removed = _remove_stale(out, old.get("pages", {}), entries)
    static_written = _sync_static(out, search_data(data))
    if packing is not None:
        static_written += packing.result()
    changed = bool(written or removed or static_written)
    version = old.get("site_version", -1) + (1 if changed or not old else 0)
    # New table versions of the same rows (a code change that republished them) change no
    # file: the build is still recorded as made of them (made_of), or every later refresh
    # would find the site behind its release and run every step again.
    if changed or not old or old.get("tables") != data.versions:
        manifest = {
            "site_version": version,
            "tables": data.versions,
            "pages": entries,
            "code": code,
            "built_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        }
        _write(out / MANIFEST, json.dumps(manifest, sort_keys=True))
        head = {k: manifest[k] for k in ("site_version", "tables", "code", "built_at")}
        _write(out / HEAD, json.dumps(head | {"pages": sorted(entries)}, sort_keys=True))
        if changed or not old:
            line = json.dumps({k: manifest[k] for k in ("site_version", "built_at", "tables")})
            earlier = (out / VERSIONS).read_text() if (out / VERSIONS).exists() else ""
            _write(out / VERSIONS, earlier + line + "\n")  # replaced, not appended to
    return BuildStats(
        len(entries),
        written,
        unchanged,
        removed,
        rendered,
        reused,
        round(time.monotonic() - started, 2),
        _size(out),
        version,
    )


def _parts_of(html: str) -> dict[str, str]:
    """A page's parts by name, from their `<!--part:name-->` markers (str.find: a regular
    expression with a back-reference took a third of a price-only rebuild)."""
    parts, pos = {}, 0
    while (start := html.find("<!--part:", pos)) >= 0:
        head_end = html.index("-->", start)
        name = html[start + len("<!--part:") : head_end]
        close = f"<!--/part:{name}-->"
        end = html.index(close, head_end)
        parts[name] = html[head_end + 3 : end]
        pos = end + len(close)
    return parts


def _size(out: Path) -> int:
    return sum(f.stat().st_size for f in out.rglob("*") if f.is_file())


def made_of(out: Path, versions: dict[str, dict]) -> dict | None:
    """The build's head (HEAD) when it was made from these very table versions by this
    code and every page of it is in place; None otherwise."""
    built = head(out)
    if (
        built.get("tables") != versions
        or built.get("code") != code_digest()
        or not set(built["pages"]) <= _files(out)
    ):
        return None
    return built


def head(out: Path) -> dict:
    """The build's HEAD ({} before the first build)."""
    try:
        return json.loads((out / HEAD).read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return {}


def _files(out: Path) -> set[str]:
    """Every file under `out`, as a path relative to it (one directory listing a folder:
    a stat a page took 0.4 s for the full site; the relative path computed a folder, not
    a file: per file it took 0.25 s of an unchanged refresh's 2.6 s)."""
    found: set[str] = set()
    for folder, _, names in os.walk(out):
        relative = os.path.relpath(folder, out)
        prefix = "" if relative == os.curdir else relative + os.sep
        found.update(prefix + name for name in names)
    return found


def _read_manifest(out: Path) -> dict:
    try:
        return json.loads((out / MANIFEST).read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return {}


def _write(path: Path, content: str | bytes) -> None:
    """Written aside and renamed: a reader never sees half a page, and a file the build
    shares with the current build (assets.publish.switch) is replaced, not changed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(content.encode() if isinstance(content, str) else content)
    os.replace(tmp, path)


def _remove_stale(out: Path, old: dict, new: dict) -> int:
    """Pages of pairs, models or GPUs no longer in the tables."""
    stale = [p for p in old if p not in new]
    for p in stale:
        (out / p).unlink(missing_ok=True)
    return len(stale)


def _sync_static(out: Path, search_js: str) -> int:
    """The stylesheet, the search script (with their licence) and the generated search
    data; a file is written only when its bytes change."""
    files = {f"static/{f.name}": f.read_bytes() for f in STATIC.iterdir() if f.is_file()}
    files["static/search-data.js"] = search_js.encode()
    n = 0
    for rel, content in files.items():
        target = out / rel
        if not target.exists() or target.read_bytes() != content:
            _write(target, content)
            n += 1
    return n
