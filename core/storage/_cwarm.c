/* Native page-cache warmer thread for the CommitLog tail (optional: without it there is no warm-ahead).
 *
 * Theory of operation
 * -------------------
 * core/storage/warmer.py decides *what* to warm (a range past the CommitLog write offset); this module
 * only reads it, on a POSIX thread of its own that never takes the GIL (a Python thread at idle
 * priority could be preempted while holding the GIL, and the event loop would wait for it).
 *
 * ``Warmer(quiet_s)`` starts the thread (SCHED_IDLE: it only runs on CPU time nobody else wants) and
 * it reads only after ``quiet_s`` without a ``touch()`` (the store calls it on every write and read):
 * on a VM, "idle" CPU is not free -- the reads fault fresh memory in from the host, and a vCPU stuck
 * in such a fault delays the wake-ups of the threads that want it (measured: client-bound Kafka
 * produce runs ~35 % slower with the warmer reading during them), so it works in the gaps between
 * bursts, not during them.
 * ``request(fd, key, start, end)`` is called by the event loop: it never blocks -- it only try-locks
 * the small mutex and returns False when the thread holds it, and the caller asks again on its next
 * write.  The same ``key`` (the segment's base offset) extends the range and skips ahead to
 * ``start``; a new key hands over a descriptor of our own for the same file (``own_descriptor``)
 * that the thread switches to between two reads
 * (only the thread closes a descriptor it may be reading, and closing the segment cannot pull it
 * from under a read).  The thread reads the range in 1 MiB ``pread`` calls into a scratch
 * buffer, dropping the mutex around each read; a read error ends that range (the hint is lost, the
 * appends just pay for their pages themselves).  ``progress()`` -> (key, position) for tests and
 * statistics; ``close()`` stops and joins the thread and closes its descriptors.
 */
#define _GNU_SOURCE
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

enum { CHUNK = 1 << 20 };

typedef struct {
    PyObject_HEAD
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int started, stopping;
    int fd;             /* our dup of the segment being warmed, -1 none (only the thread closes it) */
    long long key;      /* its segment base */
    long long pos, end; /* file positions still to read: [pos, end) */
    int next_fd;        /* a newer segment handed over by request(), -1 none: the thread switches to it */
    long long next_key, next_pos, next_end;
    long long quiet_ns; /* read only after this long without touch() */
    long long last_ns;  /* CLOCK_MONOTONIC of the last touch() (atomic, no lock) */
} Warmer;

static long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* A descriptor of our own for the file behind ``fd``: a new open file description (through /proc) with
 * readahead off, so the thread reads exactly the requested range -- the kernel's readahead would go
 * up to read_ahead_kb further (8 MiB on a virtio disk) -- without changing the readahead state of
 * the segment's own descriptor and mapping.  Falls back to dup() where /proc is not mounted. */
static int own_descriptor(int fd) {
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    int mine = open(path, O_RDONLY | O_CLOEXEC);
    if (mine < 0)
        return fcntl(fd, F_DUPFD_CLOEXEC, 0);
    (void)posix_fadvise(mine, 0, 0, POSIX_FADV_RANDOM);
    return mine;
}

static void idle_priority(void) {
    struct sched_param sp = {0};
    if (pthread_setschedparam(pthread_self(), SCHED_IDLE, &sp) != 0)
        (void)setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 19);
}

static void *run(void *arg) {
    Warmer *w = (Warmer *)arg;
    char *buf = malloc(CHUNK);
    idle_priority();
    pthread_mutex_lock(&w->mu);
    while (!w->stopping) {
        if (w->next_fd >= 0) {           /* switch segments between reads: the old fd is not in use */
            if (w->fd >= 0)
                close(w->fd);
            w->fd = w->next_fd;
            w->key = w->next_key;
            w->pos = w->next_pos;
            w->end = w->next_end;
            w->next_fd = -1;
        }
        if (buf == NULL || w->fd < 0 || w->pos >= w->end) {
            pthread_cond_wait(&w->cv, &w->mu);
            continue;
        }
        long long wait = __atomic_load_n(&w->last_ns, __ATOMIC_RELAXED) + w->quiet_ns - now_ns();
        if (wait > 0) {                   /* the store is busy: stay out of its way (close() wakes us) */
            struct timespec until;
            clock_gettime(CLOCK_MONOTONIC, &until);
            long long ns = until.tv_nsec + wait % 1000000000LL;
            until.tv_sec += wait / 1000000000LL + ns / 1000000000LL;
            until.tv_nsec = ns % 1000000000LL;
            pthread_cond_timedwait(&w->cv, &w->mu, &until);
            continue;
        }
        int fd = w->fd;
        long long pos = w->pos;
        size_t want = (size_t)(w->end - pos < CHUNK ? w->end - pos : CHUNK);
        pthread_mutex_unlock(&w->mu);
        ssize_t n = pread(fd, buf, want, (off_t)pos);
        int err = n < 0 ? errno : 0;
        pthread_mutex_lock(&w->mu);
        if (n > 0) {
            if (w->pos < pos + n)
                w->pos = pos + n;
        } else if (err != EINTR) {
            w->end = w->pos;              /* end of file or an error: drop the rest of this range */
        }
    }
    pthread_mutex_unlock(&w->mu);
    free(buf);
    return NULL;
}

