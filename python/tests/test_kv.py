"""The key/value API through the binding, against a real cluster."""

import errno
import os

import pytest

import pomegranate


def test_put_get_versions(kv):
    kv.put(b"apple", b"red")
    assert kv.get_versioned(b"apple") == (b"red", 0)
    kv.put("apple", b"green")  # str keys are their UTF-8 bytes
    assert kv.get_versioned(b"apple") == (b"green", 1)
    assert kv.get(b"apple") == b"green"
    kv.put(b"empty", b"")
    assert kv.get(b"empty") == b""
    assert kv.get(b"missing") is None
    assert kv.get(b"missing", b"dflt") == b"dflt"
    with pytest.raises(FileNotFoundError) as e:
        kv.get_versioned(b"missing")
    assert e.value.errno == errno.ENOENT


def test_create_only_and_sync(kv):
    kv.put(b"k", b"1", create_only=True)
    with pytest.raises(FileExistsError):
        kv.put(b"k", b"2", create_only=True)
    assert kv.get(b"k") == b"1"
    kv.put(b"k", b"3", sync=True)
    kv.sync()
    assert kv.get(b"k") == b"3"


def test_update_and_delete_if_version(kv):
    with pytest.raises(FileNotFoundError):
        kv.update(b"k", b"x")
    kv.put(b"k", b"a")
    _, ver = kv.get_versioned(b"k")
    kv.update(b"k", b"b", if_version=ver)
    with pytest.raises(OSError) as e:
        kv.update(b"k", b"c", if_version=ver)
    assert e.value.errno == errno.ESTALE
    kv.update(b"k", b"d")
    assert kv.get_versioned(b"k") == (b"d", ver + 2)
    with pytest.raises(OSError) as e:
        kv.delete(b"k", if_version=ver)
    assert e.value.errno == errno.ESTALE
    kv.delete(b"k", if_version=ver + 2)
    with pytest.raises(FileNotFoundError):
        kv.delete(b"k")


def test_mapping_protocol(kv):
    kv[b"a"] = b"1"
    kv["b"] = bytearray(b"2")
    assert kv[b"a"] == b"1" and kv[b"b"] == b"2"
    assert b"a" in kv and b"zz" not in kv
    assert sorted(kv) == sorted(kv.keys()) == [b"a", b"b"]
    del kv[b"a"]
    with pytest.raises(KeyError):
        kv[b"a"]
    with pytest.raises(KeyError):
        del kv[b"a"]


def test_list_pages_and_search(kv):
    keys = {b"key-%04d" % i: b"value %d" % i for i in range(300)}
    keys[b"needle-1"] = b"n1"
    keys[b"a-needle-2"] = b"n2"
    for k, v in keys.items():
        kv.put(k, v)
    seen = {e.key: e.value for e in kv.items(batch=37)}
    assert seen == keys  # every key once (a dict would hide doubles: count too)
    assert len(list(kv.items(batch=37))) == len(keys)
    # A cursor is resumable: page by hand and compare.
    got, cursor, pages = [], 0, 0
    while cursor is not None:
        entries, cursor = kv.page(cursor, limit=100)
        assert len(entries) <= 100
        got += entries
        pages += 1
    assert pages >= 4 and sorted(e.key for e in got) == sorted(keys)
    with pytest.raises(ValueError):
        kv.page(0, limit=0)
    assert all(e.version == 0 for e in got)
    found = sorted(e.key for e in kv.search(b"needle"))
    assert found == [b"a-needle-2", b"needle-1"]
    assert list(kv.search("no such")) == []
    st = kv.stats()
    assert st["list_calls"] > 0 and st["rows_received"] >= len(keys)
    with pytest.raises(OSError) as e:
        list(kv.search(b""))
    assert e.value.errno == errno.EINVAL


def test_large_values_and_limits(kv):
    big = os.urandom(pomegranate.VALUE_MAX)  # 1 MiB: past the 64 KiB inline size
    kv.put(b"big", big)
    assert kv.get(b"big") == big
    mid = os.urandom(200 << 10)
    kv.put(b"mid", mid)
    assert kv.get(b"mid") == mid
    with pytest.raises(OSError) as e:
        kv.put(b"too big", big + b"x")
    assert e.value.errno == errno.EFBIG
    long_key = b"k" * pomegranate.KEY_MAX
    kv.put(long_key, b"v")
    assert kv.get(long_key) == b"v"
    with pytest.raises(OSError) as e:
        kv.put(long_key + b"k", b"v")
    assert e.value.errno == errno.ENAMETOOLONG
    with pytest.raises(OSError) as e:
        kv.put(b"", b"v")
    assert e.value.errno == errno.EINVAL
    with pytest.raises(OSError) as e:
        kv.put(b"\x00\xffsys", b"v")  # reserved for the MDS's system rows
    assert e.value.errno == errno.EINVAL
    binary = bytes(range(256))
    kv.put(binary, binary)
    assert kv.get(binary) == binary


