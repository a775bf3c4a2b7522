"""Integrity and write failures under real processes: checksums (HDF5 fletcher32) verified on restart
and when stencil's own files are read as an initial field; a damaged file refused before anything is
written; every output failure (a full disk, a read-only filesystem, a full or closed stdout) exit 5 with
the file and the fix, or (a closed pipe) a quiet end."""

import contextlib
import shutil
import subprocess
import sys

import h5py
import pytest
from conftest import ROOT, clean_env, stencil, write_case


def one_error_line(res, code, *needles):
    assert res.returncode == code, (res.returncode, res.stdout, res.stderr)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), res.stderr
    assert "Traceback" not in res.stderr
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


def flip_bit(path, dataset, coord):
    """Flip one bit in the middle of the stored chunk of `dataset` that holds element `coord`."""
    with h5py.File(path, "r") as f:
        d = f[dataset]
        assert d.fletcher32, f"{path}:{dataset} carries no checksum"
        info = d.id.get_chunk_info_by_coord(tuple(coord))
    with open(path, "r+b") as f:
        f.seek(info.byte_offset + info.size // 2)
        b = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([b[0] ^ 0x10]))


def test_a_flipped_bit_is_refused_naming_the_file_and_dataset_before_anything_is_written(tmp_path):
    out = tmp_path / "out"
    case = write_case(tmp_path / "c.yaml", output={"dir": str(out), "checkpoint_every": 10, "vtk": False})
    assert stencil(["run", str(case), "-q"]).returncode == 0
    # restart from a checkpoint with one bit flipped: exit 2 naming /u, nothing written anywhere
    cp = tmp_path / "cp.h5"
    shutil.copy(out / "checkpoint.h5", cp)
    flip_bit(cp, "u", (8, 0))
    one_error_line(stencil(["run", str(case), "--restart", str(cp), "--steps", "30", "-o", str(tmp_path / "o2")]),
                   2, f"dataset /u of {cp}", "damaged")
    assert not (tmp_path / "o2").exists()
    # stencil's own fields.h5 as an initial field: its last snapshot is read, and its checksum checked
    fields = tmp_path / "fields.h5"
    shutil.copy(out / "fields.h5", fields)
    flip_bit(fields, "u", (1, 0, 0))
    init = write_case(tmp_path / "i.yaml", initial={"kind": "file", "path": str(fields), "dataset": "/u"})
    one_error_line(stencil(["run", str(init)]), 2, f"{fields}:/u", "checksum")
    assert not (tmp_path / "out_i").exists()
    # a restart into the run's own directory whose fields.h5 is damaged: refused before case.yaml is rewritten
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    flip_bit(out / "fields.h5", "step", (0,))
    damaged = (out / "fields.h5").read_bytes()
    one_error_line(stencil(["run", str(case), "--restart", str(out), "--steps", "30"]), 2,
                   f"{out / 'fields.h5'}", "cannot be opened to append")
    assert {p.name: p.read_bytes() for p in out.iterdir()} == {**before, "fields.h5": damaged}


@contextlib.contextmanager
def small_filesystem(path, size="1m"):
    """A real tmpfs of `size` at `path` (needs root, or a user namespace); None where mounting is refused."""
    path.mkdir()
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True)
    if res.returncode != 0:
        yield None
        return
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def fill(fs):
    with open(fs / "filler", "wb") as f, contextlib.suppress(OSError):
        while True:
            f.write(b"\0" * 65536)
            f.flush()


def test_an_already_full_disk_is_exit_5_naming_the_file(tmp_path):
    case_dir = tmp_path / "cases"
    case_dir.mkdir()
    with small_filesystem(tmp_path / "fs") as fs:
        if fs is None:  # no mount here: every file limited to 0 bytes (RLIMIT_FSIZE), as a full disk refuses
            out = tmp_path / "out"
            case = write_case(case_dir / "c.yaml", output={"dir": str(out), "vtk": False})
            code = ("import resource, signal, sys; signal.signal(signal.SIGXFSZ, signal.SIG_IGN); "
                    "resource.setrlimit(resource.RLIMIT_FSIZE, (0, resource.RLIM_INFINITY)); "
                    "sys.argv = ['stencil', *sys.argv[1:]]; from solver.cli import main; main()")
            res = subprocess.run([sys.executable, "-c", code, "run", str(case), "-q"], capture_output=True,
                                 text=True, cwd=ROOT, env=clean_env(), timeout=120)
            reason = "File too large"
        else:
            out = fs / "out"
            case = write_case(case_dir / "c.yaml", output={"dir": str(out), "vtk": False})
            fill(fs)
            res = stencil(["run", str(case), "-q"])
            reason = "No space left on device"
        one_error_line(res, 5, f"cannot write {out}/", reason, "free disk space")
        assert "Traceback" not in res.stdout


def test_a_restart_into_a_read_only_filesystem_is_exit_5_with_the_directory_and_the_fix(tmp_path):
    with small_filesystem(tmp_path / "fs", "4m") as fs:
        if fs is None:
            pytest.skip("mounting a filesystem (to make it read-only) is not allowed here")
        out = fs / "out"
        case = write_case(tmp_path / "c.yaml", output={"dir": str(out), "checkpoint_every": 10, "vtk": False})
        assert stencil(["run", str(case), "-q"]).returncode == 0
        before = {p.name: p.read_bytes() for p in out.iterdir()}
        assert subprocess.run(["mount", "-o", "remount,ro", str(fs)], capture_output=True).returncode == 0
        one_error_line(stencil(["run", str(case), "--restart", str(out), "--steps", "30"]), 5,
                       f"cannot write {fs}", "Read-only file system", "remount it read-write or choose")
        assert {p.name: p.read_bytes() for p in out.iterdir()} == before


def test_a_full_stdout_is_exit_5_and_a_closed_pipe_ends_quietly(tmp_path):
    case = write_case(tmp_path / "c.yaml", output={"dir": str(tmp_path / "out"), "vtk": False})
    cmd = [sys.executable, "-m", "solver", "run", str(case), "-q", "--overwrite"]
    with open("/dev/full", "w") as full:
        res = subprocess.run(cmd, stdout=full, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=clean_env())
    one_error_line(res, 5, "standard output", "No space left on device", "the results are in")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                            env=clean_env())
    proc.stdout.close()  # `| head` that has already exited: every write to stdout fails with EPIPE
    err = proc.stderr.read()
    assert proc.wait(120) == 0 and err == "", err
    assert (tmp_path / "out" / "record.json").exists()


def test_an_hdf5_initial_field_without_a_dataset_reads_u(tmp_path):
    """initial: {kind: file, path: prev/fields.h5} needs no `dataset`: a file stencil wrote holds its field in
    /u (fields.h5: the last snapshot; checkpoint.h5: the field); another HDF5 file names its dataset."""
    import numpy as np

    from solver.core.errors import InputError
    from solver.core.initial import read_field_file

    series = np.arange(3 * 4 * 5, dtype=np.float64).reshape(3, 4, 5)
    with h5py.File(tmp_path / "fields.h5", "w") as f:
        f["u"] = series
    got = read_field_file(str(tmp_path / "fields.h5"), None, (4, 5), range(1, 3), range(0, 5))
    assert np.array_equal(got, series[-1, 1:3])
    with h5py.File(tmp_path / "other.h5", "w") as f:
        f["temperature"] = series[0]
    with pytest.raises(InputError, match=r"initial.dataset: .*other.h5 has no /u; name the HDF5 dataset .*/temperature"):
        read_field_file(str(tmp_path / "other.h5"), None, (4, 5), range(0, 4), range(0, 5))
