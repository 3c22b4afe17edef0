"""A run's life: the folders it owns, the engine it runs on, its stages, and its result published
whole.

:func:`run` makes the run's storage objects once (:class:`~neardup.io.storage.Folder`: the
output, the staging folder inside it, the work dir) and carries them through: the stages read
and write the work dir and the staging folder through them, the report is written into the
staging folder, and the result is moved into the output with stats.json, the file that says a
result is complete, written once and last.

Everything is written into folders neardup owns (:mod:`neardup.io.storage.folder`): the output
and the work dir are claimed (a foreign folder, or one that is or holds or lies inside an input,
is refused untouched) and locked for the run.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from functools import partial
from typing import List, Optional, Sequence

from . import io as nio
from .config import Config
from .engines import open_engine
from .errors import ConfigError, InputError, NeardupError
from .io.storage.folder import Folder, json_bytes, refuse_overlaps
from .io.storage.paths import empty_segment, redact
from .progress import commit_point

STAGING = ".neardup-staging"  # where a run writes its result before it is moved into the output
WORK = ".neardup-work"        # the default work dir, inside the output
OUTPUT_FORMAT = 1             # the output folder's marker format
STATS = "stats.json"          # the file that says a result is complete: written once, last


def claim_output(out: Folder, run: str, overwrite: bool, resume: bool) -> None:
    """Makes ``out`` a neardup output folder, or checks that it is one, for the run ``run`` (its
    fingerprint). Results of an earlier run are replaced only with ``overwrite``, or with
    ``resume`` when they are this very run's (a resumed run that had published them already)."""
    from .stages.write import OUTPUT_FILES
    marker = out.claim("output", "output folder", OUTPUT_FORMAT)
    results = [n for n in out.names() if n in OUTPUT_FILES]
    if results and not overwrite and not (resume and marker.get("run") == run):
        other = " of other inputs or options" if resume else ""
        raise ConfigError(f"output folder {out} holds the results of an earlier run{other}; pass --overwrite "
                          f"(overwrite=True) to replace them, or choose another folder")
    _refuse_foreign_kept(out)
    _refuse_foreign_kept(out, "marked", "marked_files")
    if marker.get("run") != run:
        out.set_marker({**marker, "run": run})


