/* CommitLog records -> Kafka v2 records (the Fetch hot path); twin: stored_records.py (walk_py).
 *
 * Theory of operation
 * -------------------
 * ``stored_records(data, start, count, accepted, layout[, table])`` walks CommitLog records lying
 * back to back in ``data`` from byte ``start`` and encodes the leading ones it can map as Kafka v2
 * records: offset delta = i, timestamp delta = BORNTIMESTAMP - the first record's.
 *
 * * A record whose PROPERTIES blob is one of ``accepted`` (blobs the caller has found to mean "no
 *   key, no headers") is encoded by a byte comparison: null key, the body as value, no headers.
 * * With ``table`` (the caller's mapping: rokka.compat.kafka_records.FETCH_TABLE), any other record
 *   is mapped by that mapping's rules: key from the key property (base64 after one character) or
 *   KEYS, headers from the headers property (JSON ``[[name, base64-or-null], ...]``), or, without
 *   it (a RocketMQ producer's record), every non-internal property as a header (the listed names
 *   with the prefix), a null value when the null-value property is "1", and the envelope (key and
 *   headers JSON at the start of the body).  Only the canonical forms are mapped here -- a blob
 *   that is valid UTF-8 with non-empty names and values (duplicate names only beside a headers
 *   property), compact JSON, strict base64, an envelope "<-1|digits>,<digits>" -- so there is one
 *   meaning, the caller's; anything else (and compressed bodies, control entries, LogAppendTime
 *   records, a KEYS key beside <prefix>KEYS headers) stops the walk: the caller maps it itself.
 *
 * ``table`` = (header prefix, prefixed property names, internal property names, (key, headers,
 * null value, timestamp type, envelope, control, KEYS property names)), all bytes.
 * ``layout`` = (magic, offset of SYSFLAG, offset of BORNTIMESTAMP, header sizes of the four host
 * variants (sysflag bits 0x10/0x20), compressed flag): the record layout stays defined once, in
 * core/storage/layout.py.
 *
 * Returns ``(payload, records, bytes_read, first_timestamp, max_timestamp)``; ``records`` is 0
 * when the first record cannot be mapped here (payload empty).  Never reads outside ``data``.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "_cstored_text.h"

#define MAX_ITEMS 64        /* properties per record mapped here; more: the Python path */

enum { S_KAFKA_KEY, S_HEADERS, S_NULL, S_TS_TYPE, S_ENVELOPE, S_CTRL, S_KEYS, N_SPECIAL };

static inline uint32_t be32(const unsigned char *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | (uint32_t)p[3];
}

static inline uint64_t be64(const unsigned char *p) { return ((uint64_t)be32(p) << 32) | be32(p + 4); }

static int is_accepted(PyObject *accepted, const unsigned char *p, Py_ssize_t n) {
    for (Py_ssize_t a = 0; a < PyTuple_GET_SIZE(accepted); a++) {
        PyObject *acc = PyTuple_GET_ITEM(accepted, a);
        if (PyBytes_GET_SIZE(acc) == n && memcmp(PyBytes_AS_STRING(acc), p, (size_t)n) == 0)
            return 1;
    }
    return 0;
}

/* -- a growable byte buffer (the per-record key and headers) ------------------------------------ */

/* -- the mapping table and one record's properties ------------------------------------------------- */

typedef struct {
    span_t prefix;
    PyObject *system, *internal;    /* tuples of bytes */
    span_t special[N_SPECIAL];
    uint64_t special_lengths;       /* bit L: a special name of length L (< 64); others skip the search */
    span_t keys_header;             /* prefix + KEYS: the header that appends index keys */
    unsigned char keys_header_buf[64];
} table_t;

static int in_names(PyObject *names, const unsigned char *p, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(names); i++) {
        PyObject *b = PyTuple_GET_ITEM(names, i);
        if (PyBytes_GET_SIZE(b) == n && memcmp(PyBytes_AS_STRING(b), p, (size_t)n) == 0)
            return 1;
    }
    return 0;
}

