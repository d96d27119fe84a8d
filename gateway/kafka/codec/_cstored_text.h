/* Text helpers of _cstored.c (the Fetch walker): strict UTF-8, base64, the headers JSON.
 *
 * Shared by _cstored.c and _cstored_text.c (one extension); see _cstored.c's header comment for
 * the canonical forms these accept.  Each returns "not mapped here" (-1) for anything else, so the
 * caller leaves the record to its Python mapping.
 */
#ifndef ROKKA_CSTORED_TEXT_H
#define ROKKA_CSTORED_TEXT_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* A growable byte buffer (a record's key and headers). */
typedef struct {
    unsigned char *p;
    Py_ssize_t len, cap;
} buf_t;

typedef struct {
    const unsigned char *p;
    Py_ssize_t n;
} span_t;

static inline int span_eq(span_t a, const unsigned char *p, Py_ssize_t n) {
    return a.n == n && memcmp(a.p, p, (size_t)n) == 0;
}

/* Zig-zag varint (64-bit) of v at out; returns the bytes written (at most 10). */
static inline int put_varlong(unsigned char *out, int64_t v) {
    uint64_t z = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
    int n = 0;
    while (z >= 0x80) {
        out[n++] = (unsigned char)(z | 0x80);
        z >>= 7;
    }
    out[n++] = (unsigned char)z;
    return n;
}

/* Room for ``more`` bytes after b->len: 0, or -1 with MemoryError set. */
int cs_buf_reserve(buf_t *b, Py_ssize_t more);
/* 1 if s[0:n] is UTF-8 as Python's strict decoder takes it. */
int cs_valid_utf8(const unsigned char *s, Py_ssize_t n);
/* Fill the base64 table (once, at module init). */
void cs_b64_init(void);
/* Decoded length of base64 of canonical shape (length a multiple of 4, '=' only last), or -1. */
Py_ssize_t cs_b64_len(const unsigned char *s, Py_ssize_t n);
/* Decode base64 of cs_b64_len's shape into out: 0, or -1 if a character is not base64. */
int cs_b64_decode(const unsigned char *s, Py_ssize_t n, unsigned char *out);
/* Compact headers JSON ``[[name, base64-or-null], ...]`` -> Kafka header entries appended to b and
 * their *count; *keys_header set if a name equals keys_name.  ASCII only if ascii_only.
 * 0 ok, -1 not mapped here, -2 no memory (MemoryError set). */
int cs_json_headers(const unsigned char *s, Py_ssize_t n, int ascii_only, buf_t *b, int64_t *count,
                    span_t keys_name, int *keys_header);

#endif
