"""Every file stagecheck writes: probed without side effects, written atomically."""

from __future__ import annotations

import os
import stat

import pytest

from stagecheck.oracles.report import files
from stagecheck.oracles.report.files import probe_file, probe_folder, write_atomic


def test_write_atomic_replaces_the_file_by_rename(tmp_path):
    path = tmp_path / "report.json"
    path.write_text("old")
    before = os.stat(path).st_ino
    write_atomic(str(path), "new content")
    assert path.read_text() == "new content"
    assert os.stat(path).st_ino != before          # a new file renamed over the old one
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json"]   # no temp left


def test_write_atomic_gives_the_mode_open_would(tmp_path):
    path = tmp_path / "r.xml"
    write_atomic(str(path), "x")
    mask = os.umask(0)
    os.umask(mask)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o666 & ~mask


def test_a_umask_changed_during_the_run_leaves_the_modes_as_at_the_start(tmp_path):
    # a schema's code set the umask to 0o777: every output was written with mode 000
    start = os.umask(0o777)
    try:
        files.make_folder(str(tmp_path / "found" / "run"))
        write_atomic(str(tmp_path / "found" / "run" / "f.json"), "{}")
        write_atomic(str(tmp_path / "r.json"), "{}")
    finally:
        os.umask(start)
    assert stat.S_IMODE(os.stat(tmp_path / "r.json").st_mode) == 0o666 & ~start
    assert stat.S_IMODE(os.stat(tmp_path / "found" / "run" / "f.json").st_mode) == \
        0o666 & ~start
    for folder in (tmp_path / "found", tmp_path / "found" / "run"):
        assert stat.S_IMODE(os.stat(folder).st_mode) == 0o777 & ~start


def test_a_write_that_fails_half_way_leaves_the_old_file_and_no_temp(tmp_path, monkeypatch):
    path = tmp_path / "report.json"
    path.write_text("the old report")

    def half_then_fail(src, dst, **folders):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(files.os, "replace", half_then_fail)
    with pytest.raises(OSError):
        write_atomic(str(path), "x" * 100_000)
    assert path.read_text() == "the old report"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json"]


def test_a_symlinked_report_replaces_the_file_it_names(tmp_path):
    real = tmp_path / "real.json"
    real.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    write_atomic(str(link), "new")
    assert link.is_symlink() and real.read_text() == "new"


def test_a_device_is_written_directly_and_its_error_surfaces():
    write_atomic(os.devnull, "anything")           # never renamed over
    assert stat.S_ISCHR(os.stat(os.devnull).st_mode)
    if os.path.exists("/dev/full"):
        with pytest.raises(OSError) as info:
            write_atomic("/dev/full", "x" * 10_000)
        assert info.value.errno == 28              # ENOSPC
        assert stat.S_ISCHR(os.stat("/dev/full").st_mode)


def test_probes_change_nothing(tmp_path):
    existing = tmp_path / "keep.json"
    existing.write_text("do not truncate me")
    assert probe_file(str(existing)) is None
    assert existing.read_text() == "do not truncate me"
    assert probe_file(str(tmp_path / "new.json")) is None
    assert not (tmp_path / "new.json").exists()
    assert probe_folder(str(tmp_path / "a" / "b" / "c")) is None
    assert not (tmp_path / "a").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.json"]


def test_probes_name_why_a_path_cannot_be_written(tmp_path):
    plain = tmp_path / "plain"
    plain.write_text("")
    assert "does not exist" in probe_file(str(tmp_path / "missing" / "r.json"))
    assert "folder" in probe_file(str(tmp_path))
    assert "is not a folder" in probe_folder(str(plain / "sub"))
    assert probe_file(str(plain / "r.json"))          # under a regular file


@pytest.mark.skipif(not os.path.isdir("/proc/1"), reason="needs Linux's /proc")
def test_a_folder_whose_file_system_takes_no_files_is_named_as_such():
    # creating a file in /proc/1 fails with ENOENT although the folder exists
    for why in (probe_folder("/proc/1"), probe_file("/proc/1/report.json")):
        assert "takes no new files" in why and "No such file" not in why


def test_a_report_name_longer_than_its_folder_takes_is_refused_before_the_run(tmp_path):
    """An audit: ``--json`` of a 300-character name was refused only after the run ("File
    name too long ... free space or give another path"); a report is written through a
    temporary file whose name is 14 bytes longer, so that bound counts too."""
    limit = os.pathconf(tmp_path, "PC_NAME_MAX")
    assert probe_file(str(tmp_path / ("a" * (limit - 14 - 5) + ".json"))) is None
    for length in (limit - 14 - 4, limit + 40):
        why = probe_file(str(tmp_path / ("a" * length + ".json")))
        assert why is not None and f"its name is {length + 5} bytes long" in why, why
        assert "give a shorter name" in why
    assert list(tmp_path.iterdir()) == []             # the probe made nothing
