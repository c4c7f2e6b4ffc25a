"""Writes into the save folder never follow a symbolic link out of it."""

import os

import pytest

from stagecheck.oracles.report.files import write_atomic


def test_a_link_at_a_findings_path_is_replaced_and_what_it_names_is_untouched(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    save = tmp_path / "found"
    save.mkdir()
    (save / "f.json").symlink_to(victim)
    write_atomic(str(save / "f.json"), "{}", inside=str(save))
    assert victim.read_text() == "precious"
    assert not (save / "f.json").is_symlink() and (save / "f.json").read_text() == "{}"


def test_a_linked_folder_leading_out_of_the_save_folder_is_refused(tmp_path):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    save = tmp_path / "found"
    save.mkdir()
    (save / "runs").symlink_to(outside)
    with pytest.raises(OSError, match="leads out of"):
        write_atomic(str(save / "runs" / "m.json"), "{}", inside=str(save))
    assert os.listdir(outside) == []


def test_a_save_folder_that_is_itself_a_link_is_the_users_choice(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    write_atomic(str(tmp_path / "link" / "f.json"), "{}", inside=str(tmp_path / "link"))
    assert (real / "f.json").read_text() == "{}"