typedef struct {
    span_t name[MAX_ITEMS], value[MAX_ITEMS];
    int n;
    int special[N_SPECIAL];     /* item index of each special name (the last one), -1: absent */
} props_t;

/* Split a blob into items: 0 ok, -1 not a canonical blob (see the header comment). */
static int split_props(const table_t *t, const unsigned char *s, Py_ssize_t n, props_t *pr) {
    pr->n = 0;
    for (int k = 0; k < N_SPECIAL; k++)
        pr->special[k] = -1;
    if (n == 0)
        return 0;
    if (!cs_valid_utf8(s, n))
        return -1;
    if (s[n - 1] == 0x02)
        n--;
    Py_ssize_t i = 0;
    for (;;) {
        const unsigned char *end = memchr(s + i, 0x02, (size_t)(n - i));
        Py_ssize_t e = end == NULL ? n : end - s;
        /* the name ends at the first 0x01: names are short, a loop beats a second memchr call here */
        const unsigned char *sep = s + i, *stop = s + e;
        while (sep < stop && *sep != 0x01)
            sep++;
        if (sep == stop || sep == s + i || sep + 1 == s + e || pr->n == MAX_ITEMS)
            return -1;
        span_t name = {s + i, sep - (s + i)}, value = {sep + 1, s + e - (sep + 1)};
        if (name.n >= 64 || (t->special_lengths >> name.n & 1))
            for (int k = 0; k < N_SPECIAL; k++) {
                if (span_eq(t->special[k], name.p, name.n)) {
                    pr->special[k] = pr->n;
                    break;
                }
            }
        pr->name[pr->n] = name;
        pr->value[pr->n] = value;
        pr->n++;
        if (end == NULL)
            return 0;
        i = e + 1;
    }
}

/* -- one record ---------------------------------------------------------------------------------- */

typedef struct {
    const unsigned char *key, *value;   /* key == NULL: null key unless key_in_scratch */
    Py_ssize_t klen, vlen;              /* vlen -1: a null value */
    int key_in_scratch;                 /* key: the first klen bytes of the scratch buffer */
    int64_t headers;                    /* entries, encoded in the scratch after the key */
    Py_ssize_t cached_at, cached_len;   /* cached_at >= 0: the entries are these bytes of the payload */
    int cache_these;                    /* the entries in the scratch are the cache's (note their place) */
} mapped_t;

static int is_one(const props_t *pr, int k) {
    return pr->special[k] >= 0 && pr->value[pr->special[k]].n == 1 && pr->value[pr->special[k]].p[0] == '1';
}

/* Envelope "<-1|digits>,<digits>" (at most 9 digits each): 0 and the lengths, or -1. */
static int envelope_lengths(span_t v, Py_ssize_t *klen, Py_ssize_t *hlen) {
    Py_ssize_t i = 0, *out[2] = {klen, hlen};
    for (int part = 0; part < 2; part++) {
        if (part == 0 && v.n >= 2 && v.p[0] == '-' && v.p[1] == '1') {
            *klen = -1;
            i = 2;
        } else {
            Py_ssize_t x = 0, d = 0;
            while (i < v.n && v.p[i] >= '0' && v.p[i] <= '9' && d < 10) {
                x = x * 10 + (v.p[i++] - '0');
                d++;
            }
            if (d == 0 || d > 9)
                return -1;
            *out[part] = x;
        }
        if (part == 0 && (i >= v.n || v.p[i++] != ','))
            return -1;
    }
    return i == v.n ? 0 : -1;
}

