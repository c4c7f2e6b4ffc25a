"""Reading a file as git holds it at a revision (``git:REV:path.py::function`` targets).

``REV`` is resolved to its commit once; a revision git does not know gets a message
that says why (a shallow or single-branch clone, as CI makes) and how to fetch it.

Every git command has a deadline (``GIT_SECONDS``): a git that hangs (a hook, a
credential prompt, a wrapper earlier on ``PATH``, a lock on a network file system) is
ended with everything it started, and the target is refused, naming it (``GitHung``).
"""

from __future__ import annotations

import os
import signal
import subprocess

from stagecheck.oracles import messages
from stagecheck.oracles.errors import TargetLoadError
from stagecheck.oracles.guard import seconds_given
from stagecheck.oracles.targets.source import decode_source

__all__ = ["GIT_SECONDS", "GIT_SECONDS_ENV", "GitHung", "git_show", "run_git"]

#: seconds of the wall clock one git command may take: git answers what stagecheck asks
#: (rev-parse, cat-file, show of one file) in milliseconds; ``STAGECHECK_GIT_SECONDS``
#: changes it
GIT_SECONDS = 30.0
GIT_SECONDS_ENV = "STAGECHECK_GIT_SECONDS"


class GitHung(Exception):
    """A git command passed its deadline (``GIT_SECONDS``); it was ended."""

    def __init__(self, args: tuple[str, ...], seconds: float) -> None:
        super().__init__(f"git {' '.join(args)}")
        self.command, self.seconds = "git " + " ".join(args), seconds


def _git(args: tuple[str, ...], cwd: str | None, text: bool) -> subprocess.CompletedProcess:
    """Run git with a deadline; git and what it started (hooks, helpers, a wrapper's
    children) run in a session of their own, all ended at the deadline."""
    seconds = seconds_given(GIT_SECONDS_ENV, GIT_SECONDS, 0.1)
    with subprocess.Popen(["git", *args], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, cwd=cwd, start_new_session=True) as process:
        try:
            out, err = process.communicate(timeout=seconds)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except OSError:
                pass
            try:     # a child that left git's session may still hold a pipe: not waited for
                process.communicate(timeout=1.0)
            except subprocess.TimeoutExpired:
                pass
            raise GitHung(args, seconds) from None
    if text:
        out, err = (b.decode(errors="replace") for b in (out, err))
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


def run_git(*args: str, cwd: str | None = None) -> subprocess.CompletedProcess:
    return _git(args, cwd, text=True)


def _git_bytes(*args: str, cwd: str | None = None) -> subprocess.CompletedProcess:
    return _git(args, cwd, text=False)


def _existing_folder(path: str) -> str:
    folder = os.path.dirname(path)
    while folder and not os.path.isdir(folder):
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    return folder or os.getcwd()


def _unknown_revision(rev: str, path: str, name: str, spec: str, top: str) -> TargetLoadError:
    """Why git does not know ``rev``, and how to make it known (CI clones are shallow and
    single-branch: the base branch is not in them)."""
    shallow = run_git("rev-parse", "--is-shallow-repository", cwd=top).stdout.strip() == "true"
    remotes = run_git("remote", cwd=top).stdout.split()
    remote = "origin" if "origin" in remotes or not remotes else remotes[0]
    fetch = run_git("config", "--get-all", f"remote.{remote}.fetch", cwd=top).stdout.split()
    single = bool(remotes) and not any(f.endswith(f"refs/remotes/{remote}/*") for f in fetch)
    branch_like = not any(ch in rev for ch in "~^@:") and not rev.startswith(f"{remote}/")
    if (shallow or single) and branch_like and remotes:
        kind = " and ".join(k for k, on in (("shallow", shallow), ("single-branch", single)) if on)
        depth = "--depth 1 " if shallow else ""
        return TargetLoadError.of(messages.GIT_REVISION_NOT_FETCHED, spec, rev=rev, kind=kind,
                                  remote=remote, depth=depth, path=path, name=name)
    return TargetLoadError.of(messages.GIT_BAD_REVISION if branch_like
                              else messages.GIT_BAD_RELATIVE_REVISION, spec, rev=rev, remote=remote,
                              shallow=" (this clone is shallow: history older than its "
                              "commits is not in it; 'git fetch --unshallow' brings it)"
                              if shallow else "")


def git_show(rev: str, path: str, spec: str) -> tuple[str, str, str]:
    """``(source, commit sha, absolute path)`` of ``path`` at ``rev``.

    ``path`` is taken relative to the current folder, like a file target's (an
    absolute path works too); git runs in the repository that holds it. A git command
    that hangs refuses the target (``messages.GIT_HUNG``).
    """
    try:
        return _git_show(rev, path, spec)
    except GitHung as hung:
        raise TargetLoadError.of(messages.GIT_HUNG, spec, command=hung.command,
                                 seconds=f"{hung.seconds:g}", env=GIT_SECONDS_ENV) from None


def _git_show(rev: str, path: str, spec: str) -> tuple[str, str, str]:
    _, _, name = spec.rpartition("::")
    abs_path = os.path.realpath(path)
    where = _existing_folder(abs_path)
    top = run_git("rev-parse", "--show-toplevel", cwd=where)
    if top.returncode != 0:
        raise TargetLoadError.of(messages.GIT_NOT_REPO, spec, cwd=where)
    top = os.path.realpath(top.stdout.strip())
    rel = os.path.relpath(abs_path, top).replace(os.sep, "/")
    if rel == ".." or rel.startswith("../"):
        raise TargetLoadError.of(messages.GIT_PATH_OUTSIDE, spec, path=abs_path, top=top)
    resolved = run_git("rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}", cwd=top)
    if resolved.returncode != 0:
        raise _unknown_revision(rev, path, name, spec, top)
    sha = resolved.stdout.strip()
    kind = run_git("cat-file", "-t", f"{sha}:{rel}", cwd=top)
    if kind.returncode == 0 and kind.stdout.strip() == "tree":
        raise TargetLoadError.of(messages.GIT_PATH_IS_TREE, spec, path=path, rev=rev, rel=rel)
    shown = _git_bytes("show", f"{sha}:{rel}", cwd=top)
    if shown.returncode != 0:
        raise TargetLoadError.of(messages.GIT_PATH_MISSING, spec, path=path, rel=rel, rev=rev,
                                 cwd=os.getcwd(), top=top,
                                 folder=os.path.dirname(rel) or ".")
    return decode_source(shown.stdout, f"{path} at revision {rev}", spec), sha, abs_path
