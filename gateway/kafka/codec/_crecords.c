/* Native helper for the Produce hot path (optional: records.py has the same in Python).
 *
 * Theory of operation
 * -------------------
 * ``plain_values(payload, count, base_timestamp, keyed)`` walks the ``count`` uncompressed v2
 * records of a batch (length varint, attributes int8, timestamp delta varlong, offset delta varint,
 * key, value, header count; varints zig-zag encoded) and returns ``(values, timestamps, keys)`` --
 * the value bytes, the absolute CreateTime of each record and (``keyed``) the key bytes, else None
 * -- when every record is *plain*: attributes 0, a null key (or, ``keyed``, a non-null key),
 * non-null value, no headers.  Anything else, including any malformation, returns None: the
 * caller then takes the general Python parser, which handles every record shape and reports
 * malformed input with a precise error.  Reads never go past the payload.
 *
 * ``plain_spans`` is the same walk without a Python object per record: ``(spans, timestamps, keys,
 * longest)`` -- the values as native int32 (offset into payload, length) pairs, the CreateTimes as
 * native int64s (both bytes objects), and the longest value's length; the append path encodes
 * straight from the payload (``_cstore.encode_spans``).
 *
 * ``mapped_spans`` takes records of any key (text, binary, empty, null), null values and headers
 * and maps each to its CommitLog properties in the same pass, byte for byte as the Python mapping
 * (compat/kafka_records.py message_from_record) writes them; cases that mapping treats specially
 * (``rocketmq.*`` headers, non-ASCII header names, properties past the envelope budget) return None.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* Zig-zag varint at *pos (at most max_bytes bytes, not past end) into *out; 0 on malformation. */
