/*
 * pomctl_out.h -- what pomctl prints: aligned tables for people, JSON for
 * scripts, and the small formatters (sizes, ages, times) both share.
 *
 * Pure code: no RPC, no global state, so tests/cli/test_pomctl_out.c checks
 * it byte for byte.
 *
 * Invariants:
 *  (1) The JSON emitter always writes valid JSON (RFC 8259) whatever the
 *      input strings hold: '"', '\\' and every control byte are escaped,
 *      invalid UTF-8 bytes become U+FFFD, NaN and infinities become null.
 *      A caller that nests begin/end calls in order gets one value.
 *  (2) A table prints every row with the same column starts: a column is as
 *      wide as its widest cell (in UTF-8 code points), columns are separated
 *      by two spaces, and no line ends with a space.
 */
#ifndef POMCTL_OUT_H
#define POMCTL_OUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* ---- JSON ------------------------------------------------------------- */

#define POMCTL_JSON_DEPTH 16

/* An emitter over a stream. Plain struct (no heap): lives on the caller's
 * stack; `f` must outlive it. */
typedef struct pomctl_json {
    FILE *f;
    int depth;                        /* open objects/arrays */
    bool first[POMCTL_JSON_DEPTH];    /* nothing written yet at this depth */
    bool is_obj[POMCTL_JSON_DEPTH];   /* object (keys) or array */
    bool pretty;                      /* newline + 2-space indent */
} pomctl_json;

void pomctl_json_init(pomctl_json *j, FILE *f, bool pretty);
/* Writes s as a JSON string literal with its quotes (invariant 1). s NULL
 * writes null. */
void pomctl_json_escape(FILE *f, const char *s);

/* Every value call takes `key`: the member name inside an object, NULL
 * inside an array or for the top-level value.
 * REQUIRES: key != NULL exactly when the innermost open value is an object;
 * depth stays below POMCTL_JSON_DEPTH. */
void pomctl_json_obj_begin(pomctl_json *j, const char *key);
void pomctl_json_obj_end(pomctl_json *j);
void pomctl_json_arr_begin(pomctl_json *j, const char *key);
void pomctl_json_arr_end(pomctl_json *j);
void pomctl_json_str(pomctl_json *j, const char *key, const char *val);
void pomctl_json_u64(pomctl_json *j, const char *key, uint64_t val);
void pomctl_json_i64(pomctl_json *j, const char *key, int64_t val);
void pomctl_json_double(pomctl_json *j, const char *key, double val);
void pomctl_json_bool(pomctl_json *j, const char *key, bool val);
void pomctl_json_null(pomctl_json *j, const char *key);
/* Ends the top-level value with a newline. REQUIRES: depth == 0. */
void pomctl_json_finish(pomctl_json *j);

/* ---- tables ----------------------------------------------------------- */

typedef struct pomctl_table pomctl_table;

/* A table with ncols columns. headers: ncols strings (copied). align: one
 * char per column, 'l' or 'r' (copied; NULL: all left). Caller frees with
 * pomctl_table_free. NULL on ENOMEM. */
pomctl_table *pomctl_table_new(size_t ncols, const char *const *headers, const char *align);
void pomctl_table_free(pomctl_table *t); /* NULL is a no-op */
/* Starts a new row; cells are then added left to right. 0 or -ENOMEM. */
int pomctl_table_row(pomctl_table *t);
/* Appends a printf-formatted cell to the current row. 0, -ENOMEM, or
 * -EINVAL when the row is already full or no row was started. */
int pomctl_table_cell(pomctl_table *t, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
size_t pomctl_table_nrows(const pomctl_table *t);
/* Prints header and rows (invariant 2); missing cells print empty. Each
 * line is prefixed with `indent` spaces. */
void pomctl_table_print(const pomctl_table *t, FILE *f, unsigned indent);

/* Display width of a UTF-8 string: code points (continuation bytes do not
 * count). */
size_t pomctl_utf8_width(const char *s);

/* ---- formatters: write into buf (cap bytes, NUL-terminated), return buf - */

/* 0 -> "0 B", 1536 -> "1.5 KiB", 1073741824 -> "1.0 GiB". */
const char *pomctl_fmt_bytes(uint64_t n, char *buf, size_t cap);
/* Age of an event at `then_ns` seen at `now_ns` (same clock): "0.4s",
 * "12s", "3m05s", "2h01m", "4d03h"; "-" when then_ns is 0; "0.0s" when the
 * clocks disagree (then > now). */
const char *pomctl_fmt_age(uint64_t now_ns, uint64_t then_ns, char *buf, size_t cap);
/* Wall time in UTC, "2024-05-01T12:00:00Z"; "-" for 0. */
const char *pomctl_fmt_time(uint64_t ns, char *buf, size_t cap);
/* A count with thousands separators: 12345 -> "12,345" (progress lines). */
const char *pomctl_fmt_count(uint64_t n, char *buf, size_t cap);

#endif /* POMCTL_OUT_H */
