"""KeySpace: one keyspace of a file system (pom_kv_*, docs/client.md
"Key/value API"), as a Python object that owns its pom_kv handle.

Invariants:
 (1) _h is the pom_kv handle or None once closed; close() takes it out
     before pom_kv_close, so the handle is closed exactly once.
 (2) The KeySpace holds its FileSystem (so the fs outlives it); the fs
     holds the KeySpace weakly and closes it first in its own close().
 (3) Keys and values are bytes in and out (str keys are encoded as UTF-8);
     values are copied out of the library's buffers before they are freed.
"""

import errno
import os
from collections import namedtuple

from ._native import Handle, check, ffi

KEY_MAX = 1024
VALUE_MAX = 1 << 20
ANY_VERSION = (1 << 64) - 1
_CREATE_ONLY = 1 << 0
_SYNC = 1 << 1

Entry = namedtuple("Entry", "key value version")
Entry.__doc__ = "One key of a listing: key and value as bytes, its version (0 when created)."


def _key(key):
    if isinstance(key, str):
        return key.encode("utf-8")
    return bytes(key)


# An exception here (out of memory) aborts the listing with ENOMEM, never drops an entry.
@ffi.callback("int(void *, const void *, size_t, const void *, size_t, uint64_t)",
              error=-errno.ENOMEM)
def _collect(arg, key, klen, val, vlen, version):
    out = ffi.from_handle(arg)
    out.append(Entry(ffi.buffer(key, klen)[:], ffi.buffer(val, vlen)[:], version))
    return 0