static inline int read_varint(const unsigned char *buf, Py_ssize_t end, Py_ssize_t *pos, int max_bytes,
                              int64_t *out) {
    if (*pos < end && buf[*pos] < 0x80) {     /* one byte: lengths and deltas of small records */
        uint64_t v = buf[(*pos)++];
        *out = (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
        return 1;
    }
    uint64_t v = 0;
    int shift = 0;
    for (int i = 0; i < max_bytes; i++) {
        if (*pos >= end)
            return 0;
        unsigned char b = buf[(*pos)++];
        if (shift == 63 && (b & 0x7F) > 1)
            return 0;       /* past 64 bits: the Python reader refuses it too */
        v |= (uint64_t)(b & 0x7F) << shift;
        if (!(b & 0x80)) {
            if (max_bytes == 5 && v > 0xFFFFFFFFu)
                return 0;
            *out = (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
            return 1;
        }
        shift += 7;
    }
    return 0;
}

/* The walk shared by plain_values and plain_spans: lists of bytes/ints, or (spans) int32 offset, length
 * pairs into the payload and an int64 array of CreateTimes plus the longest value. */
static PyObject *walk_plain(PyObject *args, int packed) {
    Py_buffer payload;
    Py_ssize_t count;
    long long base_ts;
    int keyed = 0;
    if (!PyArg_ParseTuple(args, "y*nL|p", &payload, &count, &base_ts, &keyed))
        return NULL;
    PyObject *values = NULL, *stamps = NULL, *keys = NULL, *result = NULL;
    const unsigned char *buf = (const unsigned char *)payload.buf;
    Py_ssize_t size = payload.len, pos = 0, longest = 0;
    if (count < 0 || count > size || (packed && size > INT32_MAX))
        goto plain_no;
    values = packed ? PyBytes_FromStringAndSize(NULL, count * 8) : PyList_New(count);
    stamps = packed ? PyBytes_FromStringAndSize(NULL, count * 8) : PyList_New(count);
    keys = keyed ? PyList_New(count) : Py_NewRef(Py_None);
    if (values == NULL || stamps == NULL || keys == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < count; i++) {
        int64_t length, ts_delta, off_delta, key_len, value_len, headers;
        if (!read_varint(buf, size, &pos, 5, &length) || length < 0 || length > size - pos)
            goto plain_no;
        Py_ssize_t end = pos + (Py_ssize_t)length;
        if (pos >= end || buf[pos++] != 0)  /* attributes: none are defined for plain records */
            goto plain_no;
        if (!read_varint(buf, end, &pos, 10, &ts_delta) || !read_varint(buf, end, &pos, 5, &off_delta)
            || !read_varint(buf, end, &pos, 5, &key_len) || (keyed ? (key_len < 0 || key_len > end - pos) : key_len != -1))
            goto plain_no;
        if (keyed) {
            PyObject *key = PyBytes_FromStringAndSize((const char *)buf + pos, (Py_ssize_t)key_len);
            if (key == NULL)
                goto done;
            PyList_SET_ITEM(keys, i, key);
            pos += (Py_ssize_t)key_len;
        }
        if (!read_varint(buf, end, &pos, 5, &value_len) || value_len < 0 || value_len > end - pos)
            goto plain_no;
        if (packed) {
            int32_t span[2] = {(int32_t)pos, (int32_t)value_len};
            int64_t ts = base_ts + ts_delta;
            memcpy(PyBytes_AS_STRING(values) + 8 * i, span, sizeof span);
            memcpy(PyBytes_AS_STRING(stamps) + 8 * i, &ts, sizeof ts);
            if (value_len > longest)
                longest = (Py_ssize_t)value_len;
        } else {
            PyObject *value = PyBytes_FromStringAndSize((const char *)buf + pos, (Py_ssize_t)value_len);
            if (value == NULL)
                goto done;
            PyList_SET_ITEM(values, i, value);
        }
        pos += (Py_ssize_t)value_len;
        if (!read_varint(buf, end, &pos, 5, &headers) || headers != 0 || pos != end)
            goto plain_no;
        if (!packed) {
            PyObject *ts = PyLong_FromLongLong(base_ts + ts_delta);
            if (ts == NULL)
                goto done;
            PyList_SET_ITEM(stamps, i, ts);
        }
    }
    if (pos != size)
        goto plain_no;
    result = packed ? Py_BuildValue("OOOn", values, stamps, keys, longest) : PyTuple_Pack(3, values, stamps, keys);
    goto done;
plain_no:
    result = Py_NewRef(Py_None);
done:
    Py_XDECREF(values);
    Py_XDECREF(stamps);
    Py_XDECREF(keys);
    PyBuffer_Release(&payload);
    return result;
}


/* ---- mapped_spans: any key, headers, null values (the Kafka -> CommitLog property mapping) ---- */

/* The bytes object being written (``obj``: the result itself, shrunk to ``len`` at the end, so the
 * properties are not copied out of a scratch buffer) and its first byte ``p``. */
typedef struct {
    PyObject *obj;
    char *p;
    Py_ssize_t len, cap;
} Buf;

/* A buffer of ``cap`` bytes to start with (at least 4096). */
static int buf_init(Buf *b, Py_ssize_t cap) {
    b->cap = cap < 4096 ? 4096 : cap;
    b->len = 0;
    b->obj = PyBytes_FromStringAndSize(NULL, b->cap);
    b->p = b->obj != NULL ? PyBytes_AS_STRING(b->obj) : NULL;
    return b->obj != NULL ? 0 : -1;
}

/* Room for n more bytes (b->p may move). */
static int buf_reserve(Buf *b, Py_ssize_t n) {
    if (b->len + n > b->cap) {
        Py_ssize_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n)
            cap *= 2;
        if (_PyBytes_Resize(&b->obj, cap) < 0) {   /* frees the object on failure */
            b->p = NULL;
            return -1;
        }
        b->p = PyBytes_AS_STRING(b->obj);
        b->cap = cap;
    }
    return 0;
}

static inline int buf_put(Buf *b, const void *src, Py_ssize_t n) {
    if (b->len + n > b->cap && buf_reserve(b, n) < 0)
        return -1;
    memcpy(b->p + b->len, src, (size_t)n);
    b->len += n;
    return 0;
}

#define PUTS(b, s) buf_put((b), (s), (Py_ssize_t)(sizeof(s) - 1))

/* Strict UTF-8 (what Python's "utf-8" codec accepts: no surrogates, no overlongs, <= U+10FFFF). */
static int utf8_ok(const unsigned char *s, Py_ssize_t n) {
    Py_ssize_t i = 0;
    while (i < n) {
        unsigned char c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        int len;
        unsigned char lo = 0x80, hi = 0xBF;
        if (c >= 0xC2 && c <= 0xDF)
            len = 2;
        else if (c >= 0xE0 && c <= 0xEF) {
            len = 3;
            if (c == 0xE0) lo = 0xA0;
            if (c == 0xED) hi = 0x9F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            len = 4;
            if (c == 0xF0) lo = 0x90;
            if (c == 0xF4) hi = 0x8F;
        } else
            return 0;
        if (i + len > n || s[i + 1] < lo || s[i + 1] > hi)
            return 0;
        for (int k = 2; k < len; k++)
            if (s[i + k] < 0x80 || s[i + k] > 0xBF)
                return 0;
        i += len;
    }
    return 1;
}

#define ONES 0x0101010101010101ULL
#define HIGHS 0x8080808080808080ULL

/* compat's _text: UTF-8 without the property separators 0x01 / 0x02 (and, here, non-empty).  Eight
 * bytes at a time while they are ASCII with no byte below 3 (a NUL is text: the word test only says
 * "look closer"); from the first word that is not, the exact test (all before it was ASCII, so that is
 * a character boundary). */
static int is_text(const unsigned char *s, Py_ssize_t n) {
    if (n <= 0)
        return 0;
    Py_ssize_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, s + i, 8);
        if ((w & HIGHS) || ((w - 3 * ONES) & ~w & HIGHS))
            break;
    }
    for (; i < n; i++)
        if (s[i] >= 0x80 || s[i] == 0x01 || s[i] == 0x02)
            break;
    if (i == n)
        return 1;
    s += i;
    n -= i;
    return memchr(s, 0x01, (size_t)n) == NULL && memchr(s, 0x02, (size_t)n) == NULL && utf8_ok(s, n);
}

