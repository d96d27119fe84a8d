/* Text helpers of the Fetch walker (_cstored.c): strict UTF-8, base64, the headers JSON.
 * Interfaces in _cstored_text.h. */
#include "_cstored_text.h"

#include <stdlib.h>

int cs_buf_reserve(buf_t *b, Py_ssize_t more) {
    if (b->len + more <= b->cap)
        return 0;
    Py_ssize_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + more)
        cap *= 2;
    unsigned char *p = realloc(b->p, (size_t)cap);
    if (p == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    b->p = p;
    b->cap = cap;
    return 0;
}

/* Strict UTF-8 (what Python's decoder accepts): 1 if valid. */
int cs_valid_utf8(const unsigned char *s, Py_ssize_t n) {
    Py_ssize_t i = 0;
    while (n - i >= 32) {       /* ASCII runs 32 bytes at a time (properties are mostly ASCII) */
        uint64_t w[4];
        memcpy(w, s + i, 32);
        if ((w[0] | w[1] | w[2] | w[3]) & 0x8080808080808080ULL)
            break;
        i += 32;
    }
    while (i < n) {
        if (n - i >= 8) {
            uint64_t w;
            memcpy(&w, s + i, 8);
            if (!(w & 0x8080808080808080ULL)) {
                i += 8;
                continue;
            }
        }
        unsigned char c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        int len;
        uint32_t cp;
        if (c >= 0xC2 && c <= 0xDF) {
            len = 2;
            cp = c & 0x1F;
        } else if (c >= 0xE0 && c <= 0xEF) {
            len = 3;
            cp = c & 0x0F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            len = 4;
            cp = c & 0x07;
        } else {
            return 0;
        }
        if (n - i < len)
            return 0;
        for (int k = 1; k < len; k++) {
            if ((s[i + k] & 0xC0) != 0x80)
                return 0;
            cp = (cp << 6) | (s[i + k] & 0x3F);
        }
        if ((len == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
            return 0;
        i += len;
    }
    return 1;
}

/* -- base64 and the KAFKA_HEADERS JSON ---------------------------------------------------------- */

/* Base64 alphabet -> 6-bit value; 0x40 for '=' and 0x80 for anything else (filled by the module).
 * D0..D3: the value already shifted to its place in a quantum's 24 bits, bit 31 for anything that is
 * not one of the 64 (a quantum is the OR of four lookups). */
static unsigned char B64[256];
static uint32_t D0[256], D1[256], D2[256], D3[256];

void cs_b64_init(void) {
    memset(B64, 0x80, sizeof(B64));
    for (int c = 0; c < 256; c++)
        D0[c] = D1[c] = D2[c] = D3[c] = 0x80000000u;
    const char *abc = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (uint32_t i = 0; i < 64; i++) {
        unsigned char c = (unsigned char)abc[i];
        B64[c] = (unsigned char)i;
        D0[c] = i << 18;
        D1[c] = i << 12;
        D2[c] = i << 6;
        D3[c] = i;
    }
    B64['='] = 0x40;
}

/* Decoded length of base64 of canonical shape (length a multiple of 4, '=' only as its last one
 * or two), or -1; the characters themselves are checked by b64_decode. */
Py_ssize_t cs_b64_len(const unsigned char *s, Py_ssize_t n) {
    if (n % 4)
        return -1;
    Py_ssize_t pad = 0;
    if (n && s[n - 1] == '=')
        pad = s[n - 2] == '=' ? 2 : 1;
    return n / 4 * 3 - pad;
}

/* Decode base64 of b64_len's shape into out: 0, or -1 if a character is not base64. */
int cs_b64_decode(const unsigned char *s, Py_ssize_t n, unsigned char *out) {
    uint32_t bad = 0;
    Py_ssize_t i = 0, full = n >= 4 && s[n - 1] == '=' ? n - 4 : n;
    for (; i < full; i += 4) {
        uint32_t v = D0[s[i]] | D1[s[i + 1]] | D2[s[i + 2]] | D3[s[i + 3]];
        bad |= v;
        out[0] = (unsigned char)(v >> 16);
        out[1] = (unsigned char)(v >> 8);
        out[2] = (unsigned char)v;
        out += 3;
    }
    if (bad & 0x80000000u)
        return -1;
    if (i < n) {                /* the padded quantum: "xy==" or "xyz=" */
        unsigned a = B64[s[i]], b = B64[s[i + 1]], c = s[i + 2] == '=' ? 0 : B64[s[i + 2]];
        if ((a | b | c) & 0xC0)
            return -1;
        uint32_t v = (a << 18) | (b << 12) | (c << 6);
        out[0] = (unsigned char)(v >> 16);
        if (s[i + 2] != '=')
            out[1] = (unsigned char)(v >> 8);
    }
    return 0;
}

static int hex4(const unsigned char *s, uint32_t *out) {
    uint32_t v = 0;
    for (int k = 0; k < 4; k++) {
        unsigned char c = s[k];
        int d = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10
                : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : -1;
        if (d < 0)
            return -1;
        v = (v << 4) | (uint32_t)d;
    }
    *out = v;
    return 0;
}

static int put_utf8(unsigned char *o, uint32_t cp) {
    if (cp < 0x80) {
        o[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (unsigned char)(0xC0 | (cp >> 6));
        o[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xE0 | (cp >> 12));
        o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | (cp >> 18));
    o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

/* A JSON string at s[*i] (after its opening quote) as a header name: its UTF-8 bytes (the name
 * ``str.encode("utf-8", "surrogateescape")`` gives) appended to b, *i past the closing quote.
 * 0 ok, -1 not mapped here, -2 no memory. */
static int json_name(const unsigned char *s, Py_ssize_t n, Py_ssize_t *i, int ascii_only, buf_t *b) {
    Py_ssize_t p = *i;
    if (cs_buf_reserve(b, n - p) < 0)      /* a name never decodes to more bytes than its JSON text */
        return -2;
    unsigned char hi = ascii_only ? 0x80 : 0;
    for (;;) {
        Py_ssize_t run = p;
        while (run < n && s[run] != '"' && s[run] != '\\' && s[run] >= 0x20 && !(s[run] & hi))
            run++;
        memcpy(b->p + b->len, s + p, (size_t)(run - p));
        b->len += run - p;
        p = run;
        if (p >= n)
            return -1;
        unsigned char c = s[p];
        if (c == '"')
            break;
        if (c != '\\')
            return -1;                  /* a control character, or not ASCII in an envelope */
        if (p + 1 >= n)
            return -1;
        unsigned char e = s[p + 1];
        const char *simple = strchr("\"\\/bfnrt", e);
        if (e && simple != NULL) {
            static const unsigned char to[] = {'"', '\\', '/', '\b', '\f', '\n', '\r', '\t'};
            b->p[b->len++] = to[simple - "\"\\/bfnrt"];
            p += 2;
            continue;
        }
        uint32_t cp, lo;
        if (e != 'u' || p + 6 > n || hex4(s + p + 2, &cp) < 0)
            return -1;
        p += 6;
        if (cp >= 0xD800 && cp <= 0xDBFF) {          /* a pair, or not mapped here */
            if (p + 6 > n || s[p] != '\\' || s[p + 1] != 'u' || hex4(s + p + 2, &lo) < 0 || lo < 0xDC00 || lo > 0xDFFF)
                return -1;
            p += 6;
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        } else if (cp >= 0xDC00 && cp <= 0xDFFF) {   /* lone low surrogate: surrogateescape's byte */
            if (cp < 0xDC80 || cp > 0xDCFF)
                return -1;
            b->p[b->len++] = (unsigned char)(cp - 0xDC00);
            continue;
        }
        b->len += put_utf8(b->p + b->len, cp);
    }
    *i = p + 1;
    return 0;
}

/* Compact KAFKA_HEADERS JSON -> Kafka header entries appended to b, *count of them; *keys_header
 * set if a header is named ``keys_name`` (rocketmq.KEYS).  0 ok, -1 not mapped here, -2 no memory. */
int cs_json_headers(const unsigned char *s, Py_ssize_t n, int ascii_only, buf_t *b, int64_t *count,
                        span_t keys_name, int *keys_header) {
    Py_ssize_t i = 1;
    *count = 0;
    if (n < 2 || s[0] != '[')
        return -1;
    if (s[1] == ']')
        return n == 2 ? 0 : -1;
    /* Every entry takes at least 9 characters (["",null]) and adds at most 10 bytes of varints to
     * what it decodes to (no more than its text): 3n covers the lot, reserved once. */
    if (cs_buf_reserve(b, 3 * n + 16) < 0)
        return -2;
    for (;;) {
        if (i + 2 > n || s[i] != '[' || s[i + 1] != '"')
            return -1;
        i += 2;
        Py_ssize_t at = b->len, run = i;
        unsigned char hi = ascii_only ? 0x80 : 0;
        while (run < n && s[run] != '"' && s[run] != '\\' && s[run] >= 0x20 && !(s[run] & hi))
            run++;
        if (run < n && s[run] == '"') {                 /* a name without escapes: as it is */
            Py_ssize_t nlen = run - i;
            b->len += put_varlong(b->p + b->len, (int64_t)nlen);
            memcpy(b->p + b->len, s + i, (size_t)nlen);
            if (span_eq(keys_name, s + i, nlen))
                *keys_header = 1;
            b->len += nlen;
            i = run + 1;
        } else {
            b->len += 5;                                /* room for the name's length */
            int rc = json_name(s, n, &i, ascii_only, b);
            if (rc < 0)
                return rc;
            Py_ssize_t nlen = b->len - at - 5;
            if (span_eq(keys_name, b->p + at + 5, nlen))
                *keys_header = 1;
            unsigned char vl[10];
            int k = put_varlong(vl, (int64_t)nlen);
            memcpy(b->p + at, vl, (size_t)k);
            memmove(b->p + at + k, b->p + at + 5, (size_t)nlen);
            b->len -= 5 - k;
        }
        if (i >= n || s[i] != ',')
            return -1;
        i++;
        if (n - i >= 4 && memcmp(s + i, "null", 4) == 0) {
            b->p[b->len++] = 1;                         /* -1: a null value */
            i += 4;
        } else {
            if (i >= n || s[i] != '"')
                return -1;
            const unsigned char *q = memchr(s + i + 1, '"', (size_t)(n - i - 1));
            if (q == NULL)
                return -1;
            Py_ssize_t vn = q - (s + i + 1), dl = cs_b64_len(s + i + 1, vn);
            if (dl < 0)
                return -1;
            b->len += put_varlong(b->p + b->len, (int64_t)dl);
            if (cs_b64_decode(s + i + 1, vn, b->p + b->len) < 0)
                return -1;
            b->len += dl;
            i += vn + 2;
        }
        if (i >= n || s[i] != ']')
            return -1;
        i++;
        (*count)++;
        if (i < n && s[i] == ',') {
            i++;
            continue;
        }
        return (i + 1 == n && s[i] == ']') ? 0 : -1;
    }
}

