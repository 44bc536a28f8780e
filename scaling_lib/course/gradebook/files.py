"""Who is who, and reading a submission safely.

File names (the documented pattern, :data:`PATTERN`)::

    SUBMISSIONS_DIR/STUDENT/NN_chapter.ipynb      e.g. alice/01_rooflines.ipynb
    SUBMISSIONS_DIR/STUDENT_NN_chapter.ipynb      e.g. bob_01_rooflines.ipynb

``NN_chapter`` must be one of the course's chapter names, whole, at the end of the name; STUDENT
is letters, digits, ``.``, ``-`` and ``_`` (``al`` and ``al_x`` are two students: the chapter is
matched at the end, never a prefix). Anything else is refused with the pattern in the reason.

:func:`find_submissions` walks the folder without following links and returns one
:class:`Entry` per ``*.ipynb`` name; links (symbolic or hard), FIFOs, devices, folders named
``.ipynb`` and files over :data:`MAX_BYTES` are refused. :func:`read_notebook` opens a regular
file without following links or blocking, checks its size and structure (cells with text
sources) and returns a notebook or the reason it is unreadable.
"""

from __future__ import annotations

import json
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

MAX_BYTES = 20 * 2**20      # a submitted notebook larger than this is refused
PATTERN = "STUDENT/NN_chapter.ipynb or STUDENT_NN_chapter.ipynb"
_STUDENT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


@dataclass
class Entry:
    """One ``*.ipynb`` name found under the submissions folder."""

    rel: str                  # path relative to the folder, with /
    path: Path
    student: str | None = None
    chapter: str | None = None
    refused: str = ""         # why it is not graded ("" when it is)
    mtime: float = 0.0
    size: int = 0
    note: str = ""            # a flag for the instructor (a second submission, a shared file)


def parse_name(rel: str, chapters) -> tuple[str | None, str | None]:
    """(student, chapter) from a relative path, by :data:`PATTERN`, or (None, None).

    >>> parse_name("alice/01_rooflines.ipynb", ["01_rooflines"])
    ('alice', '01_rooflines')
    >>> parse_name("al_x_01_rooflines.ipynb", ["01_rooflines"])
    ('al_x', '01_rooflines')
    >>> parse_name("al_01_rooflines_v2.ipynb", ["01_rooflines"])
    (None, None)
    """
    parts = rel.split("/")
    if not parts[-1].endswith(".ipynb") or len(parts) > 2:
        return None, None
    stem = parts[-1][:-len(".ipynb")]
    for chapter in sorted(chapters, key=len, reverse=True):
        if len(parts) == 2 and stem == chapter and _STUDENT.fullmatch(parts[0]):
            return parts[0], chapter
        if len(parts) == 1 and stem.endswith("_" + chapter):
            student = stem[: -len(chapter) - 1]
            if _STUDENT.fullmatch(student):
                return student, chapter
    return None, None


def _course_inodes(root) -> set:
    """(device, inode) of the course's own notebooks: a hard link to one is refused."""
    out = set()
    for sub in ("solutions", "exercises"):
        for p in Path(root).glob(f"{sub}/*.ipynb") if root else []:
            try:
                st = os.stat(p)
                out.add((st.st_dev, st.st_ino))
            except OSError:
                pass
    return out