/* Base64 (standard alphabet, padded) two output characters per table read: B64_PAIRS[v] for a 12-bit
 * v is its two characters; filled once at import. */
static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
static char B64_PAIRS[4096][2];

static void b64_init(void) {
    for (int v = 0; v < 4096; v++) {
        B64_PAIRS[v][0] = B64[v >> 6];
        B64_PAIRS[v][1] = B64[v & 63];
    }
}

/* Base64 of s[0:n] at q (room for (n + 2) / 3 * 4 bytes); returns the end. */
static char *b64_at(char *q, const unsigned char *s, Py_ssize_t n) {
    Py_ssize_t i = 0;
    for (; i + 3 <= n; i += 3) {
        uint32_t v = (uint32_t)s[i] << 16 | (uint32_t)s[i + 1] << 8 | s[i + 2];
        memcpy(q, B64_PAIRS[v >> 12], 2);
        memcpy(q + 2, B64_PAIRS[v & 4095], 2);
        q += 4;
    }
    if (i < n) {
        uint32_t v = (uint32_t)s[i] << 16 | (i + 1 < n ? (uint32_t)s[i + 1] << 8 : 0);
        q[0] = B64[v >> 18];
        q[1] = B64[(v >> 12) & 63];
        q[2] = i + 1 < n ? B64[(v >> 6) & 63] : '=';
        q[3] = '=';
        q += 4;
    }
    return q;
}

static int put_b64(Buf *b, const unsigned char *s, Py_ssize_t n) {
    if (buf_reserve(b, (n + 2) / 3 * 4) < 0)
        return -1;
    b->len = b64_at(b->p + b->len, s, n) - b->p;
    return 0;
}

/* A JSON string of ASCII bytes at q as json.dumps(ensure_ascii=True) writes it (room for 2 + 6 * n
 * bytes); returns the end. */
static char *json_ascii_at(char *q, const unsigned char *s, Py_ssize_t n) {
    static const char H[] = "0123456789abcdef";
    *q++ = '"';
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned char c = s[i];
        if (c >= 0x20 && c < 0x7F && c != '"' && c != '\\') {
            *q++ = (char)c;
            continue;
        }
        *q++ = '\\';
        switch (c) {
        case '"': *q++ = '"'; break;
        case '\\': *q++ = '\\'; break;
        case '\n': *q++ = 'n'; break;
        case '\r': *q++ = 'r'; break;
        case '\t': *q++ = 't'; break;
        case '\b': *q++ = 'b'; break;
        case '\f': *q++ = 'f'; break;
        default:    /* json's ensure_ascii escapes all but ' '..'~' */
            memcpy(q, "u00", 3);
            q[3] = H[c >> 4];
            q[4] = H[c & 15];
            q += 5;
        }
    }
    *q++ = '"';
    return q;
}

