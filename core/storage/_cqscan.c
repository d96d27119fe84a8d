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

/* tag_filter(units, queue_offset, codes, clog_min, max_msgs, max_bytes, taken, total, span, span_start)
 *   -> (records, queue_offsets, used, taken, total, removed, need)
 * units: whole 20-byte units from queue offset ``queue_offset``; codes: sorted native int32s, or None
 * for "every unit"; span: CommitLog bytes from offset span_start (None: no span yet).  Before each
 * unit, a batch that holds ``taken`` records (the caller's included) stops at max_msgs, or before
 * passing max_bytes with this unit's size.  A unit below clog_min, or whose record lacks the magic,
 * is skipped (``removed`` is set if nothing was taken yet).  ``need`` is -1, or the CommitLog offset
 * of the matching unit at ``used`` whose record lies outside the span. */
static PyObject *tag_filter(PyObject *self, PyObject *args) {
    Py_buffer units, codes = {0}, span = {0};
    PyObject *codes_obj, *span_obj, *result = NULL, *records = NULL, *qoffs = NULL;
    long long qoff0, clog_min, max_msgs, max_bytes, taken, total, span_start;
    if (!PyArg_ParseTuple(args, "y*LOLLLLLOL", &units, &qoff0, &codes_obj, &clog_min, &max_msgs, &max_bytes,
                          &taken, &total, &span_obj, &span_start))
        return NULL;
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
     "tag_filter(units, queue_offset, codes, clog_min, max_msgs, max_bytes, taken, total, span, span_start) -> "
     "(records, queue_offsets, used, taken, total, removed, need)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_cqscan", "Tag-filtered ConsumeQueue reads (native).",
                                    -1, methods};

PyMODINIT_FUNC PyInit__cqscan(void) { return PyModule_Create(&module); }
