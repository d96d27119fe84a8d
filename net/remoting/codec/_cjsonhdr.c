/* _cjsonhdr: the JSON remoting header of the common shape, decoded and encoded in one pass.
 *
 * Theory of operation
 * -------------------
 * Every RocketMQ request and response carries a small JSON header (remoting.py's module doc).  The
 * Python path (json's scanner, then checks and coercions per field) costs several microseconds a
 * frame, many times that on a core that was idle before the frame came.  This module handles the
 * shape real clients send and gives up on anything else:
 *
 *   decode(data) -> (code, language, version, opaque, flag, remark, ext) | None
 *     ``data`` is the header (UTF-8 JSON).  Handled: one object with the keys code, extFields, flag,
 *     language, opaque, remark, serializeTypeCurrentRPC, version (each at most once); code / flag /
 *     opaque / version JSON integers that fit a Java int; language a string; remark a string or null;
 *     extFields an object or null whose values are strings, integers (their decimal text), true /
 *     false ("true" / "false") or null (dropped), as remoting.py's coercion gives them; strings with
 *     any JSON escape except a lone surrogate, raw text valid UTF-8; whitespace as JSON allows.
 *     None for anything else (unknown or repeated keys, floats, nesting, bad JSON, lone surrogates):
 *     the caller then takes the Python path, which decodes it or raises the protocol error it always
 *     raised.  Hypothesis compares both (tests/gateway/rocketmq/test_json_header_native.py).
 *
 *   encode(code, ext, flag, language, opaque, remark, version) -> bytes | None
 *     The header ``encode_json_header`` writes (same key order, ``ensure_ascii=False`` escaping:
 *     \" \\ \n \r \t \b \f, other control characters as \u00XX), or None when a value is not a str
 *     (or not encodable as UTF-8): the Python path then converts or raises as before.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    const unsigned char *p, *end;
    char *buf;          /* scratch for unescaped string bytes */
    Py_ssize_t cap;
} Parser;

static void skip_ws(Parser *ps) {
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
        ps->p++;
}

static int hexval(unsigned char c) {
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static int read_hex4(const unsigned char *q, const unsigned char *end, unsigned *out) {
    if (end - q < 4)
        return -1;
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        int h = hexval(q[i]);
        if (h < 0)
            return -1;
        v = (v << 4) | (unsigned)h;
    }
    *out = v;
    return 0;
}

static int ensure_cap(Parser *ps, Py_ssize_t need) {
    if (need <= ps->cap)
        return 0;
    Py_ssize_t cap = ps->cap ? ps->cap : 256;
    while (cap < need)
        cap *= 2;
    char *nb = PyMem_Realloc(ps->buf, (size_t)cap);
    if (nb == NULL)
        return -1;
    ps->buf = nb;
    ps->cap = cap;
    return 0;
}

/* A JSON string at ps->p (the opening quote); raw and rawlen: its bytes when it has no escape, else the
 * unescaped bytes in ps->buf.  Returns 0, or 1 (outside the handled shape), or -1 (memory error). */