/* compat's _SAFE_NAME (re.match of ^[A-Za-z0-9_.\-]{1,128}$: "$" also matches before a final "\n"). */
static int safe_name(const unsigned char *s, Py_ssize_t n) {
    if (n > 0 && s[n - 1] == '\n')
        n--;
    if (n < 1 || n > 128)
        return 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned char c = s[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.'
              || c == '-'))
            return 0;
    }
    return 1;
}

/* a[0:n] == b[0:n], from the last byte back (names often share a prefix: h0, h1, ...); a loop, as
 * header names are short. */
static inline int same_bytes(const unsigned char *a, const unsigned char *b, Py_ssize_t n) {
    while (n > 0) {
        n--;
        if (a[n] != b[n])
            return 0;
    }
    return 1;
}

/* Cheap filter before the name list is searched: the lengths and first bytes that occur in it. */
typedef struct {
    PyObject *names;
    uint64_t lengths;           /* bit L: a name of length L (< 64) */
    uint64_t first[4];          /* bit c: a name starting with byte c */
} SystemNames;

static void system_filter(SystemNames *sn, PyObject *names) {
    memset(sn, 0, sizeof *sn);
    sn->names = names;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(names); i++) {
        PyObject *b = PyTuple_GET_ITEM(names, i);
        Py_ssize_t n = PyBytes_GET_SIZE(b);
        sn->lengths |= n < 64 ? (uint64_t)1 << n : 0;
        if (n > 0) {
            unsigned char c = (unsigned char)PyBytes_AS_STRING(b)[0];
            sn->first[c >> 6] |= (uint64_t)1 << (c & 63);
        }
    }
}

static int is_system(const SystemNames *sn, const unsigned char *s, Py_ssize_t n) {
    if (n == 0 || (n < 64 && !(sn->lengths >> n & 1)) || !(sn->first[s[0] >> 6] >> (s[0] & 63) & 1))
        return 0;
    PyObject *names = sn->names;
    Py_ssize_t k = PyTuple_GET_SIZE(names);
    for (Py_ssize_t i = 0; i < k; i++) {
        PyObject *b = PyTuple_GET_ITEM(names, i);
        if (PyBytes_GET_SIZE(b) == n && memcmp(PyBytes_AS_STRING(b), s, (size_t)n) == 0)
            return 1;
    }
    return 0;
}

typedef struct {
    Py_ssize_t name, name_len, value, value_len;   /* offsets into the payload; value_len -1: null */
} Header;

#define MAX_HEADERS 256

/* The properties of one record into *props (compat.message_from_record's order); 1 done, 0 "not this
 * path" (the Python mapping decides), -1 error.  *index_key: offset/length in props of its KEYS, or -1. */
