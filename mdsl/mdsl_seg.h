/*
 * mdsl_seg.h -- records of append-only segment files: encode, verify, read
 * one at a known place, and scan a segment sequentially (mdsl_format.h has
 * the layout).
 *
 * Invariants:
 *  (1) A record is valid iff its header decodes (magic, known type, format,
 *      bounded length) and its checksum matches header + payload.
 *  (2) A scan delivers valid records in file order. At a bad record it looks
 *      for the next valid record after it: if there is one, the bad bytes are
 *      corruption in the middle (counted, logged, skipped; never cut); if
 *      there is none, they are a torn tail and valid_end marks where the
 *      caller cuts the file.
 */
#ifndef MDSL_SEG_H
#define MDSL_SEG_H

#include <stdbool.h>
#include <stdint.h>

#include "mdsl_format.h"
#include "mdsl_io.h"

/* Decoded header (payload_len = bytes after the header). */
struct mdsl_rec_hdr {
    uint8_t type, flags;
    uint32_t payload_len;
    uint32_t fsid;
    uint64_t txid, table, version;
    uint32_t slice, group;
    uint64_t key;
    uint64_t csum;
};

/* A manifest entry (PREPARE / GCMOVE payloads). */
struct mdsl_entry {
    uint8_t type, flags;
    uint32_t group, segno, len;
    uint64_t off, csum, version;
    uint32_t slice;
    uint64_t key;
};

static inline uint32_t mdsl_rec_total(const struct mdsl_rec_hdr *h)
{ return MDSL_HDR_SIZE + h->payload_len; }

/* Write header + payload to out (MDSL_HDR_SIZE + h->payload_len bytes);
 * computes and stores h->csum. `payload` may be NULL when payload_len is 0. */
void mdsl_seg_encode(struct mdsl_rec_hdr *h, const void *payload, uint8_t *out);
/* Decode and sanity-check a header (not the checksum): 0 or -EBADMSG. */
int mdsl_seg_decode_hdr(const uint8_t *buf, struct mdsl_rec_hdr *h);
/* Full check of a record in memory (`avail` bytes from its start):
 * 0, or -EBADMSG (corrupt) / -ENODATA (cut short). */
int mdsl_seg_verify(const uint8_t *rec, uint64_t avail, struct mdsl_rec_hdr *h);

/* Read and verify the record of `len` total bytes at `off`; if expect_csum
 * is non-zero the record's checksum must equal it. On success *rec_out
 * (header + payload, caller frees with xt_free) and *h are set.
 * -EBADMSG: corrupt or not the expected record; -EIO/-ENOMEM as usual. */
int mdsl_seg_read(mdsl_io *io, mdsl_file *f, uint64_t off, uint32_t len,
                  uint64_t expect_csum, struct mdsl_rec_hdr *h, uint8_t **rec_out);

void mdsl_seg_entry_put(uint8_t *p, const struct mdsl_entry *e);
void mdsl_seg_entry_get(const uint8_t *p, struct mdsl_entry *e);

struct mdsl_scan_res {
    uint64_t valid_end;   /* end of the last valid record (>= start) */
    uint64_t size;        /* file size seen by the scan */
    uint64_t records;     /* valid records delivered */
    uint64_t corrupt;     /* corrupt regions skipped in the middle */
};
/* Called for each valid record; `rec` (header + payload) is valid only
 * during the call. A non-zero return stops the scan and is returned. */
typedef int (*mdsl_scan_cb)(const struct mdsl_rec_hdr *h, const uint8_t *rec,
                            uint64_t off, void *arg);
int mdsl_seg_scan(mdsl_io *io, mdsl_file *f, uint64_t start, mdsl_scan_cb cb,
                  void *arg, struct mdsl_scan_res *res);

/* File names: "TSS.<n>" (is_cs false) or "CS.<group>.<n>". */
void mdsl_seg_name(char *buf, size_t n, bool is_cs, uint32_t group, uint32_t segno);
bool mdsl_seg_parse_name(const char *name, bool *is_cs, uint32_t *group, uint32_t *segno);

#endif /* MDSL_SEG_H */
