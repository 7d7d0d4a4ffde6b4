#!/usr/bin/env python3
"""pom_blobpath.py ID -- prints where the local blob backend keeps the tract
set of ID (16 hex digits) under an fs folder: "h1/h2/ID", with h1, h2 the top
two bytes of pom_blob_hash(ID) = XXH3_64 of ID's 8 little-endian bytes with
the seed "POMBLOB!" (docs/format-blob.md "local: the locator table and the
paths"). The shell tests that write or find sets by hand use it; they check
it against the sets the client wrote."""
import struct
import sys

M = (1 << 64) - 1


def rotl(x, r):
    return ((x << r) | (x >> (64 - r))) & M


def blob_hash(u, seed=0x504f4d424c4f4221):
    b = struct.pack('<Q', u)
    sw = struct.unpack('<I', struct.pack('>I', seed & 0xffffffff))[0]
    seed = (seed ^ (sw << 32)) & M
    lo, hi = struct.unpack('<II', b)
    # XXH3 secret bytes 8..15 and 16..23, for inputs of 4..8 bytes
    h = ((hi + (lo << 32)) & M) ^ (((0x1cad21f72c81017c ^ 0xdb979083e96dd4de) - seed) & M)
    h ^= rotl(h, 49) ^ rotl(h, 24)
    h = (h * 0x9FB21C651E98DF25) & M
    h ^= (h >> 35) + 8
    h = (h * 0x9FB21C651E98DF25) & M
    return h ^ (h >> 28)


if __name__ == "__main__":
    u = int(sys.argv[1], 16)
    h = blob_hash(u)
    print('%02x/%02x/%016x' % (h >> 56, (h >> 48) & 0xff, u))