static int map_record(Buf *props, const unsigned char *buf, Py_ssize_t key, Py_ssize_t key_len, int null_value,
                      const Header *hs, Py_ssize_t nh, const SystemNames *system, Py_ssize_t *ik,
                      Py_ssize_t *ik_len, Py_ssize_t hstart, Py_ssize_t hend, Py_ssize_t *prev_h,
                      Py_ssize_t *prev_hlen, Py_ssize_t *prev_out, Py_ssize_t *prev_outlen) {
    int sep = 0;
    *ik = -1;
    *ik_len = 0;
    if (key_len >= 0) {
        const unsigned char *k = buf + key;
        if (is_text(k, key_len) && memchr(k, ' ', (size_t)key_len) == NULL) {
            if (PUTS(props, "KEYS\x01") < 0)
                return -1;
            *ik = props->len;
            *ik_len = key_len;
            if (buf_put(props, k, key_len) < 0)
                return -1;
        } else {
            if (PUTS(props, "KAFKA_KEY\x01" "b") < 0)
                return -1;
            Py_ssize_t at = props->len;
            if (put_b64(props, k, key_len) < 0)
                return -1;
            if (key_len > 0) {
                Py_ssize_t n = props->len - at;
                if (PUTS(props, "\x02KEYS\x01") < 0)
                    return -1;
                *ik = props->len;
                *ik_len = n;
                if (buf_reserve(props, n) < 0)      /* the copy's source is in the buffer: grow it first */
                    return -1;
                memcpy(props->p + props->len, props->p + at, (size_t)n);
                props->len += n;
            }
        }
        sep = 1;
    }
    if (null_value) {
        if ((sep && PUTS(props, "\x02") < 0) || PUTS(props, "KAFKA_NULL_VALUE\x01" "1") < 0)
            return -1;
        sep = 1;
    }
    if (sep && PUTS(props, "\x02") < 0)
        return -1;
    /* The same header bytes as the previous record's: the same properties from here on */
    if (*prev_h >= 0 && hend - hstart == *prev_hlen && memcmp(buf + hstart, buf + *prev_h, (size_t)*prev_hlen) == 0) {
        if (buf_reserve(props, *prev_outlen) < 0)
            return -1;
        memcpy(props->p + props->len, props->p + *prev_out, (size_t)*prev_outlen);
        *prev_out = props->len;
        props->len += *prev_outlen;
        return 1;
    }
    Py_ssize_t out0 = props->len;
    *prev_h = -1;
    /* Declines first, and the most the properties can take (escapes 6x, base64 4/3): one reservation */
    Py_ssize_t bound = 17;
    for (Py_ssize_t i = 0; i < nh; i++) {
        const unsigned char *name = buf + hs[i].name;
        Py_ssize_t nl = hs[i].name_len, vl = hs[i].value_len;
        for (Py_ssize_t j = 0; j < nl; j++)
            if (name[j] >= 0x80)
                return 0;       /* non-ASCII names: Python's surrogateescape text */
        if (nl >= 9 && memcmp(name, "rocketmq.", 9) == 0)
            return 0;           /* RocketMQ features (TAGS, KEYS, DELAY, ...): the Python rules */
        bound += 8 + 7 * nl + (vl < 0 ? 4 : (Py_ssize_t)((size_t)(vl + 2) / 3 * 4) + 2 + vl);
    }
    if (buf_reserve(props, bound) < 0)
        return -1;
    char *q = props->p + props->len;
    memcpy(q, "KAFKA_HEADERS\x01[", 15);
    q += 15;
    for (Py_ssize_t i = 0; i < nh; i++) {
        if (i)
            *q++ = ',';
        *q++ = '[';
        q = json_ascii_at(q, buf + hs[i].name, hs[i].name_len);
        *q++ = ',';
        if (hs[i].value_len < 0) {
            memcpy(q, "null", 4);
            q += 4;
        } else {
            *q++ = '"';
            q = b64_at(q, buf + hs[i].value, hs[i].value_len);
            *q++ = '"';
        }
        *q++ = ']';
    }
    *q++ = ']';
    /* Copies: plain-named, non-system, text values; the first one of a name wins.  text[i] is only
     * read for an earlier header of the same (plain, non-system) name, so the others may leave it 0. */
    unsigned char text[MAX_HEADERS];
    uint64_t seen = 0;      /* bit (length + first + last byte) % 64 of each text[] name: most skip the scan */
    for (Py_ssize_t i = 0; i < nh; i++) {
        const unsigned char *name = buf + hs[i].name;
        Py_ssize_t nl = hs[i].name_len, vl = hs[i].value_len;
        text[i] = 0;
        if (vl < 0 || !safe_name(name, nl) || is_system(system, name, nl) || !is_text(buf + hs[i].value, vl))
            continue;
        text[i] = 1;
        uint64_t bit = (uint64_t)1 << ((size_t)(nl + name[0] + name[nl - 1]) & 63);
        int dup = 0;
        if (seen & bit)
            for (Py_ssize_t j = 0; j < i && !dup; j++)
                dup = text[j] && hs[j].name_len == nl && same_bytes(buf + hs[j].name, name, nl);
        seen |= bit;
        if (dup)
            continue;
        *q++ = 0x02;
        memcpy(q, name, (size_t)nl);
        q += nl;
        *q++ = 0x01;
        memcpy(q, buf + hs[i].value, (size_t)vl);
        q += vl;
    }
    if (q - (props->p + out0) > bound) {    /* cannot happen: the bound above is wrong (a test catches it) */
        PyErr_SetString(PyExc_SystemError, "mapped_spans: header properties past their reservation");
        return -1;
    }
    props->len = q - props->p;
    *prev_h = hstart;
    *prev_hlen = hend - hstart;
    *prev_out = out0;
    *prev_outlen = props->len - out0;
    return 1;
}

