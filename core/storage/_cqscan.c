/* Tag-filtered reads of a ConsumeQueue, native (the Python twin is core/storage/reader.py get_messages).
 *
 * Theory of operation
 * -------------------
 * A RocketMQ PULL with a tag expression ("TagA || TagB") is answered as the Java broker does
 * (DefaultMessageStore.getMessage with ExpressionMessageFilter): walk the ConsumeQueue units (20 bytes:
 * commitlog offset int64, size int32, tags code int64, big-endian), keep the units whose tags code,
 * cut to int32, is one of the subscription's String.hashCode values, and copy those records out of
 * the CommitLog.  The tag string itself is re-checked by the client (PullAPIWrapper), as in Java.
 *
 * ``tag_filter`` does that walk for the units of one ConsumeQueue file (in place in its map) against
 * one CommitLog span (in place in a segment's map): no Python object for a unit that does not match,
 * one bytes object per record that does.  It stops where the next matching record lies outside the
 * span, so the caller can lend the span of the next segment and go on; the limits (max_msgs,
 * max_bytes, at least one record) and the skipped units (below clog_min, or no record magic there)
 * are the Python loop's, so both give the same records, statuses and next offsets (tests compare).
 *
 * SQL92 reads use the same walk with a ``match`` callable (the compiled selector): each candidate's
 * properties are parsed in place into a dict holding only the names the selector reads, and only a
 * record that matches is copied.  The selector reads nothing but those names, so its answers are kept
 * by their values (a dict the filter owns, at most 4096 entries): records that agree on them (the same
 * TAGS, say) are answered without calling it again.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define MESSAGE_MAGIC 0xDAA320A7u

static inline uint32_t be32(const unsigned char *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | (uint32_t)p[3];
}

static inline int64_t be64(const unsigned char *p) {
    return (int64_t)(((uint64_t)be32(p) << 32) | be32(p + 4));
}

/* codes: sorted native int32s; a few are compared one by one, more by binary search. */
static inline int has_code(const int32_t *codes, Py_ssize_t n, int32_t code) {
    if (n <= 8) {
        for (Py_ssize_t i = 0; i < n; i++)
            if (codes[i] == code)
                return 1;
        return 0;
    }
    Py_ssize_t lo = 0, hi = n;
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (codes[mid] < code)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && codes[lo] == code;
}

/* One record taken: its bytes onto ``records``, its queue offset onto ``qoffs``. */
static int take(PyObject *records, PyObject *qoffs, const unsigned char *rec, long long size, long long qoff) {
    PyObject *b = PyBytes_FromStringAndSize((const char *)rec, (Py_ssize_t)size);
    if (b == NULL)
        return -1;
    int rc = PyList_Append(records, b);
    Py_DECREF(b);
    if (rc < 0)
        return -1;
    PyObject *q = PyLong_FromLongLong(qoff);
    if (q == NULL)
        return -1;
    rc = PyList_Append(qoffs, q);
    Py_DECREF(q);
    return rc;
}

static inline int name_wanted(PyObject *names, const unsigned char *key, Py_ssize_t klen) {
    if (names == Py_None)
        return 1;
    Py_ssize_t n = PyTuple_GET_SIZE(names);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *name = PyTuple_GET_ITEM(names, i);
        if (PyBytes_GET_SIZE(name) == klen && memcmp(PyBytes_AS_STRING(name), key, (size_t)klen) == 0)
            return 1;
    }
    return 0;
}

/* The record's properties blob (``name 0x01 value 0x02 ...``), or NULL when the record's lengths do
 * not add up within ``size`` (it is then unreadable, as for reader._props_blob). */
