/* cg_apply.c: see cg_apply.h. */
#include "cg_apply.h"

#include <stddef.h>

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *info;       /* owned */
    PyObject *owner;      /* owned: the Function subclass whose dict holds us */
    PyObject *fallback;   /* owned: a classmethod-like descriptor for other classes */
    cg_apply_impl_t impl;
} cg_apply_t;

static PyObject *apply_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf,
                                  PyObject *kwnames)
{
    cg_apply_t *a = (cg_apply_t *)self;
    if (a->info == NULL) {
        /* cleared by the cycle collector (tp_clear) while something could still call it */
        PyErr_SetString(PyExc_RuntimeError, "this Function.apply has been cleared");
        return NULL;
    }
    return a->impl(a->info, (PyObject **)args, PyVectorcall_NARGS(nargsf), kwnames);
}

static PyObject *apply_descr_get(PyObject *self, PyObject *obj, PyObject *type)
{
    cg_apply_t *a = (cg_apply_t *)self;
    descrgetfunc get;
    if (type == NULL || type == Py_None) {
        type = (obj != NULL && obj != Py_None) ? (PyObject *)Py_TYPE(obj) : NULL;
    }
    if (type == NULL || type == a->owner) {
        Py_INCREF(self);
        return self;
    }
    if (a->fallback == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "this Function.apply has been cleared");
        return NULL;
    }
    get = Py_TYPE(a->fallback)->tp_descr_get;
    if (get == NULL) {
        Py_INCREF(a->fallback);
        return a->fallback;
    }
    return get(a->fallback, obj, type);
}

static int apply_traverse(PyObject *self, visitproc visit, void *arg)
{
    cg_apply_t *a = (cg_apply_t *)self;
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(a->info);
    Py_VISIT(a->owner);
    Py_VISIT(a->fallback);
    return 0;
}

static int apply_clear(PyObject *self)
{
    cg_apply_t *a = (cg_apply_t *)self;
    Py_CLEAR(a->info);
    Py_CLEAR(a->owner);
    Py_CLEAR(a->fallback);
    return 0;
}

static void apply_dealloc(PyObject *self)
{
    PyObject_GC_UnTrack(self);
    apply_clear(self);
    PyObject_GC_Del(self);
}

static PyObject *apply_repr(PyObject *self)
{
    cg_apply_t *a = (cg_apply_t *)self;
    PyObject *name = a->owner ? PyObject_GetAttrString(a->owner, "__qualname__") : NULL;
    PyObject *r;
    if (name == NULL) {
        PyErr_Clear();
        return PyUnicode_FromString("<bound method Function.apply>");
    }
    r = PyUnicode_FromFormat("<bound method Function.apply of <class '%U'>>", name);
    Py_DECREF(name);
    return r;
}

static PyObject *apply_get_self(PyObject *self, void *closure)
{
    cg_apply_t *a = (cg_apply_t *)self;
    (void)closure;
    if (a->owner == NULL) {
        Py_RETURN_NONE;
    }
    Py_INCREF(a->owner);
    return a->owner;
}

static PyObject *apply_get_name(PyObject *self, void *closure)
{
    (void)self;
    (void)closure;
    return PyUnicode_FromString("apply");
}

static PyObject *apply_get_qualname(PyObject *self, void *closure)
{
    (void)self;
    (void)closure;
    return PyUnicode_FromString("Function.apply");
}

static PyGetSetDef apply_getset[] = {
    {"__self__", apply_get_self, NULL, "the Function class this apply runs", NULL},
    {"__name__", apply_get_name, NULL, NULL, NULL},
    {"__qualname__", apply_get_qualname, NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject cg_apply_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "cgrad._C.FunctionApply",
    .tp_basicsize = sizeof(cg_apply_t),
    .tp_dealloc = apply_dealloc,
    .tp_vectorcall_offset = offsetof(cg_apply_t, vectorcall),
    .tp_repr = apply_repr,
    .tp_call = PyVectorcall_Call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "Function.apply(*args, **kwargs): run forward with grad mode off and record a "
              "graph node if an input requires grad.",
    .tp_traverse = apply_traverse,
    .tp_clear = apply_clear,
    .tp_getset = apply_getset,
    .tp_descr_get = apply_descr_get,
};

int cg_apply_type_ready(void)
{
    return PyType_Ready(&cg_apply_type);
}

PyObject *cg_apply_new(PyObject *info, PyObject *owner, PyObject *fallback,
                       cg_apply_impl_t impl)
{
    cg_apply_t *a = PyObject_GC_New(cg_apply_t, &cg_apply_type);
    if (a == NULL) {
        return NULL;
    }
    a->vectorcall = apply_vectorcall;
    Py_INCREF(info);
    a->info = info;
    Py_INCREF(owner);
    a->owner = owner;
    Py_INCREF(fallback);
    a->fallback = fallback;
    a->impl = impl;
    PyObject_GC_Track((PyObject *)a);
    return (PyObject *)a;
}

int cg_apply_check(PyObject *o)
{
    return Py_TYPE(o) == &cg_apply_type;
}