/* The RocketMQ producer's properties as headers (system names prefixed); -1 on duplicate names. */
static int property_headers(const table_t *t, const props_t *pr, buf_t *b, int64_t *count) {
    *count = 0;
    for (int a = 0; a < pr->n; a++) {
        for (int c = 0; c < a; c++)
            if (pr->name[a].n == pr->name[c].n && memcmp(pr->name[a].p, pr->name[c].p, (size_t)pr->name[a].n) == 0)
                return -1;
        span_t nm = pr->name[a], v = pr->value[a];
        if (in_names(t->internal, nm.p, nm.n))
            continue;
        Py_ssize_t pre = in_names(t->system, nm.p, nm.n) ? t->prefix.n : 0;
        if (cs_buf_reserve(b, 20 + pre + nm.n + v.n) < 0)
            return -2;
        b->len += put_varlong(b->p + b->len, (int64_t)(pre + nm.n));
        memcpy(b->p + b->len, t->prefix.p, (size_t)pre);
        memcpy(b->p + b->len + pre, nm.p, (size_t)nm.n);
        b->len += pre + nm.n;
        b->len += put_varlong(b->p + b->len, (int64_t)v.n);
        memcpy(b->p + b->len, v.p, (size_t)v.n);
        b->len += v.n;
        (*count)++;
    }
    return 0;
}

/* Key (KAFKA_KEY base64 after its first character, else KEYS) into m; -1 if not canonical. */
static int map_key(const props_t *pr, buf_t *b, mapped_t *m) {
    if (pr->special[S_KAFKA_KEY] >= 0) {
        span_t v = pr->value[pr->special[S_KAFKA_KEY]];
        Py_ssize_t skip = 1;
        while (skip < v.n && (v.p[skip] & 0xC0) == 0x80)
            skip++;                                     /* the first character, however long */
        Py_ssize_t dl = cs_b64_len(v.p + skip, v.n - skip);
        if (dl < 0)
            return -1;
        if (cs_buf_reserve(b, dl) < 0)
            return -2;
        if (cs_b64_decode(v.p + skip, v.n - skip, b->p) < 0)
            return -1;
        b->len = dl;
        m->klen = dl;
        m->key_in_scratch = 1;
    } else if (pr->special[S_KEYS] >= 0) {
        m->key = pr->value[pr->special[S_KEYS]].p;
        m->klen = pr->value[pr->special[S_KEYS]].n;
    }
    return 0;
}

/* The last KAFKA_HEADERS JSON mapped in this walk and where its entries lie in the payload written
 * so far (producers tend to repeat the same headers; a hit copies them from there).  Nothing is
 * copied on a miss: the JSON stays in the walked data, the entries are those of the record written
 * next (``stored_records`` notes their place). */
typedef struct {
    const unsigned char *json;  /* in the walked data; NULL: none */
    Py_ssize_t json_len;
    Py_ssize_t out_at, out_len; /* the entries in the payload; out_at -1: not written yet */
    int64_t count;
    int keys_header;
} hcache_t;

static int cached_headers(const table_t *t, span_t h, hcache_t *c, buf_t *b, mapped_t *m, int *keys_header) {
    if (c->out_at >= 0 && c->json_len == h.n && memcmp(c->json, h.p, (size_t)h.n) == 0) {
        m->cached_at = c->out_at;
        m->cached_len = c->out_len;
        m->headers = c->count;
        *keys_header = c->keys_header;
        return 0;
    }
    int rc = cs_json_headers(h.p, h.n, 0, b, &m->headers, t->keys_header, keys_header);
    if (rc < 0)
        return rc;
    c->json = h.p;
    c->json_len = h.n;
    c->out_at = -1;
    c->count = m->headers;
    c->keys_header = *keys_header;
    m->cache_these = 1;
    return 0;
}

/* Map one record's properties and body (kafka_records' rules): 0 ok, -1 not here, -2 error.
 * A text key (KEYS) beside rocketmq.KEYS headers (which append to KEYS) is left to Python. */