static PyObject *Warmer_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    double quiet_s = 0.0;
    if (!PyArg_ParseTuple(args, "|d:Warmer", &quiet_s))
        return NULL;
    Warmer *w = (Warmer *)type->tp_alloc(type, 0);
    if (w == NULL)
        return NULL;
    pthread_condattr_t ca;
    pthread_mutex_init(&w->mu, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);   /* timed waits measured like now_ns() */
    pthread_cond_init(&w->cv, &ca);
    pthread_condattr_destroy(&ca);
    w->fd = w->next_fd = -1;
    w->key = w->next_key = -1;
    w->quiet_ns = (long long)(quiet_s * 1e9);
    int rc = pthread_create(&w->thread, NULL, run, w);
    if (rc != 0) {
        Py_DECREF(w);
        errno = rc;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    w->started = 1;
    return (PyObject *)w;
}

static void stop(Warmer *w) {
    if (!w->started)
        return;
    pthread_mutex_lock(&w->mu);
    w->stopping = 1;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    Py_BEGIN_ALLOW_THREADS
    pthread_join(w->thread, NULL);
    Py_END_ALLOW_THREADS
    w->started = 0;
    if (w->fd >= 0)
        close(w->fd);
    if (w->next_fd >= 0)
        close(w->next_fd);
    w->fd = w->next_fd = -1;
}

static PyObject *Warmer_request(Warmer *w, PyObject *args) {
    int fd;
    long long key, start, end;
    if (!PyArg_ParseTuple(args, "iLLL:request", &fd, &key, &start, &end))
        return NULL;
    if (!w->started)
        Py_RETURN_FALSE;
    if (pthread_mutex_trylock(&w->mu) != 0)
        Py_RETURN_FALSE;              /* the thread is between reads: ask again later, never wait */
    if (w->next_fd >= 0 && key == w->next_key) {          /* extend the segment not yet switched to */
        if (w->next_pos < start)
            w->next_pos = start;
        if (w->next_end < end)
            w->next_end = end;
    } else if (w->next_fd < 0 && w->fd >= 0 && key == w->key) { /* extend the current one */
        if (w->pos < start)
            w->pos = start;
        if (w->end < end)
            w->end = end;
    } else {                                               /* hand over a new segment */
        int mine = own_descriptor(fd);
        if (mine < 0) {
            int err = errno;
            pthread_mutex_unlock(&w->mu);
            errno = err;
            return PyErr_SetFromErrno(PyExc_OSError);
        }
        if (w->next_fd >= 0)
            close(w->next_fd);                             /* never read: the thread takes it under the lock */
        w->next_fd = mine;
        w->next_key = key;
        w->next_pos = start;
        w->next_end = end;
    }
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    Py_RETURN_TRUE;
}

static PyObject *Warmer_touch(Warmer *w, PyObject *unused) {
    __atomic_store_n(&w->last_ns, now_ns(), __ATOMIC_RELAXED);
    Py_RETURN_NONE;
}

static PyObject *Warmer_progress(Warmer *w, PyObject *unused) {
    long long key, pos;
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&w->mu);
    key = w->key;
    pos = w->pos;
    pthread_mutex_unlock(&w->mu);
    Py_END_ALLOW_THREADS
    return Py_BuildValue("(LL)", key, pos);
}

static PyObject *Warmer_close(Warmer *w, PyObject *unused) {
    stop(w);
    Py_RETURN_NONE;
}

static void Warmer_dealloc(Warmer *w) {
    stop(w);
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
    Py_TYPE(w)->tp_free((PyObject *)w);
}

static PyMethodDef Warmer_methods[] = {
    {"request", (PyCFunction)Warmer_request, METH_VARARGS,
     "request(fd, key, start, end) -> bool: warm file range [start, end) of fd (segment key); False if busy"},
    {"touch", (PyCFunction)Warmer_touch, METH_NOARGS, "touch(): the store was used now (reads wait for quiet)"},
    {"progress", (PyCFunction)Warmer_progress, METH_NOARGS, "progress() -> (key, position read up to)"},
    {"close", (PyCFunction)Warmer_close, METH_NOARGS, "stop and join the thread"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject WarmerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "rokka.core.storage._cwarm.Warmer",
    .tp_basicsize = sizeof(Warmer),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A page-cache warmer thread (idle priority, no GIL).",
    .tp_new = Warmer_new,
    .tp_dealloc = (destructor)Warmer_dealloc,
    .tp_methods = Warmer_methods,
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_cwarm", "CommitLog page-cache warmer thread (native).",
                                    -1, NULL};

PyMODINIT_FUNC PyInit__cwarm(void) {
    if (PyType_Ready(&WarmerType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&WarmerType);
    if (PyModule_AddObject(m, "Warmer", (PyObject *)&WarmerType) < 0) {
        Py_DECREF(&WarmerType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