def test_keyspace_names_and_sharing(cluster, fs):
    with pytest.raises(OSError) as e:
        fs.keyspace("x" * 201)
    assert e.value.errno == errno.ENAMETOOLONG
    with pytest.raises(OSError) as e:
        fs.keyspace("")
    assert e.value.errno == errno.EINVAL
    with fs.keyspace("shared") as a:
        a.put(b"k", b"from a")
        # A second client, straight at the MDS by fsid, sees the same keyspace.
        with pomegranate.open(cluster.mds_addr(), fs.fsid, keyfile=cluster.key) as fs2:
            with fs2.keyspace(b"shared") as b:
                assert b.get(b"k") == b"from a"
        with fs.keyspace("other") as o:
            assert o.get(b"k") is None


def test_handles_close_once(cluster):
    fs = pomegranate.open(cluster.r2, "pomfs", keyfile=cluster.key)
    kv = fs.keyspace("closing")
    kv.put(b"k", b"v")
    kv.close()
    kv.close()
    assert kv.closed
    with pytest.raises(ValueError):
        kv.get(b"k")
    kv2 = fs.keyspace("closing")
    fs.close()  # closes kv2 first
    assert kv2.closed and fs.closed
    with pytest.raises(ValueError):
        kv2.get(b"k")
    with pytest.raises(ValueError):
        fs.keyspace("closing")
    fs.close()
    # Dropped without close: the collector frees the keyspace before the fs.
    fs = pomegranate.open(cluster.r2, "pomfs", keyfile=cluster.key)
    fs.keyspace("closing")
    del fs


def test_open_errors(cluster, tmp_path):
    with pytest.raises(FileNotFoundError) as e:
        pomegranate.open(cluster.r2, "no-such-fs", keyfile=cluster.key)
    assert "no-such-fs" in str(e.value)
    wrong = tmp_path / "wrong.key"
    wrong.write_text(os.urandom(32).hex() + "\n")
    wrong.chmod(0o600)
    with pytest.raises(OSError) as e:
        pomegranate.open(cluster.r2, "pomfs", keyfile=str(wrong))
    assert e.value.errno == errno.EKEYREJECTED
    assert e.value.filename == str(wrong) and "rejected" in str(e.value)
    with pytest.raises(FileNotFoundError) as e:
        pomegranate.open(cluster.r2, "pomfs", keyfile=str(tmp_path / "absent.key"))
    assert e.value.filename == str(tmp_path / "absent.key")
    with pytest.raises(OSError) as e:
        pomegranate.open(cluster.r2, "pomfs")  # the cluster has a key: none is refused
    assert e.value.errno == errno.ENOKEY
    with pytest.raises(OSError) as e:
        pomegranate.open("not an address", "pomfs", keyfile=cluster.key)
    assert e.value.errno == errno.EINVAL


def test_threads_share_a_keyspace(kv):
    """The library's handles are thread-safe and cffi drops the GIL in calls."""
    import threading

    def worker(t):
        for i in range(50):
            kv.put(b"t%d-%d" % (t, i), b"%d" % i)
    threads = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert sorted(kv) == sorted(b"t%d-%d" % (t, i) for t in range(4) for i in range(50))


def test_batch(kv):
    kv.put(b"old", b"o")
    res = kv.batch([("put", b"a", b"1"), ("get", b"a"), ("put", b"a", b"22"),
                    ("get", b"a"), ("get", b"missing"),
                    ("put", b"old", b"x", {"create_only": True}),
                    ("delete", b"old", 5), ("delete", "a"), ("get", b"a")])
    assert res[0] is None and res[2] is None and res[7] is None
    assert res[1] == (b"1", 0) and res[3] == (b"22", 1)
    assert isinstance(res[4], FileNotFoundError)
    assert isinstance(res[5], FileExistsError)
    assert isinstance(res[6], OSError) and res[6].errno == errno.ESTALE
    assert isinstance(res[8], FileNotFoundError)
    assert kv.get(b"old") == b"o" and kv.get(b"a") is None
    with pytest.raises(OSError) as e:
        kv.batch([("get", b"")])
    assert e.value.errno == errno.EINVAL
    assert kv.batch([]) == []
