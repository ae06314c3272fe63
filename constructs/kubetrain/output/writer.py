"""Writing synth's output into dist/: one file per object, swapped in whole or not at all.

Layout: `<outdir>/<chart>/<namespace>/<Kind>.<name>.yaml`, cluster-scoped objects under
`<outdir>/<chart>/_cluster/` (an underscore cannot start a namespace name, so they never clash).
One file per object makes a pull request show exactly which object changed; the namespace level
keeps same-named objects of different namespaces apart (cdk8s's own per-resource output does not).
A folder is replaced only when it provably holds nothing but synth's output (KT601).
"""

from __future__ import annotations

import ctypes
import errno
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from kubetrain.rules.registry import register
from kubetrain_runtime.problems import ConfigError, Problem

CLUSTER_SCOPED_FOLDER = "_cluster"


def manifest_path(chart: str, obj: dict[str, Any]) -> Path:
    metadata = obj.get("metadata", {})
    folder = metadata.get("namespace") or CLUSTER_SCOPED_FOLDER
    return Path(chart, folder, f"{obj['kind']}.{metadata['name']}.yaml")


MARKER = ".kubetrain-synth"
MARKER_TEXT = ("This folder is written by `kubetrain synth`, which replaces all of it on every run.\n"
               "These are the files it wrote; any other file here stops the next synth (KT601).\n")
_MANIFEST_NAME = re.compile(r"^[A-Z][A-Za-z0-9]*\.[a-z0-9]([-a-z0-9.]*[a-z0-9])?\.yaml$")
# What an interrupted synth can leave beside the output folder: its staging folder (and, from older versions
# of synth, the retired output). Both are recognised by the marker inside, and git-ignored (.gitignore).
_LEFTOVER_PREFIXES = ("tmp-", "old-")


def marker_text(paths: Iterable[Path]) -> str:
    """The marker: what the folder is, then every file synth wrote into it, one relative path a line."""
    return MARKER_TEXT + "".join(f"{path.as_posix()}\n" for path in sorted(paths))


def written_by_synth(outdir: Path) -> set[str] | None:
    """The files the marker of `outdir` says synth wrote (relative POSIX paths), or None for a marker from an
    older synth that lists none."""
    lines = (outdir / MARKER).read_text(encoding="utf-8", errors="replace").splitlines()
    header = MARKER_TEXT.splitlines()
    return set(lines[len(header):]) if lines[:len(header)] == header else None


UNWRITABLE = register(
    "KT603", "error", "the output folder cannot be written",
    rationale="synth stages its output beside the output folder and swaps it in; without write access there "
              "(or with a full disk) nothing is written and the old folder stays as it was.",
    fix="choose a folder you can write, or free space",
    source="README.md (Commands)")
NOT_SYNTH_OUTPUT = register(
    "KT601", "error", "the output folder holds more than synth's output",
    rationale="synth replaces its output folder whole; a folder with anything else in it (the project root, "
              "a .git, your files) would be destroyed.",
    fix="choose an empty or new folder, or the folder synth wrote before (it carries a .kubetrain-synth marker)",
    source="README.md (Commands)")


def replaceable(outdir: Path) -> str | None:
    """Why synth must not replace `outdir` (None: it may). It may replace an empty folder, one whose marker lists
    every file in it (what synth wrote last time), or one that provably holds only manifests in synth's layout
    (<cluster>/<folder>/<Kind>.<name>.yaml). A file synth did not write is never deleted: it is named instead."""
    if not outdir.exists():
        existing = next((parent for parent in outdir.absolute().parents if parent.exists()), None)
        return f"{existing} is not a folder" if existing is not None and not existing.is_dir() else None
    if not outdir.is_dir() or outdir.is_symlink():
        return f"{outdir} is not a folder"
    if Path.cwd().resolve().is_relative_to(outdir.resolve()):
        return f"{outdir} holds the current folder"
    written = written_by_synth(outdir) if (outdir / MARKER).is_file() else None
    tracked: set[str] | None = None
    for path in sorted(outdir.rglob("*")):
        relative = path.relative_to(outdir)
        if path.is_dir() and not path.is_symlink():
            if written is None and len(relative.parts) >= 3:
                return f"{outdir} holds {relative}, which synth did not write"
            continue
        if written is not None:
            ours = relative.as_posix() in written or relative.as_posix() == MARKER
            if not ours:  # committed to git (a merge brought it): recoverable from the repository, not a user's own
                tracked = _tracked_by_git(outdir) if tracked is None else tracked
                ours = relative.as_posix() in tracked
        else:
            ours = (path.is_file() and not path.is_symlink() and len(relative.parts) == 3
                    and _MANIFEST_NAME.match(relative.name)) or relative.as_posix() == MARKER
        if not ours:
            return f"{outdir} holds {relative}, which synth did not write (move it out of the folder)"
    return None