/* mapped_spans(payload, count, base_timestamp, system_names, budget)
 *   -> (spans, timestamps, props, prop_spans, index_keys, longest, longest_props) | None
 * Every record of the batch mapped as compat.message_from_record maps it (CreateTime): the values as
 * int32 (offset, length) spans of the payload (a null value: length 0), the CreateTimes as int64s,
 * each record's encoded properties back to back in ``props`` with their int32 (offset, length) spans,
 * the index keys (each record's KEYS: UTF-8, no str made) as int32 (offset, length) spans of ``props``
 * -- or None when no record has one --, the longest value and the longest properties.  None
 * for the whole batch when a record is not for this path: malformed, attributes set, a header name
 * that is not ASCII or starts with "rocketmq.", properties of ``budget`` bytes or more (the envelope),
 * or some records with an index key and some without. */
static PyObject *mapped_spans(PyObject *self, PyObject *args) {
    Py_buffer payload;
    Py_ssize_t count, budget;
    long long base_ts;
    PyObject *system;
    if (!PyArg_ParseTuple(args, "y*nLO!n", &payload, &count, &base_ts, &PyTuple_Type, &system, &budget))
        return NULL;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(system); i++)
        if (!PyBytes_Check(PyTuple_GET_ITEM(system, i))) {
            PyBuffer_Release(&payload);
            PyErr_SetString(PyExc_TypeError, "system_names must be a tuple of bytes");
            return NULL;
        }
    const unsigned char *buf = (const unsigned char *)payload.buf;
    Py_ssize_t size = payload.len, pos = 0, longest = 0, longest_props = 0, keyed = 0;
    PyObject *values = NULL, *stamps = NULL, *pspans = NULL, *kspans = NULL, *result = NULL, *blob = NULL;
    Buf props = {0};
    Header hs[MAX_HEADERS];
    SystemNames sn;
    Py_ssize_t prev_h = -1, prev_hlen = 0, prev_out = 0, prev_outlen = 0;
    system_filter(&sn, system);
    if (count < 0 || count > size || size > INT32_MAX)
        goto no;
    /* The properties take about one and a half times the records' bytes (keys and header values twice,
     * base64 in the KAFKA_HEADERS JSON): room for twice as many, so they seldom move while written. */
    if (buf_init(&props, size * 2) < 0)
        goto done;
    values = PyBytes_FromStringAndSize(NULL, count * 8);
    stamps = PyBytes_FromStringAndSize(NULL, count * 8);
    pspans = PyBytes_FromStringAndSize(NULL, count * 8);
    kspans = PyBytes_FromStringAndSize(NULL, count * 8);
    if (values == NULL || stamps == NULL || pspans == NULL || kspans == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < count; i++) {
        int64_t length, ts_delta, off_delta, key_len, value_len, nh;
        if (!read_varint(buf, size, &pos, 5, &length) || length < 0 || length > size - pos)
            goto no;
        Py_ssize_t end = pos + (Py_ssize_t)length;
        if (pos >= end || buf[pos++] != 0)
            goto no;
        if (!read_varint(buf, end, &pos, 10, &ts_delta) || !read_varint(buf, end, &pos, 5, &off_delta)
            || !read_varint(buf, end, &pos, 5, &key_len) || key_len < -1 || key_len > end - pos)
            goto no;
        Py_ssize_t key = pos;
        if (key_len > 0)
            pos += (Py_ssize_t)key_len;
        if (!read_varint(buf, end, &pos, 5, &value_len) || value_len < -1 || value_len > end - pos)
            goto no;
        Py_ssize_t value = pos;
        if (value_len > 0)
            pos += (Py_ssize_t)value_len;
        Py_ssize_t hstart = pos;
        if (!read_varint(buf, end, &pos, 5, &nh) || nh < 0 || nh > MAX_HEADERS)
            goto no;
        for (int64_t h = 0; h < nh; h++) {
            int64_t nl, vl;
            if (!read_varint(buf, end, &pos, 5, &nl) || nl < 0 || nl > end - pos)
                goto no;
            hs[h].name = pos;
            hs[h].name_len = (Py_ssize_t)nl;
            pos += (Py_ssize_t)nl;
            if (!read_varint(buf, end, &pos, 5, &vl) || vl < -1 || vl > end - pos)
                goto no;
            hs[h].value = pos;
            hs[h].value_len = (Py_ssize_t)vl;
            if (vl > 0)
                pos += (Py_ssize_t)vl;
        }
        if (pos != end)
            goto no;
        int64_t ts;
        if (__builtin_add_overflow((int64_t)base_ts, ts_delta, &ts))
            goto no;
        Py_ssize_t at = props.len, ik, ik_len;
        int ok = map_record(&props, buf, key, (Py_ssize_t)key_len, value_len < 0, hs, (Py_ssize_t)nh, &sn,
                            &ik, &ik_len, hstart, end, &prev_h, &prev_hlen, &prev_out, &prev_outlen);
        if (ok < 0)
            goto done;
        if (ok == 0 || props.len - at + 1 > budget || (i > 0 && (ik >= 0) != (keyed > 0)))
            goto no;
        if (ik >= 0) {
            keyed++;
            int32_t kspan[2] = {(int32_t)ik, (int32_t)ik_len};
            memcpy(PyBytes_AS_STRING(kspans) + 8 * i, kspan, sizeof kspan);
        }
        int32_t span[2] = {(int32_t)value, value_len > 0 ? (int32_t)value_len : 0};
        int32_t pspan[2] = {(int32_t)at, (int32_t)(props.len - at)};
        memcpy(PyBytes_AS_STRING(values) + 8 * i, span, sizeof span);
        memcpy(PyBytes_AS_STRING(pspans) + 8 * i, pspan, sizeof pspan);
        memcpy(PyBytes_AS_STRING(stamps) + 8 * i, &ts, sizeof ts);
        if (span[1] > longest)
            longest = span[1];
        if (pspan[1] > longest_props)
            longest_props = pspan[1];
    }
    if (pos != size || props.len > INT32_MAX)
        goto no;
    if (_PyBytes_Resize(&props.obj, props.len) < 0)
        goto done;
    blob = props.obj;
    props.obj = NULL;
    result = Py_BuildValue("OOOOOnn", values, stamps, blob, pspans, keyed ? kspans : Py_None, longest, longest_props);
    goto done;
