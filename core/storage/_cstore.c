/* Native helper for the CommitLog append hot path (optional: layout.py has the same in Python).
 *
 * Theory of operation
 * -------------------
 * ``encode_uniform`` encodes a run of records that share everything but the body and the born
 * timestamp (a Kafka batch of plain records, say).  It knows nothing of the record layout: the
 * caller (core/storage/layout.py, where the layout is defined once) passes a *template* -- the
 * fixed header of the first record, packed by the layout's own struct -- and the byte offsets of
 * the fields that change per record.  Per record it copies the template, patches TOTALSIZE,
 * BODYCRC, QUEUEOFFSET, PHYSICALOFFSET, BORNTIMESTAMP and BODYLENGTH (big-endian), appends the
 * body and the shared tail (TOPICLENGTH TOPIC PROPERTIESLENGTH PROPERTIES), and writes the
 * record's 20-byte ConsumeQueue unit (commitlog offset int64, size int32, tags code int64).
 *
 * Returns ``(records: bytes, units: bytes)``.  Raises TypeError/ValueError on bad arguments; it
 * never writes outside the buffers it allocated.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#include <zlib.h>

static inline void put_be32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)(v >> 24); p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8); p[3] = (unsigned char)v;
}

static inline void put_be64(unsigned char *p, uint64_t v) {
    put_be32(p, (uint32_t)(v >> 32)); put_be32(p + 4, (uint32_t)v);
}

static int check_field(Py_ssize_t off, Py_ssize_t width, Py_ssize_t header_len, const char *name) {
    if (off < 0 || off + width > header_len) {
        PyErr_Format(PyExc_ValueError, "field %s at %zd outside the %zd-byte template", name, off, header_len);
        return -1;
    }
    return 0;
}

/* encode_uniform(template, off_crc, off_qoff, off_phys, off_born_ts, bodies, born_timestamps, tail,
 *                queue_offset0, commitlog_offset0, tags_code) -> (records, units)
 * TOTALSIZE is at 0 and BODYLENGTH in the template's last 4 bytes.  born_timestamps: a sequence of
 * ints as long as bodies, or one int for all. */
static PyObject *encode_uniform(PyObject *self, PyObject *args) {
    Py_buffer tmpl, tail;
    Py_ssize_t off_crc, off_qoff, off_phys, off_born;
    PyObject *bodies_obj, *stamps_obj;
    long long qoff0, pos0, tags_code;
    if (!PyArg_ParseTuple(args, "y*nnnnOOy*LLL", &tmpl, &off_crc, &off_qoff, &off_phys, &off_born,
                          &bodies_obj, &stamps_obj, &tail, &qoff0, &pos0, &tags_code))
        return NULL;
    PyObject *result = NULL, *bodies = NULL, *stamps = NULL, *records = NULL, *units = NULL;
    long long one_stamp = 0;
    Py_ssize_t hlen = tmpl.len;
    if (hlen < 8 || check_field(off_crc, 4, hlen, "crc") || check_field(off_qoff, 8, hlen, "queue offset")
        || check_field(off_phys, 8, hlen, "commitlog offset") || check_field(off_born, 8, hlen, "born timestamp"))
        goto done;
    bodies = PySequence_Fast(bodies_obj, "bodies must be a sequence");
    if (bodies == NULL)
        goto done;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(bodies);
    PyObject **items = PySequence_Fast_ITEMS(bodies);
    if (PyLong_Check(stamps_obj)) {
        one_stamp = PyLong_AsLongLong(stamps_obj);
        if (one_stamp == -1 && PyErr_Occurred())
            goto done;
    } else {
        stamps = PySequence_Fast(stamps_obj, "born_timestamps must be an int or a sequence");
        if (stamps == NULL)
            goto done;
        if (PySequence_Fast_GET_SIZE(stamps) != n) {
            PyErr_SetString(PyExc_ValueError, "bodies and born_timestamps differ in length");
            goto done;
        }
    }
    Py_ssize_t total = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!PyBytes_Check(items[i])) {
            PyErr_SetString(PyExc_TypeError, "bodies must be bytes");
            goto done;
        }
        Py_ssize_t size = hlen + PyBytes_GET_SIZE(items[i]) + tail.len;
        if (size > INT32_MAX) {
            PyErr_SetString(PyExc_ValueError, "record larger than 2 GiB");
            goto done;
        }
        total += size;
    }
    records = PyBytes_FromStringAndSize(NULL, total);
    units = PyBytes_FromStringAndSize(NULL, n * 20);
    if (records == NULL || units == NULL)
        goto done;
    unsigned char *out = (unsigned char *)PyBytes_AS_STRING(records);
    unsigned char *u = (unsigned char *)PyBytes_AS_STRING(units);
    const unsigned char *t = (const unsigned char *)tmpl.buf;
    long long pos = pos0;
    for (Py_ssize_t i = 0; i < n; i++) {
        const unsigned char *body = (const unsigned char *)PyBytes_AS_STRING(items[i]);
        Py_ssize_t blen = PyBytes_GET_SIZE(items[i]);
        long long born = one_stamp;
        if (stamps != NULL) {
            born = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(stamps, i));
            if (born == -1 && PyErr_Occurred())
                goto done;
        }
        uint32_t size = (uint32_t)(hlen + blen + tail.len);
        uint32_t crc = (uint32_t)crc32(0L, body, (uInt)blen) & 0x7FFFFFFFu;
        memcpy(out, t, (size_t)hlen);
        put_be32(out, size);
        put_be32(out + off_crc, crc);
        put_be64(out + off_qoff, (uint64_t)(qoff0 + i));
        put_be64(out + off_phys, (uint64_t)pos);
        put_be64(out + off_born, (uint64_t)born);
        put_be32(out + hlen - 4, (uint32_t)blen);
        memcpy(out + hlen, body, (size_t)blen);
        memcpy(out + hlen + blen, tail.buf, (size_t)tail.len);
        put_be64(u, (uint64_t)pos);
        put_be32(u + 8, size);
        put_be64(u + 12, (uint64_t)tags_code);
        out += size;
        u += 20;
        pos += size;
    }
    result = PyTuple_Pack(2, records, units);
done:
    Py_XDECREF(records);
    Py_XDECREF(units);
    Py_XDECREF(bodies);
    Py_XDECREF(stamps);
    PyBuffer_Release(&tmpl);
    PyBuffer_Release(&tail);
    return result;
}

static PyMethodDef methods[] = {
    {"encode_uniform", encode_uniform, METH_VARARGS,
     "encode_uniform(template, off_crc, off_qoff, off_phys, off_born_ts, bodies, born_timestamps, tail, "
     "queue_offset0, commitlog_offset0, tags_code) -> (records, units)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_cstore", "CommitLog append hot path (native).", -1,
                                    methods};

PyMODINIT_FUNC PyInit__cstore(void) { return PyModule_Create(&module); }