static int scan_string(Parser *ps, const char **raw, Py_ssize_t *rawlen) {
    const unsigned char *q = ps->p + 1, *end = ps->end, *start = q;
    while (q < end && *q != '"' && *q != '\\' && *q >= 0x20)
        q++;
    if (q >= end || *q < 0x20)
        return 1;
    if (*q == '"') {
        *raw = (const char *)start;
        *rawlen = q - start;
        ps->p = q + 1;
        return 0;
    }
    /* escapes: copy into the scratch buffer (an escape never grows: \uXXXX is 6 bytes, at most 4 out) */
    if (ensure_cap(ps, (Py_ssize_t)(end - start)) < 0)
        return -1;
    char *o = ps->buf;
    memcpy(o, start, (size_t)(q - start));
    o += q - start;
    while (q < end) {
        unsigned char c = *q;
        if (c == '"') {
            *raw = ps->buf;
            *rawlen = o - ps->buf;
            ps->p = q + 1;
            return 0;
        }
        if (c < 0x20)
            return 1;
        if (c != '\\') {
            *o++ = (char)c;
            q++;
            continue;
        }
        if (q + 1 >= end)
            return 1;
        unsigned char e = q[1];
        q += 2;
        switch (e) {
        case '"': *o++ = '"'; break;
        case '\\': *o++ = '\\'; break;
        case '/': *o++ = '/'; break;
        case 'b': *o++ = '\b'; break;
        case 'f': *o++ = '\f'; break;
        case 'n': *o++ = '\n'; break;
        case 'r': *o++ = '\r'; break;
        case 't': *o++ = '\t'; break;
        case 'u': {
            unsigned cp;
            if (read_hex4(q, end, &cp) < 0)
                return 1;
            q += 4;
            if (cp >= 0xD800 && cp <= 0xDBFF) {         /* a high surrogate: its low one must follow */
                unsigned lo;
                if (end - q < 6 || q[0] != '\\' || q[1] != 'u' || read_hex4(q + 2, end, &lo) < 0 ||
                    lo < 0xDC00 || lo > 0xDFFF)
                    return 1;
                q += 6;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                return 1;
            }
            if (cp < 0x80) {
                *o++ = (char)cp;
            } else if (cp < 0x800) {
                *o++ = (char)(0xC0 | (cp >> 6));
                *o++ = (char)(0x80 | (cp & 0x3F));
            } else if (cp < 0x10000) {
                *o++ = (char)(0xE0 | (cp >> 12));
                *o++ = (char)(0x80 | ((cp >> 6) & 0x3F));
                *o++ = (char)(0x80 | (cp & 0x3F));
            } else {
                *o++ = (char)(0xF0 | (cp >> 18));
                *o++ = (char)(0x80 | ((cp >> 12) & 0x3F));
                *o++ = (char)(0x80 | ((cp >> 6) & 0x3F));
                *o++ = (char)(0x80 | (cp & 0x3F));
            }
            break;
        }
        default:
            return 1;
        }
    }
    return 1;
}

/* A str from a scanned string (None with no error set: not UTF-8, outside the handled shape). */
static PyObject *make_str(const char *raw, Py_ssize_t len, int *outside) {
    PyObject *s = PyUnicode_DecodeUTF8(raw, len, "strict");
    if (s == NULL && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
        PyErr_Clear();
        *outside = 1;
    }
    return s;
}

/* A JSON integer at ps->p: 0 and *out, or 1 (not an integer of at most 18 digits: a fraction, an
 * exponent, leading zeros, too long). */
static int scan_int(Parser *ps, long long *out) {
    const unsigned char *q = ps->p, *end = ps->end;
    int neg = 0;
    if (q < end && *q == '-') {
        neg = 1;
        q++;
    }
    const unsigned char *d = q;
    long long v = 0;
    while (q < end && *q >= '0' && *q <= '9') {
        if (q - d >= 18)
            return 1;
        v = v * 10 + (*q - '0');
        q++;
    }
    if (q == d || (*d == '0' && q - d > 1))
        return 1;
    if (q < end && (*q == '.' || *q == 'e' || *q == 'E'))
        return 1;
    *out = neg ? -v : v;
    ps->p = q;
    return 0;
}

static int match_lit(Parser *ps, const char *lit) {
    size_t n = strlen(lit);
    if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, lit, n) != 0)
        return 0;
    ps->p += n;
    return 1;
}

enum { K_CODE = 1, K_EXT = 2, K_FLAG = 4, K_LANG = 8, K_OPAQUE = 16, K_REMARK = 32, K_SER = 64, K_VERSION = 128 };

static int key_bit(const char *k, Py_ssize_t n) {
#define KEY(s, b) if (n == (Py_ssize_t)sizeof(s) - 1 && memcmp(k, s, sizeof(s) - 1) == 0) return b
    KEY("code", K_CODE);
    KEY("extFields", K_EXT);
    KEY("flag", K_FLAG);
    KEY("language", K_LANG);
    KEY("opaque", K_OPAQUE);
    KEY("remark", K_REMARK);
    KEY("serializeTypeCurrentRPC", K_SER);
    KEY("version", K_VERSION);
#undef KEY
    return 0;
}

