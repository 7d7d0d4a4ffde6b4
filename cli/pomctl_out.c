/*
 * pomctl_out.c -- JSON emitter, aligned tables and formatters of pomctl
 * (see pomctl_out.h for the invariants).
 *
 * The JSON emitter writes as it goes (no tree in memory); it only tracks,
 * per open object/array, whether a separator is due. Strings are checked
 * as UTF-8 while they are escaped, because names come from the network
 * and a single stray byte would make the whole document unparsable.
 */
#include "pomctl_out.h"

#include "xt_common.h"

#include <assert.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- JSON ------------------------------------------------------------- */

void pomctl_json_init(pomctl_json *j, FILE *f, bool pretty)
{
    memset(j, 0, sizeof *j);
    j->f = f;
    j->pretty = pretty;
    j->first[0] = true;
}

/* Length of the valid UTF-8 sequence at s (1..4), or 0 if s starts an
 * invalid one (overlong, surrogate, > U+10FFFF, truncated). */
static size_t utf8_seq_len(const unsigned char *s)
{
    unsigned char c = s[0];
    if (c < 0x80)
        return 1;
    size_t n;
    uint32_t cp;
    if ((c & 0xe0) == 0xc0) {
        n = 2;
        cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
        n = 3;
        cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
        n = 4;
        cp = c & 0x07;
    } else {
        return 0;
    }
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80) /* also stops at the NUL */
            return 0;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    static const uint32_t min_cp[5] = { 0, 0, 0x80, 0x800, 0x10000 };
    if (cp < min_cp[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return n;
}

void pomctl_json_escape(FILE *f, const char *s)
{
    if (!s) {
        fputs("null", f);
        return;
    }
    const unsigned char *p = (const unsigned char *)s;
    fputc('"', f);
    while (*p) {
        unsigned char c = *p;
        switch (c) {
        case '"': fputs("\\\"", f); p++; continue;
        case '\\': fputs("\\\\", f); p++; continue;
        case '\b': fputs("\\b", f); p++; continue;
        case '\f': fputs("\\f", f); p++; continue;
        case '\n': fputs("\\n", f); p++; continue;
        case '\r': fputs("\\r", f); p++; continue;
        case '\t': fputs("\\t", f); p++; continue;
        default: break;
        }
        if (c < 0x20 || c == 0x7f) {
            fprintf(f, "\\u%04x", c);
            p++;
            continue;
        }
        size_t n = utf8_seq_len(p);
        if (n == 0) {
            fputs("\\ufffd", f);
            p++;
            continue;
        }
        fwrite(p, 1, n, f);
        p += n;
    }
    fputc('"', f);
}

static void json_indent(pomctl_json *j)
{
    if (!j->pretty)
        return;
    fputc('\n', j->f);
    for (int i = 0; i < j->depth; i++)
        fputs("  ", j->f);
}

/* Writes the separator and key that come before a value. */
static void json_pre(pomctl_json *j, const char *key)
{
    assert(j->depth == 0 || (key != NULL) == j->is_obj[j->depth]);
    if (j->depth > 0) {
        if (!j->first[j->depth])
            fputc(',', j->f);
        json_indent(j);
    }
    j->first[j->depth] = false;
    if (key) {
        pomctl_json_escape(j->f, key);
        fputs(j->pretty ? ": " : ":", j->f);
    }
}

static void json_open(pomctl_json *j, const char *key, bool obj)
{
    json_pre(j, key);
    assert(j->depth + 1 < POMCTL_JSON_DEPTH);
    j->depth++;
    j->first[j->depth] = true;
    j->is_obj[j->depth] = obj;
    fputc(obj ? '{' : '[', j->f);
}

static void json_close(pomctl_json *j, bool obj)
{
    assert(j->depth > 0 && j->is_obj[j->depth] == obj);
    bool empty = j->first[j->depth];
    j->depth--;
    if (!empty)
        json_indent(j);
    fputc(obj ? '}' : ']', j->f);
}

void pomctl_json_obj_begin(pomctl_json *j, const char *key) { json_open(j, key, true); }
void pomctl_json_obj_end(pomctl_json *j) { json_close(j, true); }
void pomctl_json_arr_begin(pomctl_json *j, const char *key) { json_open(j, key, false); }
void pomctl_json_arr_end(pomctl_json *j) { json_close(j, false); }

void pomctl_json_str(pomctl_json *j, const char *key, const char *val)
{
    json_pre(j, key);
    pomctl_json_escape(j->f, val);
}

void pomctl_json_u64(pomctl_json *j, const char *key, uint64_t val)
{
    json_pre(j, key);
    fprintf(j->f, "%llu", (unsigned long long)val);
}

void pomctl_json_i64(pomctl_json *j, const char *key, int64_t val)
{
    json_pre(j, key);
    fprintf(j->f, "%lld", (long long)val);
}

void pomctl_json_double(pomctl_json *j, const char *key, double val)
{
    json_pre(j, key);
    if (!isfinite(val)) {
        fputs("null", j->f);
        return;
    }
    /* %.17g round-trips a double; trim it for readability where exact. */
    char buf[40];
    snprintf(buf, sizeof buf, "%.6g", val);
    if (strtod(buf, NULL) != val)
        snprintf(buf, sizeof buf, "%.17g", val);
    fputs(buf, j->f);
}

void pomctl_json_bool(pomctl_json *j, const char *key, bool val)
{
    json_pre(j, key);
    fputs(val ? "true" : "false", j->f);
}

void pomctl_json_null(pomctl_json *j, const char *key)
{
    json_pre(j, key);
    fputs("null", j->f);
}

void pomctl_json_finish(pomctl_json *j)
{
    assert(j->depth == 0);
    fputc('\n', j->f);
}

/* ---- tables ----------------------------------------------------------- */

struct pomctl_table {
    size_t ncols;
    char **headers;          /* ncols strings */
    char *align;             /* ncols chars 'l'/'r' */
    char **cells;            /* nrows * ncols, NULL for a missing cell */
    size_t nrows, cap_rows;
    size_t next_col;         /* next cell of the last row; ncols when full */
};

size_t pomctl_utf8_width(const char *s)
{
    size_t w = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if ((*p & 0xc0) != 0x80)
            w++;
    return w;
}

pomctl_table *pomctl_table_new(size_t ncols, const char *const *headers, const char *align)
{
    assert(ncols > 0);
    pomctl_table *t = xt_calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->ncols = ncols;
    t->next_col = ncols;
    t->headers = xt_calloc(ncols, sizeof *t->headers);
    t->align = xt_malloc(ncols);
    if (!t->headers || !t->align)
        goto fail;
    for (size_t c = 0; c < ncols; c++) {
        if (!(t->headers[c] = xt_strdup(headers[c])))
            goto fail;
        t->align[c] = (align && align[c] == 'r') ? 'r' : 'l';
    }
    return t;
fail:
    pomctl_table_free(t);
    return NULL;
}

void pomctl_table_free(pomctl_table *t)
{
    if (!t)
        return;
    if (t->headers)
        for (size_t c = 0; c < t->ncols; c++)
            xt_free(t->headers[c]);
    for (size_t i = 0; i < t->nrows * t->ncols; i++)
        xt_free(t->cells[i]);
    xt_free(t->cells);
    xt_free(t->headers);
    xt_free(t->align);
    xt_free(t);
}

int pomctl_table_row(pomctl_table *t)
{
    if (t->nrows == t->cap_rows) {
        size_t cap = t->cap_rows ? t->cap_rows * 2 : 8;
        char **cells = xt_realloc(t->cells, cap * t->ncols * sizeof *cells);
        if (!cells)
            return -ENOMEM;
        t->cells = cells;
        t->cap_rows = cap;
    }
    memset(&t->cells[t->nrows * t->ncols], 0, t->ncols * sizeof *t->cells);
    t->nrows++;
    t->next_col = 0;
    return 0;
}

int pomctl_table_cell(pomctl_table *t, const char *fmt, ...)
{
    if (t->nrows == 0 || t->next_col >= t->ncols)
        return -EINVAL;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return -EINVAL;
    char *s = xt_malloc((size_t)n + 1);
    if (!s)
        return -ENOMEM;
    va_start(ap, fmt);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    va_end(ap);
    t->cells[(t->nrows - 1) * t->ncols + t->next_col++] = s;
    return 0;
}

size_t pomctl_table_nrows(const pomctl_table *t)
{
    return t->nrows;
}

static void print_line(const pomctl_table *t, FILE *f, unsigned indent, char *const *cells,
                       const size_t *width)
{
    /* Spaces are owed, not written, until text follows them: a line never
     * ends with a space (invariant 2), whatever the alignment or the
     * missing cells. */
    size_t owed = indent;
    for (size_t c = 0; c < t->ncols; c++) {
        const char *s = cells[c] ? cells[c] : "";
        size_t pad = width[c] - pomctl_utf8_width(s);
        if (t->align[c] == 'r')
            owed += pad;
        if (*s) {
            fprintf(f, "%*s", (int)owed, "");
            fputs(s, f);
            owed = 0;
        }
        if (t->align[c] == 'l')
            owed += pad;
        owed += 2;
    }
    fputc('\n', f);
}

void pomctl_table_print(const pomctl_table *t, FILE *f, unsigned indent)
{
    size_t width[64];
    size_t *w = t->ncols <= XT_ARRAY_SIZE(width) ? width : xt_calloc(t->ncols, sizeof *w);
    if (!w)
        return;
    for (size_t c = 0; c < t->ncols; c++) {
        w[c] = pomctl_utf8_width(t->headers[c]);
        for (size_t r = 0; r < t->nrows; r++) {
            const char *s = t->cells[r * t->ncols + c];
            if (s && pomctl_utf8_width(s) > w[c])
                w[c] = pomctl_utf8_width(s);
        }
    }
    print_line(t, f, indent, t->headers, w);
    for (size_t r = 0; r < t->nrows; r++)
        print_line(t, f, indent, &t->cells[r * t->ncols], w);
    if (w != width)
        xt_free(w);
}

/* ---- formatters ------------------------------------------------------- */

const char *pomctl_fmt_bytes(uint64_t n, char *buf, size_t cap)
{
    static const char *units[] = { "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
    if (n < 1024) {
        snprintf(buf, cap, "%llu B", (unsigned long long)n);
        return buf;
    }
    double v = (double)n;
    size_t u = 0;
    v /= 1024;
    while (v >= 1024 && u + 1 < XT_ARRAY_SIZE(units)) {
        v /= 1024;
        u++;
    }
    snprintf(buf, cap, "%.1f %s", v, units[u]);
    return buf;
}

const char *pomctl_fmt_age(uint64_t now_ns, uint64_t then_ns, char *buf, size_t cap)
{
    if (then_ns == 0) {
        snprintf(buf, cap, "-");
        return buf;
    }
    uint64_t d = now_ns > then_ns ? now_ns - then_ns : 0;
    uint64_t s = d / 1000000000u;
    if (s < 10)
        snprintf(buf, cap, "%.1fs", (double)d / 1e9);
    else if (s < 60)
        snprintf(buf, cap, "%llus", (unsigned long long)s);
    else if (s < 3600)
        snprintf(buf, cap, "%llum%02llus", (unsigned long long)(s / 60),
                 (unsigned long long)(s % 60));
    else if (s < 86400)
        snprintf(buf, cap, "%lluh%02llum", (unsigned long long)(s / 3600),
                 (unsigned long long)(s % 3600 / 60));
    else
        snprintf(buf, cap, "%llud%02lluh", (unsigned long long)(s / 86400),
                 (unsigned long long)(s % 86400 / 3600));
    return buf;
}

const char *pomctl_fmt_time(uint64_t ns, char *buf, size_t cap)
{
    if (ns == 0) {
        snprintf(buf, cap, "-");
        return buf;
    }
    time_t t = (time_t)(ns / 1000000000u);
    struct tm tm;
    if (!gmtime_r(&t, &tm) || strftime(buf, cap, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
        snprintf(buf, cap, "?");
    return buf;
}

const char *pomctl_fmt_count(uint64_t n, char *buf, size_t cap)
{
    char digits[24], out[32];
    int nd = snprintf(digits, sizeof digits, "%llu", (unsigned long long)n);
    size_t o = 0;
    for (int i = 0; i < nd; i++) {
        if (i > 0 && (nd - i) % 3 == 0)
            out[o++] = ',';
        out[o++] = digits[i];
    }
    out[o] = '\0';
    snprintf(buf, cap, "%s", out);
    return buf;
}