static int map_record(const table_t *t, const unsigned char *props, Py_ssize_t plen, const unsigned char *body,
                      Py_ssize_t blen, buf_t *b, hcache_t *cache, mapped_t *m) {
    props_t pr;
    int keys_header = 0;
    b->len = 0;
    memset(m, 0, sizeof(*m));
    m->cached_at = -1;
    if (split_props(t, props, plen, &pr) < 0 || pr.special[S_CTRL] >= 0 || is_one(&pr, S_TS_TYPE))
        return -1;
    int null_value = is_one(&pr, S_NULL);
    if (pr.special[S_ENVELOPE] >= 0) {
        Py_ssize_t klen, hlen;
        if (envelope_lengths(pr.value[pr.special[S_ENVELOPE]], &klen, &hlen) < 0)
            return -1;
        Py_ssize_t start = klen < 0 ? 0 : klen;
        m->value = body;
        m->vlen = null_value ? -1 : blen;
        if (start + hlen > blen)            /* not the lengths it announces: the body as value */
            return 0;
        if (hlen) {
            int rc = cs_json_headers(body + start, hlen, 1, b, &m->headers, t->keys_header, &keys_header);
            if (rc < 0)
                return rc;
        }
        m->key = klen < 0 ? NULL : body;
        m->klen = klen < 0 ? 0 : klen;
        m->value = body + start + hlen;
        m->vlen = null_value ? -1 : blen - start - hlen;
        return 0;
    }
    m->value = body;
    m->vlen = null_value ? -1 : blen;
    int rc = map_key(&pr, b, m);
    if (rc < 0)
        return rc;
    if (pr.special[S_HEADERS] < 0)
        return property_headers(t, &pr, b, &m->headers);
    span_t h = pr.value[pr.special[S_HEADERS]];
    if (h.n == 2 && h.p[0] == '[' && h.p[1] == ']')
        return 0;
    rc = cached_headers(t, h, cache, b, m, &keys_header);
    return rc == 0 && keys_header && !m->key_in_scratch && m->key != NULL ? -1 : rc;
}

/* -- the walk ------------------------------------------------------------------------------------ */

static int parse_table(PyObject *obj, table_t *t) {
    PyObject *special;
    if (!PyArg_ParseTuple(obj, "y#O!O!O!", &t->prefix.p, &t->prefix.n, &PyTuple_Type, &t->system, &PyTuple_Type,
                          &t->internal, &PyTuple_Type, &special))
        return -1;
    if (PyTuple_GET_SIZE(special) != N_SPECIAL) {
        PyErr_SetString(PyExc_ValueError, "table: 7 special property names expected");
        return -1;
    }
    PyObject *lists[2] = {t->system, t->internal};
    for (int l = 0; l < 2; l++)
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(lists[l]); i++)
            if (!PyBytes_Check(PyTuple_GET_ITEM(lists[l], i))) {
                PyErr_SetString(PyExc_TypeError, "table: property names must be bytes");
                return -1;
            }
    for (int k = 0; k < N_SPECIAL; k++) {
        PyObject *s = PyTuple_GET_ITEM(special, k);
        if (!PyBytes_Check(s)) {
            PyErr_SetString(PyExc_TypeError, "table: property names must be bytes");
            return -1;
        }
        t->special[k].p = (const unsigned char *)PyBytes_AS_STRING(s);
        t->special[k].n = PyBytes_GET_SIZE(s);
    }
    t->special_lengths = 0;
    for (int k = 0; k < N_SPECIAL; k++)
        t->special_lengths |= t->special[k].n < 64 ? (uint64_t)1 << t->special[k].n : 0;
    if (t->prefix.n + t->special[S_KEYS].n > (Py_ssize_t)sizeof(t->keys_header_buf)) {
        PyErr_SetString(PyExc_ValueError, "table: header prefix too long");
        return -1;
    }
    memcpy(t->keys_header_buf, t->prefix.p, (size_t)t->prefix.n);
    memcpy(t->keys_header_buf + t->prefix.n, t->special[S_KEYS].p, (size_t)t->special[S_KEYS].n);
    t->keys_header.p = t->keys_header_buf;
    t->keys_header.n = t->prefix.n + t->special[S_KEYS].n;
    return 0;
}

/* The last table parsed, kept (with a reference) while callers pass the same object: the caller's
 * table is a module constant, so each call after the first skips the parse. */