/* extFields' object at ps->p into ext; 0, 1 (outside the shape) or -1 (error). */
static int scan_ext(Parser *ps, PyObject *ext, int *nulls) {
    ps->p++;            /* '{' */
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == '}') {
        ps->p++;
        return 0;
    }
    for (;;) {
        skip_ws(ps);
        if (ps->p >= ps->end || *ps->p != '"')
            return 1;
        const char *raw;
        Py_ssize_t len;
        int r = scan_string(ps, &raw, &len);
        if (r)
            return r;
        int outside = 0;
        PyObject *key = make_str(raw, len, &outside);
        if (key == NULL)
            return outside ? 1 : -1;
        skip_ws(ps);
        if (ps->p >= ps->end || *ps->p != ':') {
            Py_DECREF(key);
            return 1;
        }
        ps->p++;
        skip_ws(ps);
        PyObject *val = NULL;
        int drop = 0;
        if (ps->p < ps->end && *ps->p == '"') {
            r = scan_string(ps, &raw, &len);
            if (r == 0)
                val = make_str(raw, len, &outside);
        } else if (ps->p < ps->end && (*ps->p == '-' || (*ps->p >= '0' && *ps->p <= '9'))) {
            long long v;
            r = scan_int(ps, &v);
            if (r == 0)
                val = PyUnicode_FromFormat("%lld", v);
        } else if (match_lit(ps, "true")) {
            val = PyUnicode_FromString("true");
        } else if (match_lit(ps, "false")) {
            val = PyUnicode_FromString("false");
        } else if (match_lit(ps, "null")) {
            drop = 1;           /* null: absent, as coerce_ext_value says */
        } else {
            r = 1;
        }
        if (r || (!drop && val == NULL)) {
            Py_DECREF(key);
            return r ? r : (outside ? 1 : -1);
        }
        if (drop) {
            /* json keeps the last value of a key at its first position: a None stands here until the
             * end, where the coercion's rule drops it (scan_ext's caller) */
            *nulls = 1;
            if (PyDict_SetItem(ext, key, Py_None) < 0) {
                Py_DECREF(key);
                return -1;
            }
        } else if (PyDict_SetItem(ext, key, val) < 0) {
            Py_DECREF(key);
            Py_DECREF(val);
            return -1;
        }
        Py_DECREF(key);
        Py_XDECREF(val);
        skip_ws(ps);
        if (ps->p >= ps->end)
            return 1;
        if (*ps->p == ',') {
            ps->p++;
            continue;
        }
        if (*ps->p == '}') {
            ps->p++;
            return 0;
        }
        return 1;
    }
}