def find_submissions(folder, chapters=None, course_root=None) -> list[Entry]:
    """Every ``*.ipynb`` name under ``folder`` (links not followed), sorted, each with its student
    and chapter or the reason it is refused. ``chapters``: the course's chapter names;
    ``course_root``: a hard link to one of its notebooks is refused."""
    folder = Path(folder)
    out = []
    course = _course_inodes(course_root)
    inodes: dict = {}
    for d, dirs, files in os.walk(folder, followlinks=False):
        dirs[:] = sorted(x for x in dirs if not x.startswith(".") and x != "__pycache__")
        for name in sorted(files + [x for x in os.listdir(d) if x.endswith(".ipynb")
                                    and x in dirs]):
            if not name.endswith(".ipynb") or name.startswith("."):
                continue
            path = Path(d) / name
            rel = path.relative_to(folder).as_posix()
            if any(e.rel == rel for e in out):
                continue
            e = Entry(rel, path)
            try:
                st = os.lstat(path)
            except OSError as exc:
                e.refused = f"cannot be read ({type(exc).__name__})"
                out.append(e)
                continue
            e.mtime, e.size = st.st_mtime, st.st_size
            if stat.S_ISLNK(st.st_mode):
                e.refused = "a link, not a file: links are refused (submit the notebook itself)"
            elif not stat.S_ISREG(st.st_mode):
                e.refused = "not a regular file (a folder, FIFO, socket or device)"
            elif (st.st_dev, st.st_ino) in course:
                e.refused = "a hard link to one of the course's notebooks: links are refused"
            elif st.st_size > MAX_BYTES:
                e.refused = f"larger than {MAX_BYTES // 2**20} MiB"
            if stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
                inodes.setdefault((st.st_dev, st.st_ino), []).append(e)
            if chapters is not None:
                e.student, e.chapter = parse_name(rel, chapters)
                if e.chapter is None and not e.refused:
                    e.refused = (f"the file name does not follow {PATTERN} with a chapter of the "
                                 "course")
            out.append(e)
    for same in inodes.values():  # two names of one file: graded, and flagged for a look
        for e in same:
            others = [x.rel for x in same if x is not e]
            if others:
                e.note = f"the same file (a hard link) as {', '.join(others)}"
    # links to folders are never walked: list them as refused
    for d, dirs, _ in os.walk(folder, followlinks=False):
        for x in dirs:
            p = Path(d) / x
            if p.is_symlink():
                out.append(Entry(p.relative_to(folder).as_posix(), p,
                                 refused="a link to a folder: links are refused"))
    return sorted(out, key=lambda e: e.rel)


def read_notebook(path) -> tuple[object | None, str]:
    """(notebook, "") or (None, why it is unreadable). Never follows a link, never blocks on a
    FIFO, never reads more than :data:`MAX_BYTES`."""
    import nbformat

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY)
    except OSError as exc:
        return None, f"cannot be opened ({type(exc).__name__}: {exc.strerror})"
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None, "not a regular file"
        if st.st_size > MAX_BYTES:
            return None, f"larger than {MAX_BYTES // 2**20} MiB"
        chunks, size = [], 0
        while size <= MAX_BYTES:
            b = os.read(fd, 1 << 20)
            if not b:
                break
            chunks.append(b)
            size += len(b)
        if size > MAX_BYTES:
            return None, f"larger than {MAX_BYTES // 2**20} MiB"
    except OSError as exc:
        return None, f"cannot be read ({type(exc).__name__})"
    finally:
        os.close(fd)
    try:
        data = json.loads(b"".join(chunks).decode("utf-8", errors="replace"))
    except (ValueError, RecursionError) as exc:
        return None, f"not a notebook (not JSON: {type(exc).__name__})"
    if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
        return None, "not a notebook (no list of cells)"
    if len(data["cells"]) > 5000:
        return None, "more than 5000 cells"
    for i, c in enumerate(data["cells"], start=1):
        if not isinstance(c, dict) or not isinstance(c.get("cell_type"), str):
            return None, f"cell {i} is not a cell"
        src = c.get("source", "")
        if isinstance(src, list) and all(isinstance(x, str) for x in src):
            src = "".join(src)
        if not isinstance(src, str):
            return None, f"cell {i}: its source is not text"
        c["source"] = src
        if not isinstance(c.get("metadata", {}), dict):
            c["metadata"] = {}
        c.setdefault("metadata", {})
        tags = c["metadata"].get("tags", [])
        if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
            c["metadata"]["tags"] = []
        if c["cell_type"] == "code":   # only printed text is kept (for the hints seen)
            streams = []
            for o in c.get("outputs", []) if isinstance(c.get("outputs"), list) else []:
                t = o.get("text", "") if isinstance(o, dict) and o.get("output_type") == "stream" \
                    else None
                if isinstance(t, list) and all(isinstance(x, str) for x in t):
                    t = "".join(t)
                if isinstance(t, str):
                    streams.append({"output_type": "stream", "name": "stdout",
                                    "text": t[:100_000]})
            c["outputs"], c["execution_count"] = streams, None
    data.setdefault("metadata", {})
    if not isinstance(data["metadata"], dict):
        data["metadata"] = {}
    data["nbformat"], data["nbformat_minor"] = 4, 5
    try:
        return nbformat.from_dict(data), ""
    except Exception as exc:
        return None, f"not a notebook ({type(exc).__name__})"