static const unsigned char *props_blob(const unsigned char *rec, long long size, long long *plen) {
    if (size < 40)
        return NULL;
    long long hs = 88 + ((be32(rec + 36) & 0x10) ? 12 : 0) + ((be32(rec + 36) & 0x20) ? 12 : 0);
    if (size < hs)
        return NULL;
    long long pos = hs + (int32_t)be32(rec + hs - 4);     /* the topic length byte */
    if (pos < hs || pos + 1 > size)
        return NULL;
    pos += 1 + rec[pos];
    if (pos + 2 > size)
        return NULL;
    *plen = (int16_t)(((unsigned)rec[pos] << 8) | rec[pos + 1]);
    if (*plen < 0 || pos + 2 + *plen > size)
        return NULL;
    return rec + pos + 2;
}

/* A dict of the properties named in ``names`` (a tuple of bytes; None: all), as layout.decode_properties
 * reads them: items split at 0x02, name and value at the first 0x01, items with an empty name or value
 * dropped, a later item wins, UTF-8 decoded with replacement. */
static PyObject *props_dict(const unsigned char *p, long long plen, PyObject *names) {
    PyObject *d = PyDict_New();
    const unsigned char *end = p + plen;
    while (d != NULL && p < end) {
        const unsigned char *stop = memchr(p, 0x02, (size_t)(end - p));
        if (stop == NULL)
            stop = end;
        const unsigned char *sep = memchr(p, 0x01, (size_t)(stop - p));
        if (sep != NULL && sep > p && stop > sep + 1 && name_wanted(names, p, sep - p)) {
            PyObject *k = PyUnicode_DecodeUTF8((const char *)p, sep - p, "replace");
            PyObject *v = k ? PyUnicode_DecodeUTF8((const char *)sep + 1, stop - sep - 1, "replace") : NULL;
            if (v == NULL || PyDict_SetItem(d, k, v) < 0)
                Py_CLEAR(d);
            Py_XDECREF(k);
            Py_XDECREF(v);
        }
        p = stop + 1;
    }
    return d;
}

static int call_match(PyObject *match, PyObject *d) {
    PyObject *r = PyObject_CallOneArg(match, d);
    if (r == NULL)
        return -1;
    int ok = PyObject_IsTrue(r);
    Py_DECREF(r);
    return ok;
}

#define MAX_NAMES 16
#define MAX_CACHED 4096

/* With the names known (at most MAX_NAMES) and a ``cache`` dict: the values of those names (a later
 * item wins; items with an empty name or value dropped, as props_dict) make the cache key, bytes of
 * (int32 length or -1 for absent, value) per name; the selector reads nothing else, so its answer
 * for a key is its answer for every record with that key.  A miss builds the dict and calls it. */