static PyObject *jh_decode(PyObject *self, PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    Parser ps = {(const unsigned char *)view.buf, (const unsigned char *)view.buf + view.len, NULL, 0};
    PyObject *ext = NULL, *lang = NULL, *remark = NULL, *result = NULL;
    long long code = 0, flag = 0, opaque = 0, version = 0;
    int seen = 0, r = 1, nulls = 0;
    skip_ws(&ps);
    if (ps.p >= ps.end || *ps.p != '{')
        goto outside;
    ps.p++;
    skip_ws(&ps);
    if (ps.p < ps.end && *ps.p == '}') {
        ps.p++;
        goto closed;
    }
    for (;;) {
        skip_ws(&ps);
        if (ps.p >= ps.end || *ps.p != '"')
            goto outside;
        const char *raw;
        Py_ssize_t len;
        if ((r = scan_string(&ps, &raw, &len)) != 0)
            goto fail;
        int bit = key_bit(raw, len);
        if (bit == 0 || (seen & bit))
            goto outside;
        seen |= bit;
        skip_ws(&ps);
        if (ps.p >= ps.end || *ps.p != ':')
            goto outside;
        ps.p++;
        skip_ws(&ps);
        if (ps.p >= ps.end)
            goto outside;
        switch (bit) {
        case K_CODE: case K_FLAG: case K_OPAQUE: case K_VERSION: {
            long long v;
            if (scan_int(&ps, &v) || v < INT32_MIN || v > INT32_MAX)
                goto outside;
            if (bit == K_CODE) code = v; else if (bit == K_FLAG) flag = v;
            else if (bit == K_OPAQUE) opaque = v; else version = v;
            break;
        }
        case K_LANG: case K_REMARK: case K_SER: {
            if (*ps.p == '"') {
                if ((r = scan_string(&ps, &raw, &len)) != 0)
                    goto fail;
                int outside = 0;
                PyObject *s = make_str(raw, len, &outside);     /* UTF-8 checked even where ignored */
                if (s == NULL) {
                    r = outside ? 1 : -1;
                    goto fail;
                }
                if (bit == K_SER)
                    Py_DECREF(s);       /* read and ignored, as the Python path does */
                else if (bit == K_LANG)
                    lang = s;
                else
                    remark = s;
            } else if (bit != K_LANG && match_lit(&ps, "null")) {
                /* remark null: absent */
            } else {
                goto outside;
            }
            break;
        }
        case K_EXT:
            if (match_lit(&ps, "null"))
                break;
            if (*ps.p != '{')
                goto outside;
            ext = PyDict_New();
            if (ext == NULL)
                goto error;
            if ((r = scan_ext(&ps, ext, &nulls)) != 0)
                goto fail;
            break;
        }
        skip_ws(&ps);
        if (ps.p >= ps.end)
            goto outside;
        if (*ps.p == ',') {
            ps.p++;
            continue;
        }
        if (*ps.p == '}') {
            ps.p++;
            break;
        }
        goto outside;
    }
closed:
    skip_ws(&ps);
    if (ps.p != ps.end || !(seen & K_CODE))
        goto outside;
    if (ext == NULL && (ext = PyDict_New()) == NULL)
        goto error;
    if (nulls) {        /* JSON nulls mean absent: a copy without them, in order */
        PyObject *kept = PyDict_New(), *k, *v;
        Py_ssize_t pos = 0;
        if (kept == NULL)
            goto error;
        while (PyDict_Next(ext, &pos, &k, &v)) {
            if (v != Py_None && PyDict_SetItem(kept, k, v) < 0) {
                Py_DECREF(kept);
                goto error;
            }
        }
        Py_SETREF(ext, kept);
    }
    if (lang == NULL && (lang = PyUnicode_FromString("JAVA")) == NULL)
        goto error;
    result = Py_BuildValue("(LOLLLOO)", code, lang, version, opaque, flag, remark ? remark : Py_None, ext);
    goto done;
fail:
    if (r < 0)
        goto error;
outside:
    result = Py_NewRef(Py_None);
    goto done;
error:
    result = NULL;
done:
    Py_XDECREF(ext);
    Py_XDECREF(lang);
    Py_XDECREF(remark);
    PyMem_Free(ps.buf);
    PyBuffer_Release(&view);
    return result;
}

/* ---------------------------------------------------------------- encode */

typedef struct {
    char *b;
    Py_ssize_t n, cap;
} Out;

static int out_put(Out *o, const char *s, Py_ssize_t n) {
    if (o->n + n > o->cap) {
        Py_ssize_t cap = o->cap * 2 + n + 64;
        char *nb = PyMem_Realloc(o->b, (size_t)cap);
        if (nb == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        o->b = nb;
        o->cap = cap;
    }
    memcpy(o->b + o->n, s, (size_t)n);
    o->n += n;
    return 0;
}

#define PUT_LIT(o, s) out_put((o), (s), (Py_ssize_t)sizeof(s) - 1)

/* A str as a JSON string (ensure_ascii=False); 1 when it is not UTF-8 encodable (a lone surrogate). */
static int out_str(Out *o, PyObject *s) {
    Py_ssize_t n;
    const char *u = PyUnicode_AsUTF8AndSize(s, &n);
    if (u == NULL) {
        if (PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) {
            PyErr_Clear();
            return 1;
        }
        return -1;
    }
    if (PUT_LIT(o, "\"") < 0)
        return -1;
    Py_ssize_t run = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)u[i];
        if (c >= 0x20 && c != '"' && c != '\\')
            continue;
        if (out_put(o, u + run, i - run) < 0)
            return -1;
        run = i + 1;
        char esc[7];
        const char *e = esc;
        Py_ssize_t el = 2;
        switch (c) {
        case '"': e = "\\\""; break;
        case '\\': e = "\\\\"; break;
        case '\n': e = "\\n"; break;
        case '\r': e = "\\r"; break;
        case '\t': e = "\\t"; break;
        case '\b': e = "\\b"; break;
        case '\f': e = "\\f"; break;
        default:
            snprintf(esc, sizeof esc, "\\u%04x", c);
            el = 6;
        }
        if (out_put(o, e, el) < 0)
            return -1;
    }
    if (out_put(o, u + run, n - run) < 0)
        return -1;
    return PUT_LIT(o, "\"");
}

