"""Python binding of libpomegranate, the client library of the Pomegranate
file system (docs/python.md): the key/value API and the file calls, over
the installed libpomegranate.so through cffi (ABI mode).

    import pomegranate
    with pomegranate.open("127.0.0.1:7000", "pomfs",
                          keyfile="~/.pomegranate/cluster.key") as fs:
        with fs.keyspace("example") as kv:
            kv.put(b"apple", b"red")
            print(kv.get(b"apple"))
        with fs.open("/hello.txt", "w") as f:
            f.write(b"hello")

Errors of the library raise OSError(errno, strerror) (FileNotFoundError,
FileExistsError, ... by errno).
"""

from ._fs import DirEntry, File, FileSystem
from ._kv import ANY_VERSION, KEY_MAX, VALUE_MAX, Entry, KeySpace
from ._native import library_path, load_library

__all__ = ["open", "FileSystem", "File", "DirEntry", "KeySpace", "Entry", "KEY_MAX",
           "VALUE_MAX", "ANY_VERSION", "load_library", "library_path"]
__version__ = "0.1.0"


def open(addrs, fs="pomfs", *, keyfile=None, call_timeout_ms=0, retry_ms=0, soft_ms=0,
         tls_ca=None, tls_cert=None, tls_key=None, lib=None):
    """Opens a file system: a FileSystem.

    addrs: R2 addresses "host:port[,host:port...]" when fs is a name (str or
    bytes), or one MDS "host:port" when fs is an fsid (int). keyfile: the
    cluster key or a client key of the fs (docs/security.md); a wrong one
    raises OSError EKEYREJECTED, none where one is needed ENOKEY.
    call_timeout_ms, retry_ms, soft_ms: struct pom_opts (0: the defaults).
    tls_ca, tls_cert, tls_key: PEM paths for a cluster that runs TLS, all
    three or none (docs/security.md "TLS").
    lib: the path of libpomegranate.so (else POMEGRANATE_LIB, pkg-config,
    the loader's search: load_library).
    """
    return FileSystem(addrs, fs, keyfile=keyfile, call_timeout_ms=call_timeout_ms,
                      retry_ms=retry_ms, soft_ms=soft_ms, tls_ca=tls_ca, tls_cert=tls_cert,
                      tls_key=tls_key, lib=lib)
