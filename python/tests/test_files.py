"""The file calls through the binding, against a real cluster (the fs
`pomfs` of `pomctl up`, with its local blob tier for large files)."""

import errno
import os
import stat
import uuid

import pytest


@pytest.fixture
def d(fs):
    """A directory of its own per test."""
    path = "/" + uuid.uuid4().hex
    fs.mkdir(path)
    return path


def test_write_read_seek(fs, d):
    p = d + "/f"
    with fs.open(p, "wb") as f:
        assert f.writable() and not f.readable()
        assert f.write(b"hello ") == 6
        assert f.write(memoryview(b"world")) == 5
        assert f.tell() == 11
        f.fsync()
    with fs.open(p) as f:
        assert f.read() == b"hello world"
        f.seek(6)
        assert f.read(3) == b"wor"
        assert f.seek(-2, os.SEEK_END) == 9
        assert f.read() == b"ld"
        buf = bytearray(5)
        f.seek(0)
        assert f.readinto(buf) == 5 and buf == b"hello"
        with pytest.raises(OSError):
            f.write(b"x")
    with fs.open(p, "r+b") as f:
        f.seek(0)
        f.write(b"J")
        f.seek(0, os.SEEK_END)
        f.write(b"!\nline 2\n")
    with fs.open(p.encode()) as f:
        assert f.readlines() == [b"Jello world!\n", b"line 2\n"]
    with fs.open(p, "ab") as f:
        f.write(b"end")
        assert f.tell() == 23
    assert fs.read_bytes(p) == b"Jello world!\nline 2\nend"
    with fs.open(p, "w+b") as f:  # truncates
        assert f.read() == b""
        f.write(b"abcdef")
        f.truncate(2)
    assert fs.read_bytes(p) == b"ab"
    fs.truncate(p, 0)
    assert fs.stat(p).st_size == 0


def test_stat_and_errors(fs, d):
    fs.write_bytes(d + "/f", b"12345")
    st = fs.stat(d + "/f")
    assert stat.S_ISREG(st.st_mode) and st.st_size == 5 and st.st_nlink == 1
    assert st.st_uid == os.getuid() and st.st_mtime_ns > 0
    assert stat.S_ISDIR(fs.stat(d).st_mode) and stat.S_ISDIR(fs.stat("/").st_mode)
    assert fs.exists(d + "/f") and not fs.exists(d + "/nope")
    with pytest.raises(FileNotFoundError) as e:
        fs.stat(d + "/nope/deeper")
    assert e.value.errno == errno.ENOENT and e.value.filename == d + "/nope/deeper"
    with pytest.raises(FileNotFoundError):
        fs.open(d + "/nope")
    with pytest.raises(FileExistsError):
        fs.open(d + "/f", "xb")
    with pytest.raises(FileExistsError):
        fs.mkdir(d + "/f")
    with pytest.raises(IsADirectoryError):
        fs.open(d, "rb")
    with pytest.raises(NotADirectoryError):
        fs.stat(d + "/f/x")
    with pytest.raises(ValueError):
        fs.open(d + "/f", "rt")
    with fs.open(d + "/new", "xb") as f:
        f.write(b"x")
    assert fs.stat(d + "/new").st_size == 1


def test_directories(fs, d):
    fs.mkdir(d + "/sub", 0o750)
    assert stat.S_IMODE(fs.stat(d + "/sub").st_mode) == 0o750
    names = {"n%03d" % i for i in range(150)}
    for n in names:
        fs.write_bytes(d + "/sub/" + n, n.encode())
    assert set(fs.listdir(d + "/sub")) == names
    assert sorted(fs.listdir((d + "/sub").encode())) == sorted(n.encode() for n in names)
    ents = fs.scandir(d)
    assert [(e.name, stat.S_ISDIR(e.mode)) for e in ents] == [("sub", True)]
    assert ents[0].ino == fs.stat(d + "/sub").st_ino
    with pytest.raises(OSError) as e:
        fs.rmdir(d + "/sub")
    assert e.value.errno == errno.ENOTEMPTY
    with pytest.raises(IsADirectoryError):
        fs.unlink(d + "/sub")
    for n in names:
        fs.unlink(d + "/sub/" + n)
    with pytest.raises(FileNotFoundError):
        fs.unlink(d + "/sub/n000")
    fs.rmdir(d + "/sub")
    assert fs.listdir(d) == []
    with pytest.raises(OSError) as e:
        fs.rmdir("/")
    assert e.value.errno == errno.EBUSY


