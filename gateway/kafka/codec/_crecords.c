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
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* Zig-zag varint at *pos (at most max_bytes bytes, not past end) into *out; 0 on malformation. */
static int read_varint(const unsigned char *buf, Py_ssize_t end, Py_ssize_t *pos, int max_bytes, int64_t *out) {
    uint64_t v = 0;
    int shift = 0;
    for (int i = 0; i < max_bytes; i++) {
        if (*pos >= end)
            return 0;
        unsigned char b = buf[(*pos)++];
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

static PyObject *plain_values(PyObject *self, PyObject *args) { return walk_plain(args, 0); }

static PyObject *plain_spans(PyObject *self, PyObject *args) { return walk_plain(args, 1); }

static PyMethodDef methods[] = {
    {"plain_values", plain_values, METH_VARARGS,
     "plain_values(payload, count, base_timestamp, keyed=False) -> (values, timestamps, keys) | None"},
    {"plain_spans", plain_spans, METH_VARARGS,
     "plain_spans(payload, count, base_timestamp, keyed=False) -> (spans, timestamps, keys, longest) | None"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_crecords", "Kafka record batch hot path (native).",
                                    -1, methods};

PyMODINIT_FUNC PyInit__crecords(void) { return PyModule_Create(&module); }