def _tracked_by_git(folder: Path) -> set[str]:
    """The files under `folder` that git tracks, relative to it (empty outside a repository or without git)."""
    try:
        listed = subprocess.run(["git", "ls-files", "-z"], cwd=folder, capture_output=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return set()
    return set(listed.stdout.decode("utf-8", "replace").split("\0")) - {""} if listed.returncode == 0 else set()


def write_tree(files: dict[Path, str], outdir: Path) -> None:
    """Replace `outdir` with exactly `files` (and the marker); on any failure the old `outdir` is left
    untouched, and a folder that holds anything synth did not write is never replaced (KT601)."""
    refuse_unless_replaceable(outdir)
    outdir = outdir.resolve()
    try:
        outdir.parent.mkdir(parents=True, exist_ok=True)
        _remove_leftovers(outdir)
        _swap_in(files, outdir)
    except OSError as error:  # a read-only or full disk: the user's to fix, not a crash
        reason = f"cannot write {outdir}: {error.strerror or error}"
        raise ConfigError(str(outdir), [Problem(UNWRITABLE.code, "", reason, UNWRITABLE.fix)]) from None


def _remove_leftovers(outdir: Path) -> None:
    """Delete what an interrupted synth left beside `outdir`: its staging folders (and older synths' retired
    outputs), each recognised as synth's by its marker, or empty (killed before it wrote anything)."""
    for prefix in _LEFTOVER_PREFIXES:
        for leftover in outdir.parent.glob(f".{glob.escape(outdir.name)}.{prefix}*"):
            if not leftover.is_dir() or leftover.is_symlink():
                continue
            inside = list(leftover.iterdir())
            if not inside or (leftover / MARKER).is_file() or (leftover / outdir.name / MARKER).is_file():
                shutil.rmtree(leftover)


def _swap_in(files: dict[Path, str], outdir: Path) -> None:
    """Write `files` into a staging folder beside `outdir`, then exchange the two in one step: `outdir` is
    never absent, and never half old, half new. Where the platform cannot exchange two folders, the staged
    files are moved in one by one instead (the folder is then briefly mixed, but never absent)."""
    staging = Path(tempfile.mkdtemp(prefix=f".{outdir.name}.{_LEFTOVER_PREFIXES[0]}", dir=outdir.parent))
    try:
        # The marker first: a staging folder left by a kill is then recognisably synth's.
        (staging / MARKER).write_text(marker_text(files))
        for path, text in files.items():
            target = staging / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
        os.chmod(staging, 0o755)
        if not outdir.exists():
            os.rename(staging, outdir)
        elif not exchange(staging, outdir):
            _move_in(staging, outdir, files)
    finally:
        if staging.exists():
            shutil.rmtree(staging)  # after an exchange, it holds the old output


def exchange(a: Path, b: Path) -> bool:
    """Swap two paths atomically (Linux renameat2 RENAME_EXCHANGE, macOS renamex_np RENAME_SWAP). False where
    the platform, the file system or the paths cannot; other failures raise OSError."""
    libc = ctypes.CDLL(None, use_errno=True)
    old, new = os.fsencode(a), os.fsencode(b)
    if sys.platform.startswith("linux") and hasattr(libc, "renameat2"):
        failed = libc.renameat2(_AT_FDCWD, old, _AT_FDCWD, new, _RENAME_EXCHANGE)
    elif sys.platform == "darwin" and hasattr(libc, "renamex_np"):
        failed = libc.renamex_np(old, new, _RENAME_SWAP)
    else:
        return False
    if not failed:
        return True
    code = ctypes.get_errno()
    # No such call or file system support, or a folder that cannot move (a mount point: EBUSY, EXDEV).
    if code in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EBUSY, errno.EXDEV):
        return False
    raise OSError(code, os.strerror(code), str(b))


_AT_FDCWD = -100  # fcntl.h: paths relative to the current folder
_RENAME_EXCHANGE = 2  # linux/fs.h
_RENAME_SWAP = 2  # macOS stdio.h


def _move_in(staging: Path, outdir: Path, files: dict[Path, str]) -> None:
    """The fallback of `_swap_in`: replace `outdir`'s files one by one (each `os.replace` is atomic), then
    delete what the new output no longer has. The marker lists old and new files until the end, so a kill
    halfway leaves a folder the next synth may still replace."""
    old = written_by_synth(outdir) or set()
    (outdir / MARKER).write_text(marker_text({*files, *map(Path, old)}))
    for path in files:
        (outdir / path).parent.mkdir(parents=True, exist_ok=True)
        os.replace(staging / path, outdir / path)
    new = {path.as_posix() for path in files}
    for path in sorted(outdir.rglob("*"), reverse=True):  # files before the folders that hold them
        relative = path.relative_to(outdir).as_posix()
        if relative == MARKER or relative in new:
            continue
        if path.is_dir() and not path.is_symlink():
            if not any(path.iterdir()):
                path.rmdir()
        else:
            path.unlink()
    os.replace(staging / MARKER, outdir / MARKER)


def refuse_unless_replaceable(outdir: Path) -> None:
    """Raise KT601 when synth must not replace `outdir`."""
    refusal = replaceable(outdir)
    if refusal is not None:
        raise ConfigError(str(outdir), [Problem(NOT_SYNTH_OUTPUT.code, "", refusal, NOT_SYNTH_OUTPUT.fix)])