class KeySpace(Handle):
    """A keyspace (FileSystem.keyspace(name)); use as a context manager or
    close() it. Errors raise OSError with the library's errno; the mapping
    operators (kv[key], del kv[key], key in kv) raise KeyError for a
    missing key, as a dict does."""

    def __init__(self, fs, name):
        bname = name.encode("utf-8") if isinstance(name, str) else bytes(name)
        out = ffi.new("pom_kv **")
        check(fs._lib.pom_kv_open(fs._handle(), bname, out), name)
        self._fs = fs
        self._lib = fs._lib
        self._h = out[0]
        self.name = name

    def _handle(self):
        if self._h is None:
            raise ValueError("operation on a closed KeySpace")
        return self._h

    def close(self):
        """Closes the keyspace (idempotent). Changes stay applied; call
        sync() first when they must be durable."""
        h, self._h = self._h, None
        if h is not None:
            self._lib.pom_kv_close(h)
            self._fs._children.discard(self)

    # ---- single keys -----------------------------------------------------

    def put(self, key, value, *, create_only=False, sync=False):
        """Sets key to value (upsert). create_only: FileExistsError when the
        key exists; sync: returns once the change is durable."""
        k, v = _key(key), bytes(value)
        flags = (_CREATE_ONLY if create_only else 0) | (_SYNC if sync else 0)
        check(self._lib.pom_kv_put(self._handle(), k, len(k), v, len(v), flags))

    def get_versioned(self, key):
        """(value, version) of key; FileNotFoundError when absent."""
        k = _key(key)
        val = ffi.new("void **")
        vlen = ffi.new("size_t *")
        ver = ffi.new("uint64_t *")
        check(self._lib.pom_kv_get(self._handle(), k, len(k), val, vlen, ver))
        try:
            return ffi.buffer(val[0], vlen[0])[:], ver[0]
        finally:
            self._lib.pom_free(val[0])

    def get(self, key, default=None):
        """The value of key, or default when it is absent."""
        try:
            return self.get_versioned(key)[0]
        except FileNotFoundError:
            return default

    def update(self, key, value, if_version=None):
        """Replaces the value of an existing key (FileNotFoundError when
        absent), only if its version is if_version when given (OSError
        ESTALE when it is another)."""
        k, v = _key(key), bytes(value)
        ver = ANY_VERSION if if_version is None else if_version
        check(self._lib.pom_kv_update(self._handle(), k, len(k), v, len(v), ver))

    def delete(self, key, if_version=None):
        """Removes key (FileNotFoundError when absent), only if its version
        is if_version when given (OSError ESTALE when it is another)."""
        k = _key(key)
        ver = ANY_VERSION if if_version is None else if_version
        check(self._lib.pom_kv_delete(self._handle(), k, len(k), ver))

    def batch(self, ops):
        """Many operations in about one round trip (pom_kv_batch, docs/client.md
        "Key/value batches"): ops is a sequence of ("put", key, value),
        ("put", key, value, {"create_only": ..., "sync": ...}), ("get", key)
        and ("delete", key) or ("delete", key, if_version). Operations of one
        key apply in order; different keys are not atomic together. Returns
        one result per op: None for a put or delete done, (value, version)
        for a get, or the OSError the single call would raise (a missing
        key's FileNotFoundError fails only its own op). Bad input raises
        before anything is sent."""
        out = ffi.new("pom_kv_batch **")
        check(self._lib.pom_kv_batch_new(self._handle(), out))
        b = ffi.gc(out[0], self._lib.pom_kv_batch_free)
        keep = []  # the bytes the batch borrows until submit
        for op in ops:
            kind, k = op[0], _key(op[1])
            keep.append(k)
            if kind == "put":
                v = bytes(op[2])
                opts = op[3] if len(op) > 3 else {}
                flags = (_CREATE_ONLY if opts.get("create_only") else 0) | \
                    (_SYNC if opts.get("sync") else 0)
                keep.append(v)
                check(self._lib.pom_kv_batch_put(b, k, len(k), v, len(v), flags))
            elif kind == "get":
                check(self._lib.pom_kv_batch_get(b, k, len(k)))
            elif kind == "delete":
                ver = op[2] if len(op) > 2 and op[2] is not None else ANY_VERSION
                check(self._lib.pom_kv_batch_delete(b, k, len(k), ver))
            else:
                raise ValueError("unknown batch operation %r" % (kind,))
        check(self._lib.pom_kv_batch_submit(b))
        val = ffi.new("const void **")
        vlen = ffi.new("size_t *")
        ver = ffi.new("uint64_t *")
        res = []
        for i, op in enumerate(ops):
            rc = self._lib.pom_kv_batch_result(b, i, val, vlen, ver)
            if rc < 0:
                res.append(OSError(-rc, os.strerror(-rc)))
            elif op[0] == "get":
                res.append((ffi.buffer(val[0], vlen[0])[:], ver[0]))
            else:
                res.append(None)
        return res

    def sync(self):
        """Waits until every change made through any handle of this
        keyspace is committed; OSError EIO when an MDS restart lost some."""
        check(self._lib.pom_kv_sync(self._handle()))

    def stats(self):
        """What listings brought over the wire: list_calls, rows_received,
        bytes_received."""
        st = ffi.new("struct pom_kv_stats *")
        self._lib.pom_kv_get_stats(self._handle(), st)
        return {"list_calls": st.list_calls, "rows_received": st.rows_received,
                "bytes_received": st.bytes_received}

    # ---- listings ----------------------------------------------------------

    def page(self, cursor=0, limit=256, substr=None):
        """One page of the listing: (entries, next_cursor), next_cursor None
        at the end. A cursor is an int that may be kept and resumed later
        (split-stable order: no key twice, none skipped that existed all
        along; no key order). substr: only keys containing these bytes,
        matched at the MDS."""
        if cursor is None:
            raise ValueError("the listing is at its end (cursor None)")
        if limit < 1:
            raise ValueError("limit must be at least 1")
        cur = ffi.new("pom_kv_cursor *", {"pos": cursor})
        out = []
        handle = ffi.new_handle(out)
        if substr is None:
            rc = self._lib.pom_kv_list(self._handle(), cur, limit, _collect, handle)
        else:
            s = _key(substr)
            rc = self._lib.pom_kv_search(self._handle(), s, len(s), cur, limit, _collect,
                                         handle)
        check(rc)
        return out, (None if self._lib.pom_kv_cursor_done(cur) else cur.pos)

    def items(self, substr=None, batch=256):
        """Iterates over every Entry (key, value, version), batch per call."""
        cursor = 0
        while cursor is not None:
            entries, cursor = self.page(cursor, batch, substr)
            yield from entries

    def search(self, substr, batch=256):
        """Iterates over the entries whose key contains substr (non-empty)."""
        return self.items(substr=substr, batch=batch)

    # ---- the mapping protocol ---------------------------------------------

    def __getitem__(self, key):
        try:
            return self.get_versioned(key)[0]
        except FileNotFoundError:
            raise KeyError(key) from None

    def __setitem__(self, key, value):
        self.put(key, value)

    def __delitem__(self, key):
        try:
            self.delete(key)
        except FileNotFoundError:
            raise KeyError(key) from None

    def __contains__(self, key):
        try:
            self.get_versioned(key)
        except FileNotFoundError:
            return False
        return True

    def __iter__(self):
        return (e.key for e in self.items())

    def keys(self):
        return iter(self)