no:
    result = Py_NewRef(Py_None);
done:
    Py_XDECREF(props.obj);
    Py_XDECREF(values);
    Py_XDECREF(stamps);
    Py_XDECREF(pspans);
    Py_XDECREF(kspans);
    Py_XDECREF(blob);
    PyBuffer_Release(&payload);
    return result;
}

static PyObject *plain_values(PyObject *self, PyObject *args) { return walk_plain(args, 0); }

static PyObject *plain_spans(PyObject *self, PyObject *args) { return walk_plain(args, 1); }

static PyMethodDef methods[] = {
    {"plain_values", plain_values, METH_VARARGS,
     "plain_values(payload, count, base_timestamp, keyed=False) -> (values, timestamps, keys) | None"},
    {"plain_spans", plain_spans, METH_VARARGS,
     "plain_spans(payload, count, base_timestamp, keyed=False) -> (spans, timestamps, keys, longest) | None"},
    {"mapped_spans", mapped_spans, METH_VARARGS,
     "mapped_spans(payload, count, base_timestamp, system_names, budget) -> (spans, timestamps, props, "
     "prop_spans, index_keys, longest, longest_props) | None"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_crecords", "Kafka record batch hot path (native).",
                                    -1, methods};

PyMODINIT_FUNC PyInit__crecords(void) {
    b64_init();
    return PyModule_Create(&module);
}