static PyObject *last_table_obj = NULL;
static table_t last_table;

static const table_t *table_of(PyObject *obj) {
    if (obj == last_table_obj)
        return &last_table;
    table_t t;
    if (parse_table(obj, &t) < 0)
        return NULL;
    Py_INCREF(obj);
    Py_XSETREF(last_table_obj, obj);
    last_table = t;
    last_table.keys_header.p = last_table.keys_header_buf;     /* into the kept copy, not t */
    return &last_table;
}

static int out_reserve(PyObject **out, unsigned char **o, unsigned char **o0, Py_ssize_t need) {
    Py_ssize_t used = *o - *o0, cap = PyBytes_GET_SIZE(*out);
    if (used + need <= cap)
        return 0;
    while (cap < used + need)
        cap *= 2;
    if (_PyBytes_Resize(out, cap) < 0)
        return -1;
    *o0 = (unsigned char *)PyBytes_AS_STRING(*out);
    *o = *o0 + used;
    return 0;
}

static PyObject *stored_records(PyObject *self, PyObject *args) {
    Py_buffer data;
    Py_ssize_t start, count;
    PyObject *accepted, *table_obj = Py_None;
    unsigned long magic;
    Py_ssize_t off_sysflag, off_born, hs[4];
    long compressed_flag;
    if (!PyArg_ParseTuple(args, "y*nnO!(knn(nnnn)l)|O", &data, &start, &count, &PyTuple_Type, &accepted, &magic,
                          &off_sysflag, &off_born, &hs[0], &hs[1], &hs[2], &hs[3], &compressed_flag, &table_obj))
        return NULL;
    PyObject *out = NULL, *result = NULL;
    buf_t scratch = {NULL, 0, 0};
    hcache_t cache = {NULL, 0, -1, 0, 0, 0};
    const unsigned char *buf = (const unsigned char *)data.buf;
    Py_ssize_t len = data.len;
    for (Py_ssize_t a = 0; a < PyTuple_GET_SIZE(accepted); a++) {
        if (!PyBytes_Check(PyTuple_GET_ITEM(accepted, a))) {
            PyErr_SetString(PyExc_TypeError, "accepted properties must be bytes");
            goto done;
        }
    }
    const table_t *table = NULL;
    if (table_obj != Py_None && (table = table_of(table_obj)) == NULL)
        goto done;
    if (start < 0 || start > len || count < 0) {
        PyErr_SetString(PyExc_ValueError, "start or count out of range");
        goto done;
    }
    /* Usually enough (grown when a record's key and headers take more): the bodies plus ~32 bytes
     * a record for the varints. */
    Py_ssize_t cap = (len - start) + 32 * (count < (len - start) ? count : (len - start)) + 64;
    out = PyBytes_FromStringAndSize(NULL, cap);
    if (out == NULL)
        goto done;
    unsigned char *o0 = (unsigned char *)PyBytes_AS_STRING(out), *o = o0;
    Py_ssize_t o_cap = cap;
    Py_ssize_t p = start, i = 0;
    int64_t first_ts = 0, max_ts = 0;
    for (; i < count; i++) {
        if (len - p < 8)
            break;
        const unsigned char *r = buf + p;
        uint32_t total = be32(r);
        if (be32(r + 4) != (uint32_t)magic || total > (uint64_t)(len - p) || total < (uint32_t)(off_born + 8)
            || total < (uint32_t)(off_sysflag + 4))
            break;
        uint32_t sysflag = be32(r + off_sysflag);
        if (sysflag & (uint32_t)compressed_flag)
            break;
        Py_ssize_t h = hs[(sysflag >> 4) & 3];
        if (h < 4 || (Py_ssize_t)total < h + 1)
            break;
        uint32_t body_len = be32(r + h - 4);
        if (body_len > total - (uint32_t)h - 1)
            break;
        Py_ssize_t q = h + (Py_ssize_t)body_len;
        q += 1 + r[q];                                  /* TOPICLENGTH + TOPIC */
        if (q + 2 > (Py_ssize_t)total)
            break;
        Py_ssize_t plen = ((Py_ssize_t)r[q] << 8) | r[q + 1];
        q += 2;
        if (q + plen != (Py_ssize_t)total)
            break;
        mapped_t m = {NULL, r + h, 0, (Py_ssize_t)body_len, 0, 0, -1, 0, 0};
        scratch.len = 0;
        if (!is_accepted(accepted, r + q, plen)) {
            if (table_obj == Py_None)
                break;
            int rc = map_record(table, r + q, plen, r + h, (Py_ssize_t)body_len, &scratch, &cache, &m);
            if (rc == -2)
                goto done;
            if (rc < 0)
                break;
        }
        int64_t ts = (int64_t)be64(r + off_born);
        if (i == 0)
            first_ts = max_ts = ts;
        else if (ts > max_ts)
            max_ts = ts;
        /* attributes, timestamp delta, offset delta, key, value, headers; the record's length
         * prefix counts all of it. */
        int null_key = m.key == NULL && !m.key_in_scratch;
        unsigned char head[48];
        int hn = 0;
        head[hn++] = 0;
        hn += put_varlong(head + hn, ts - first_ts);
        hn += put_varlong(head + hn, (int64_t)i);
        hn += put_varlong(head + hn, null_key ? -1 : (int64_t)m.klen);
        Py_ssize_t vn = m.vlen < 0 ? 0 : m.vlen;
        unsigned char tail[20];
        int tn = put_varlong(tail, m.vlen < 0 ? -1 : (int64_t)m.vlen);
        unsigned char hc[10];
        int hcn = put_varlong(hc, m.headers);
        Py_ssize_t hb = m.cached_at >= 0 ? m.cached_len : scratch.len - (m.key_in_scratch ? m.klen : 0);
        int64_t rec_len = (int64_t)hn + m.klen + tn + vn + hcn + hb;
        if ((o - o0) + 10 + (Py_ssize_t)rec_len > o_cap) {
            if (out_reserve(&out, &o, &o0, 10 + (Py_ssize_t)rec_len) < 0)
                goto done;
            o_cap = PyBytes_GET_SIZE(out);
        }
        o += put_varlong(o, rec_len);
        memcpy(o, head, (size_t)hn);
        o += hn;
        if (m.klen) {
            memcpy(o, m.key_in_scratch ? scratch.p : m.key, (size_t)m.klen);
            o += m.klen;
        }
        memcpy(o, tail, (size_t)tn);
        o += tn;
        if (vn) {
            memcpy(o, m.value, (size_t)vn);
            o += vn;
        }
        if (hcn == 1) {
            *o++ = hc[0];
        } else {
            memcpy(o, hc, (size_t)hcn);
            o += hcn;
        }
        if (m.cached_at >= 0) {
            memcpy(o, o0 + m.cached_at, (size_t)hb);   /* an earlier record's: no overlap */
            o += hb;
        } else if (hb) {
            if (m.cache_these) {
                cache.out_at = o - o0;
                cache.out_len = hb;
            }
            memcpy(o, scratch.p + (scratch.len - hb), (size_t)hb);
            o += hb;
        }
        p += total;
    }
    if (_PyBytes_Resize(&out, o - o0) < 0)
        goto done;
    result = Py_BuildValue("(OnnLL)", out, i, p - start, (long long)first_ts, (long long)max_ts);
done:
    free(scratch.p);
    Py_XDECREF(out);
    PyBuffer_Release(&data);
    return result;
}

static PyMethodDef methods[] = {
    {"stored_records", stored_records, METH_VARARGS,
     "stored_records(data, start, count, accepted, layout[, table]) -> (payload, records, bytes_read, first_ts, max_ts)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_cstored", "CommitLog records -> Kafka records (native).",
                                    -1, methods};

PyMODINIT_FUNC PyInit__cstored(void) {
    cs_b64_init();
    return PyModule_Create(&module);
}