def test_rename(fs, d):
    fs.write_bytes(d + "/a", b"A")
    fs.write_bytes(d + "/b", b"B")
    fs.mkdir(d + "/dir")
    fs.rename(d + "/a", d + "/dir/a2")
    assert not fs.exists(d + "/a") and fs.read_bytes(d + "/dir/a2") == b"A"
    with pytest.raises(FileExistsError):
        fs.rename(d + "/b", d + "/dir/a2", noreplace=True)
    fs.rename(d + "/b", d + "/dir/a2", exchange=True)
    assert fs.read_bytes(d + "/b") == b"A" and fs.read_bytes(d + "/dir/a2") == b"B"
    fs.rename(d + "/b", d + "/dir/a2")  # replaces
    assert fs.read_bytes(d + "/dir/a2") == b"A" and not fs.exists(d + "/b")
    with pytest.raises(FileNotFoundError):
        fs.rename(d + "/b", d + "/c")


def test_large_file(fs, d):
    """Past 64 KiB a file moves to the blob tier: write it in pieces, read it back."""
    data = os.urandom(3 << 20)
    with fs.open(d + "/big", "wb") as f:
        for off in range(0, len(data), 1 << 20):
            f.write(data[off:off + (1 << 20)])
        f.fsync()
    assert fs.stat(d + "/big").st_size == len(data)
    with fs.open(d + "/big") as f:
        assert f.read() == data
        f.seek(100000)
        assert f.read(10) == data[100000:100010]
    fs.unlink(d + "/big")


def test_files_close_once(fs, d):
    f = fs.open(d + "/f", "wb")
    f.write(b"abc")
    f.close()
    f.close()
    with pytest.raises(ValueError):
        f.write(b"x")
    g = fs.open(d + "/f", "rb")
    assert fs.read_bytes(d + "/f") == b"abc"
    fs.close()  # closes g first
    assert g.closed
    with pytest.raises(ValueError):
        g.read()
    with pytest.raises(ValueError):
        fs.stat("/")


def test_sync_and_statvfs(fs, d):
    fs.write_bytes(d + "/f", b"x")
    fs.sync()
    sv = fs.statvfs()
    assert sv.f_bsize > 0 and sv.f_namemax == 255


def test_set_blob(cluster, tmp_path):
    """A blob tier of this client's own: large files' tracts land there."""
    import pomegranate
    with pomegranate.open(cluster.r2, "pomfs", keyfile=cluster.key) as fs:
        with pytest.raises(OSError) as e:
            fs.set_blob("rados", str(tmp_path))  # a folder, not rados settings
        assert e.value.errno == errno.EINVAL
        with pytest.raises(OSError) as e:
            fs.set_blob("tape", str(tmp_path))
        assert e.value.errno == errno.EINVAL
        fs.set_blob("local", str(tmp_path / "blobs"))
        path = "/" + uuid.uuid4().hex
        data = os.urandom(300 << 10)
        fs.write_bytes(path, data)
        with fs.open(path) as f:
            assert f.stat().st_size == len(data) and f.read() == data
        on_disk = sum(p.stat().st_size for p in (tmp_path / "blobs").rglob("*") if p.is_file())
        assert on_disk >= len(data)
        fs.remove(path)
        assert not fs.exists(path)