def _refuse_foreign_kept(out: Folder, folder: str = "kept", listed: str = "kept_files") -> None:
    """A run replaces ``OUTPUT/kept/`` whole; it may only when every file there is neardup's: one
    of the previous result's (its stats.json's ``kept_files``), or, with no stats.json and the
    staging folder still there, of a publish cut short (its kept/ is the old or the new result).
    Any other file (a user's notes put beside the kept shards) is refused in one line, before work.
    The same for ``OUTPUT/marked/`` (``--mark``) and stats.json's ``marked_files``."""
    present = out.files_under(folder)
    if not present:
        return
    from .stages.write import full_list
    stats = out.read_json(STATS)
    listing = full_list(out, stats, listed) if isinstance(stats, dict) else None
    if listing is not None:
        ours = set(listing)
    elif out.exists(STAGING):
        return
    else:
        ours = set()
    foreign = [p for p in present if p not in ours]
    if foreign:
        shown = ", ".join(f"{folder}/{p}" for p in foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
        raise ConfigError(f"output folder {out}: {shown} {'was' if len(foreign) == 1 else 'were'} not written by "
                          f"neardup, and a run replaces {folder}/ whole; move {'it' if len(foreign) == 1 else 'them'} "
                          f"out, or choose another folder")


def run(config: Config, sources: List[nio.Source], output, *, work_dir: Optional[str] = None,
        resume: bool = False, quiet: bool = True, keep_work: Optional[bool] = None, overwrite: bool = False,
        report: bool = True, inputs: Sequence[str] = ()) -> dict:
    """Runs a resolved config over discovered sources with the configured engine, then writes
    report.html and publishes the result into ``output``; returns the stats (as written to
    stats.json)."""
    from .stages import Run, run_stages
    from .stages.background import Background
    from .stages.identity import fingerprint, run_identity
    from .stages.workdir import WorkDir

    if config.against:  # every check of the inputs and options that can fail, before a folder is claimed
        from .stages.against import check_indexes
        check_indexes(config)
    if config.output_format != "same" or config.mark:  # a.jsonl and a.csv both kept/a.parquet, a text
        # file a.py marked as marked/a.py.jsonl beside an input of that name: one would be lost
        nio.output_relpaths([s for s in sources if s.format != "table"], config.output_format, mark=config.mark)
    out = Folder.of(output)
    explicit_work = work_dir is not None
    work_folder = Folder.of(work_dir if explicit_work else default_work_dir(out, config.engine))
    _check_folders(config, out, work_folder, inputs, [s.path for s in sources if s.format != "table"],
                   getattr(sources, "unlinked", None))
    inside = out.contains(work_folder)  # the default: covered by the output's lock, removed whole
    if keep_work is None:
        keep_work = explicit_work
    identity = run_identity(config, sources)
    with out.lock(), (contextlib.nullcontext() if inside else work_folder.lock()):
        run_fingerprint = fingerprint(identity)  # once: the output's and the work dir's
        claim_output(out, run_fingerprint, overwrite, resume)
        # the work dir goes after the run: its fingerprints (most of its bytes) from the write
        # stage on, in a thread that is joined before the run returns (WorkDir.join_removal)
        work = WorkDir(work_folder, identity, resume=resume, overwrite=overwrite,
                       disposable=not keep_work and not config.update_index, run_fingerprint=run_fingerprint)
        staging = out.child(STAGING)
        staging.remove_all()
        staging.makedirs()
        ctx = Run(config=config, sources=sources, work=work, output=staging, quiet=quiet)
        if report:  # the report's reading of the member files, beside the write stage's copy of kept lines
            ctx.after_members = partial(_report_ahead, ctx, staging)
        failure: List[NeardupError] = []
        publishing = False
        try:
            with open_engine(config, [work.folder.path, out.path] + [s.path for s in sources
                                                                      if s.format != "table"], quiet) as engine:
                stats = run_stages(ctx, engine)
            if report:
                from .report.html import write_report
                # inline SVG: no matplotlib start-up in a run; kept/ as the write stage counted it
                write_report(staging, plots="svg", stats=stats, kept=ctx.kept_tally, ahead=ctx.report_ahead)
            ctx.after_members = ctx.report_ahead = None  # the read-ahead's one use is over
            # the commit point: a signal that came before stops the run here, the old result whole;
            # from here on none stops it (the result and the index update are published whole)
            commit_point()
            publishing = True
            out.publish(staging, _output_files(), STATS, lambda: _complete(ctx, out, stats, failure))
        except BaseException as exc:
            work.join_removal()
            ctx.after_members = ctx.report_ahead = None  # what was read ahead for a page not drawn
            if not publishing:  # once a publish began, staging stays: it marks kept/ as neardup's
                with contextlib.suppress(Exception):
                    staging.remove_all()  # the old result (if any) stays whole; nothing half-written is left
            if isinstance(exc, InputError) and not keep_work:
                # the input's own verdict (no documents, a bad record): the same command would
                # stop the same way, and work left behind would refuse the next run (fixed, or
                # with other options); an interruption or a store's failure keeps it (--resume)
                with contextlib.suppress(Exception):
                    work.remove(whole=inside or not explicit_work)
            raise
        # the staging folder, the old result in it (its files' unlinking: the file system's
        # time), in a thread beside the work dir's removal
        old_result = Background(staging.remove_all, "neardup-staging-removal")
        work.join_removal()
        if not failure and not keep_work:
            work.remove(whole=inside or not explicit_work)
        old_result.join()
        if failure:
            raise failure[0]
    return stats


def _report_ahead(ctx, staging: Folder) -> None:
    """:func:`neardup.report.html.read_ahead` of the staging folder, kept on the run
    (``ctx.report_ahead``) for its page; the module imported there too (in the write stage's
    thread, which the write stage joins before it returns); raises nothing (the page reads
    again what fails here)."""
    try:
        from .report.html import read_ahead
        ctx.report_ahead = read_ahead(staging)
    except Exception:  # noqa: BLE001
        pass


def _output_files():
    from .stages.write import OUTPUT_FILES
    return OUTPUT_FILES


def _check_folders(config: Config, out: Folder, work: Folder, inputs: Sequence[str], files: Sequence[str],
                   unlinked: Optional[Sequence[str]] = None) -> None:
    """Refuses, before anything is written, folders a run cannot use: a URL work dir on the local
    engine, an output or work dir that is, holds or lies inside an input, a work dir that is or
    holds the output, a store that cannot be reached, a folder neardup does not own. ``unlinked``:
    discover's paths that are no symbolic links (``Sources.unlinked``; see refuse_overlaps)."""
    if work.os_path is None and config.engine != "ray":
        raise ConfigError(f"--work-dir {work}: the local engine keeps its work dir on local disk; "
                          f"give a local folder (or run with --engine ray, which accepts a URL)")
    for folder, role in ((out, "output folder"), (work, "--work-dir")):
        if empty_segment(folder.path):
            raise ConfigError(f"{role} {folder}: a URL with an empty path segment ('//'); write it without")
    refuse_overlaps([("output folder", out), ("--work-dir", work)], inputs, files, unlinked)
    if work.path == out.path or work.contains(out):
        raise ConfigError(f"--work-dir {work}: is or holds the output folder {out}; choose another")
    for folder, kind, role in ((out, "output", "output folder"), (work, "work-dir", "--work-dir")):
        folder.check_reachable()
        folder.check_claim(kind, role)  # before the lock file is made in it: nothing is written into a foreign folder


def _complete(ctx, out: Folder, stats: dict, failure: List[NeardupError]) -> bytes:
    """stats.json's bytes, made once every other file of the result is in the output: after the
    result is published, ``--update-index`` adds the kept documents to the index (a failure
    leaves a complete output and an index without this run's documents, never an index holding
    documents of a run that failed; it is raised once stats.json is in place)."""
    if ctx.config.update_index:
        from .stages.against import update_index
        try:
            stats["index_update"] = update_index(ctx)
        except NeardupError as exc:
            failure.append(type(exc)(f"the output {redact(out.path)} is complete, but adding its kept documents "
                                     f"to the index failed: {exc}"))
    return json_bytes(stats, indent=2)


def default_work_dir(out: Folder, engine: str) -> str:
    """OUTPUT/.neardup-work; for a URL output on the local engine a local folder in the temporary
    directory instead, named after the output, so that ``--resume`` finds it again (the local
    engine reads its stage files back with explicit reads and memory maps: local disk only). The
    Ray engine keeps it in the store, where every node sees it."""
    if out.os_path is not None or engine == "ray":
        return out.join(WORK)
    name = hashlib.sha256(out.path.encode()).hexdigest()[:16]
    return os.path.join(tempfile.gettempdir(), f"neardup-work-{name}")
