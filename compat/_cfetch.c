/* Native helper for the Fetch hot path (optional: compat/kafka_records.py has the same in Python).
 *
 * Theory of operation
 * -------------------
 * ``plain_records(data, start, count, accepted, layout)`` walks CommitLog records lying back to
 * back in ``data`` from byte ``start`` and encodes the leading ones that are *plain* -- their
 * PROPERTIES blob is one of ``accepted`` (blobs the caller has found to mean "no key, no headers,
 * a value, CreateTime") and their body is not compressed -- as Kafka v2 records: offset delta = i,
 * timestamp delta = BORNTIMESTAMP - the first record's, null key, the body as value, no headers.
 * A record whose blob is "KEYS 0x01 key 0x02" followed by an accepted blob is plain too, with that
 * (UTF-8) key.  It stops at the first record that is not plain, is malformed, or after ``count``.
 *
 * ``layout`` = (magic, offset of SYSFLAG, offset of BORNTIMESTAMP, header sizes of the four host
 * variants (sysflag bits 0x10/0x20), compressed flag): the record layout stays defined once, in
 * core/storage/layout.py.
 *
 * Returns ``(payload, records, bytes_read, first_timestamp, max_timestamp)``; ``records`` is 0
 * when the first record is not plain (payload empty).  Never reads outside ``data``.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

static inline uint32_t be32(const unsigned char *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | (uint32_t)p[3];
}

static inline uint64_t be64(const unsigned char *p) { return ((uint64_t)be32(p) << 32) | be32(p + 4); }

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

static int is_accepted(PyObject *accepted, const unsigned char *p, Py_ssize_t n) {
    for (Py_ssize_t a = 0; a < PyTuple_GET_SIZE(accepted); a++) {
        PyObject *acc = PyTuple_GET_ITEM(accepted, a);
        if (PyBytes_GET_SIZE(acc) == n && memcmp(PyBytes_AS_STRING(acc), p, (size_t)n) == 0)
            return 1;
    }
    return 0;
}

static PyObject *plain_records(PyObject *self, PyObject *args) {
    Py_buffer data;
    Py_ssize_t start, count;
    PyObject *accepted;
    unsigned long magic;
    Py_ssize_t off_sysflag, off_born, hs[4];
    long compressed_flag;
    if (!PyArg_ParseTuple(args, "y*nnO!(knn(nnnn)l)", &data, &start, &count, &PyTuple_Type, &accepted, &magic,
                          &off_sysflag, &off_born, &hs[0], &hs[1], &hs[2], &hs[3], &compressed_flag))
        return NULL;
    PyObject *out = NULL, *result = NULL;
    const unsigned char *buf = (const unsigned char *)data.buf;
    Py_ssize_t len = data.len;
    Py_ssize_t n_acc = PyTuple_GET_SIZE(accepted);
    for (Py_ssize_t a = 0; a < n_acc; a++) {
        if (!PyBytes_Check(PyTuple_GET_ITEM(accepted, a))) {
            PyErr_SetString(PyExc_TypeError, "accepted properties must be bytes");
            goto done;
        }
    }
    if (start < 0 || start > len || count < 0) {
        PyErr_SetString(PyExc_ValueError, "start or count out of range");
        goto done;
    }
    /* Worst case per record: body + 5 (length) + 1 (attributes) + 10 (ts) + 5 (offset) + 1 (key)
     * + 5 (value length) + 1 (headers); the body is at most the record. */
    Py_ssize_t cap = (len - start) + 32 * (count < (len - start) ? count : (len - start)) + 1;
    out = PyBytes_FromStringAndSize(NULL, cap);
    if (out == NULL)
        goto done;
    unsigned char *o = (unsigned char *)PyBytes_AS_STRING(out), *o0 = o;
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
        const unsigned char *key = NULL;
        Py_ssize_t klen = 0;
        int plain = is_accepted(accepted, r + q, plen);
        if (!plain && plen > 6 && memcmp(r + q, "KEYS\x01", 5) == 0) {
            /* "KEYS 0x01 key 0x02" + an accepted blob: a record with a key of its own */
            const unsigned char *sep = memchr(r + q + 5, 0x02, (size_t)(plen - 5));
            if (sep != NULL && sep > r + q + 5 && is_accepted(accepted, sep + 1, plen - (sep + 1 - (r + q)))) {
                key = r + q + 5;
                klen = sep - key;
                PyObject *text = PyUnicode_DecodeUTF8((const char *)key, klen, "strict");
                if (text == NULL)
                    PyErr_Clear();      /* not UTF-8: the per-record path maps it */
                Py_XDECREF(text);
                plain = text != NULL;
            }
        }
        if (!plain)
            break;
        int64_t ts = (int64_t)be64(r + off_born);
        if (i == 0)
            first_ts = max_ts = ts;
        else if (ts > max_ts)
            max_ts = ts;
        /* head: attributes, timestamp delta, offset delta, key length (-1: null); then the key; then
         * tail: value length.  The record length prefix counts all of it, value and header count. */
        unsigned char head[32], tail[10];
        int hn = 0;
        head[hn++] = 0;
        hn += put_varlong(head + hn, ts - first_ts);
        hn += put_varlong(head + hn, (int64_t)i);
        hn += put_varlong(head + hn, key == NULL ? -1 : (int64_t)klen);
        int tn = put_varlong(tail, (int64_t)body_len);
        o += put_varlong(o, (int64_t)hn + klen + tn + (int64_t)body_len + 1);
        memcpy(o, head, (size_t)hn);
        o += hn;
        if (klen) {
            memcpy(o, key, (size_t)klen);
            o += klen;
        }
        memcpy(o, tail, (size_t)tn);
        o += tn;
        memcpy(o, r + h, body_len);
        o += body_len;
        *o++ = 0;                                               /* no headers */
        p += total;
    }
    if (_PyBytes_Resize(&out, o - o0) < 0)
        goto done;
    result = Py_BuildValue("(OnnLL)", out, i, p - start, (long long)first_ts, (long long)max_ts);
done:
    Py_XDECREF(out);
    PyBuffer_Release(&data);
    return result;
}

static PyMethodDef methods[] = {
    {"plain_records", plain_records, METH_VARARGS,
     "plain_records(data, start, count, accepted, layout) -> (payload, records, bytes_read, first_ts, max_ts)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_cfetch", "CommitLog -> Kafka records hot path (native).",
                                    -1, methods};

PyMODINIT_FUNC PyInit__cfetch(void) { return PyModule_Create(&module); }