static int cached_match(PyObject *match, PyObject *names, PyObject *cache, const unsigned char *p, long long plen) {
    const unsigned char *vals[MAX_NAMES] = {0}, *end = p + plen;
    Py_ssize_t vlens[MAX_NAMES] = {0}, nnames = PyTuple_GET_SIZE(names), klen = 4 * nnames;
    while (p < end) {
        const unsigned char *stop = memchr(p, 0x02, (size_t)(end - p));
        if (stop == NULL)
            stop = end;
        const unsigned char *sep = memchr(p, 0x01, (size_t)(stop - p));
        for (Py_ssize_t j = 0; sep != NULL && sep > p && stop > sep + 1 && j < nnames; j++) {
            PyObject *name = PyTuple_GET_ITEM(names, j);
            if (PyBytes_GET_SIZE(name) == sep - p && memcmp(PyBytes_AS_STRING(name), p, (size_t)(sep - p)) == 0) {
                vals[j] = sep + 1;
                vlens[j] = stop - sep - 1;
                break;
            }
        }
        p = stop + 1;
    }
    for (Py_ssize_t j = 0; j < nnames; j++)
        klen += vlens[j];
    PyObject *key = PyBytes_FromStringAndSize(NULL, klen), *d = NULL;
    if (key == NULL)
        return -1;
    unsigned char *k = (unsigned char *)PyBytes_AS_STRING(key);
    for (Py_ssize_t j = 0; j < nnames; j++) {
        uint32_t n = vals[j] ? (uint32_t)vlens[j] : 0xFFFFFFFFu;
        k[0] = (unsigned char)(n >> 24); k[1] = (unsigned char)(n >> 16); k[2] = (unsigned char)(n >> 8);
        k[3] = (unsigned char)n;
        memcpy(k + 4, vals[j] ? vals[j] : k, (size_t)vlens[j]);
        k += 4 + vlens[j];
    }
    int ok = -1;
    PyObject *hit = PyDict_GetItemWithError(cache, key);
    if (hit != NULL) {
        ok = hit == Py_True;
        goto done;
    }
    if (PyErr_Occurred() || (d = PyDict_New()) == NULL)
        goto done;
    for (Py_ssize_t j = 0; j < nnames; j++) {
        if (vals[j] == NULL)
            continue;
        PyObject *name = PyTuple_GET_ITEM(names, j);
        PyObject *kk = PyUnicode_DecodeUTF8(PyBytes_AS_STRING(name), PyBytes_GET_SIZE(name), "replace");
        PyObject *v = kk ? PyUnicode_DecodeUTF8((const char *)vals[j], vlens[j], "replace") : NULL;
        int rc = v == NULL ? -1 : PyDict_SetItem(d, kk, v);
        Py_XDECREF(kk);
        Py_XDECREF(v);
        if (rc < 0)
            goto done;
    }
    ok = call_match(match, d);
    if (ok >= 0 && PyDict_GET_SIZE(cache) < MAX_CACHED && PyDict_SetItem(cache, key, ok ? Py_True : Py_False) < 0)
        ok = -1;
done:
    Py_XDECREF(d);
    Py_DECREF(key);
    return ok;
}

/* 1: ``match(properties)`` is true for the record, 0: it is not, -1: error; -2: the record is malformed. */
static int props_match(PyObject *match, PyObject *names, PyObject *cache, const unsigned char *rec,
                       long long size) {
    long long plen = 0;
    const unsigned char *blob = props_blob(rec, size, &plen);
    if (blob == NULL)
        return -2;
    if (cache != Py_None && names != Py_None && PyTuple_GET_SIZE(names) <= MAX_NAMES)
        return cached_match(match, names, cache, blob, plen);
    PyObject *d = props_dict(blob, plen, names);
    if (d == NULL)
        return -1;
    int ok = call_match(match, d);
    Py_DECREF(d);
    return ok;
}

/* tag_filter(units, queue_offset, codes, clog_min, max_msgs, max_bytes, taken, total, span, span_start)
 *   -> (records, queue_offsets, used, taken, total, removed, need)
 * units: whole 20-byte units from queue offset ``queue_offset``; codes: sorted native int32s, or None
 * for "every unit"; span: CommitLog bytes from offset span_start (None: no span yet).  Before each
 * unit, a batch that holds ``taken`` records (the caller's included) stops at max_msgs, or before
 * passing max_bytes with this unit's size.  A unit below clog_min, or whose record lacks the magic,
 * is skipped (``removed`` is set if nothing was taken yet).  ``need`` is -1, or the CommitLog offset
 * of the matching unit at ``used`` whose record lies outside the span.  With ``match`` (a callable;
 * ``names``: the property names it reads, bytes, or None for all) a record is taken only if
 * ``match(properties)`` is true; a record whose lengths do not add up is skipped as unreadable.
 * ``cache`` (a dict, or None) keeps match's answers by the values of ``names`` (cached_match). */