static int out_int(Out *o, long long v) {
    char num[24];
    int k = snprintf(num, sizeof num, "%lld", v);
    return out_put(o, num, k);
}

/* an exact int that fits a long long (0), else 1 */
static int exact_ll(PyObject *v, long long *out) {
    if (!PyLong_CheckExact(v))
        return 1;
    int overflow = 0;
    *out = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow || (*out == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return 1;
    }
    return 0;
}

static PyObject *jh_encode(PyObject *self, PyObject *args) {
    long long code, flag, opaque, version;
    PyObject *code_o, *ext, *flag_o, *lang, *opaque_o, *remark, *version_o;
    if (!PyArg_ParseTuple(args, "OOOOOOO", &code_o, &ext, &flag_o, &lang, &opaque_o, &remark, &version_o))
        return NULL;
    if (exact_ll(code_o, &code) || exact_ll(flag_o, &flag) || exact_ll(opaque_o, &opaque) ||
        exact_ll(version_o, &version) || !PyDict_CheckExact(ext) || !PyUnicode_CheckExact(lang) ||
        (remark != Py_None && !PyUnicode_CheckExact(remark)))
        Py_RETURN_NONE;
    Out o = {NULL, 0, 0};
    PyObject *result = NULL;
    int r;
#define STEP(x) do { r = (x); if (r) goto end; } while (0)
    STEP(PUT_LIT(&o, "{\"code\":"));
    STEP(out_int(&o, code));
    if (PyDict_GET_SIZE(ext) > 0) {
        STEP(PUT_LIT(&o, ",\"extFields\":{"));
        Py_ssize_t pos = 0;
        PyObject *k, *v;
        int first = 1;
        while (PyDict_Next(ext, &pos, &k, &v)) {
            if (!PyUnicode_CheckExact(k) || !PyUnicode_CheckExact(v)) {
                r = 1;
                goto end;
            }
            if (!first)
                STEP(PUT_LIT(&o, ","));
            first = 0;
            STEP(out_str(&o, k));
            STEP(PUT_LIT(&o, ":"));
            STEP(out_str(&o, v));
        }
        STEP(PUT_LIT(&o, "}"));
    }
    STEP(PUT_LIT(&o, ",\"flag\":"));
    STEP(out_int(&o, flag));
    STEP(PUT_LIT(&o, ",\"language\":"));
    STEP(out_str(&o, lang));
    STEP(PUT_LIT(&o, ",\"opaque\":"));
    STEP(out_int(&o, opaque));
    if (remark != Py_None) {
        STEP(PUT_LIT(&o, ",\"remark\":"));
        STEP(out_str(&o, remark));
    }
    STEP(PUT_LIT(&o, ",\"serializeTypeCurrentRPC\":\"JSON\",\"version\":"));
    STEP(out_int(&o, version));
    STEP(PUT_LIT(&o, "}"));
#undef STEP
    result = PyBytes_FromStringAndSize(o.b, o.n);
end:
    PyMem_Free(o.b);
    if (result == NULL && r > 0)
        Py_RETURN_NONE;
    return result;
}

static PyMethodDef methods[] = {
    {"decode", jh_decode, METH_O,
     "decode(header) -> (code, language, version, opaque, flag, remark, ext) or None (see the module doc)"},
    {"encode", jh_encode, METH_VARARGS,
     "encode(code, ext, flag, language, opaque, remark, version) -> bytes or None (see the module doc)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_cjsonhdr", NULL, -1, methods};

PyMODINIT_FUNC PyInit__cjsonhdr(void) { return PyModule_Create(&module); }