static PyObject *tag_filter(PyObject *self, PyObject *args) {
    Py_buffer units, codes = {0}, span = {0};
    PyObject *codes_obj, *span_obj, *result = NULL, *records = NULL, *qoffs = NULL, *match = Py_None;
    PyObject *names = Py_None, *cache = Py_None;
    long long qoff0, clog_min, max_msgs, max_bytes, taken, total, span_start;
    if (!PyArg_ParseTuple(args, "y*LOLLLLLOL|OOO", &units, &qoff0, &codes_obj, &clog_min, &max_msgs, &max_bytes,
                          &taken, &total, &span_obj, &span_start, &match, &names, &cache))
        return NULL;
    if (cache != Py_None && !PyDict_CheckExact(cache)) {
        PyErr_SetString(PyExc_TypeError, "cache must be a dict or None");
        goto done;
    }
    if (names != Py_None && !PyTuple_Check(names)) {
        PyErr_SetString(PyExc_TypeError, "names must be a tuple of bytes or None");
        goto done;
    }
    for (Py_ssize_t i = 0; names != Py_None && i < PyTuple_GET_SIZE(names); i++)
        if (!PyBytes_Check(PyTuple_GET_ITEM(names, i))) {
            PyErr_SetString(PyExc_TypeError, "names must be a tuple of bytes or None");
            goto done;
        }
    if (codes_obj != Py_None && PyObject_GetBuffer(codes_obj, &codes, PyBUF_SIMPLE) < 0)
        goto done;
    if (span_obj != Py_None && PyObject_GetBuffer(span_obj, &span, PyBUF_SIMPLE) < 0)
        goto done;
    if (units.len % 20 || codes.len % 4) {
        PyErr_SetString(PyExc_ValueError, "units must be whole 20-byte units and codes whole int32s");
        goto done;
    }
    records = PyList_New(0);
    qoffs = PyList_New(0);
    if (records == NULL || qoffs == NULL)
        goto done;
    const unsigned char *u = (const unsigned char *)units.buf;
    const unsigned char *sp = (const unsigned char *)span.buf;
    const int32_t *cs = (const int32_t *)codes.buf;
    Py_ssize_t n = units.len / 20, ncodes = codes.len / 4, used = n;
    long long span_end = span_obj == Py_None ? span_start : span_start + (long long)span.len, need = -1;
    int removed = 0;
    for (Py_ssize_t i = 0; i < n; i++, u += 20) {
        long long off = be64(u), size = (int32_t)be32(u + 8);
        if (taken && (taken >= max_msgs || total + size > max_bytes)) {
            used = i;
            break;
        }
        if (off < clog_min) {
            removed |= taken == 0;
            continue;
        }
        if (codes_obj != Py_None && !has_code(cs, ncodes, (int32_t)(uint32_t)(uint64_t)be64(u + 12)))
            continue;
        if (span_obj == Py_None || off < span_start || off >= span_end || size > span_end - off) {
            used = i;
            need = off;
            break;
        }
        const unsigned char *rec = sp + (off - span_start);
        if (size <= 0 || span_end - off < 8 || be32(rec + 4) != MESSAGE_MAGIC) {
            removed |= taken == 0;
            continue;
        }
        if (match != Py_None) {
            int ok = props_match(match, names, cache, rec, size);
            if (ok == -1)
                goto done;
            removed |= ok == -2 && taken == 0;
            if (ok != 1)
                continue;
        }
        if (take(records, qoffs, rec, size, qoff0 + i) < 0)
            goto done;
        taken++;
        total += size;
    }
    result = Py_BuildValue("OOnLLOL", records, qoffs, used, taken, total, removed ? Py_True : Py_False, need);
done:
    Py_XDECREF(records);
    Py_XDECREF(qoffs);
    if (span.obj != NULL)
        PyBuffer_Release(&span);
    if (codes.obj != NULL)
        PyBuffer_Release(&codes);
    PyBuffer_Release(&units);
    return result;
}

static PyMethodDef methods[] = {
    {"tag_filter", tag_filter, METH_VARARGS,
     "tag_filter(units, queue_offset, codes, clog_min, max_msgs, max_bytes, taken, total, span, span_start, "
     "match=None, names=None, cache=None) -> (records, queue_offsets, used, taken, total, removed, need)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_cqscan", "Tag-filtered ConsumeQueue reads (native).",
                                    -1, methods};

PyMODINIT_FUNC PyInit__cqscan(void) { return PyModule_Create(&module); }
