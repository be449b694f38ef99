/* cg_tfn.c: see cg_tfn.h. */
#include "cg_tfn.h"

#include <stddef.h>

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *fn;           /* owned */
    PyObject *name;         /* owned: str */
    PyObject *tensor_type;  /* owned */
    PyObject *dict;         /* owned: __dict__ */
    PyObject *aliases;      /* owned: dict keyword alias -> torch's name, or NULL */
    int check;              /* the first positional argument must be a Tensor */
} cg_tfn_t;

/* kwnames with every alias replaced by its torch name (NEW reference), or kwnames itself
 * (a new reference too) when none is an alias; NULL with an exception set. */
static PyObject *rename_keywords(PyObject *aliases, PyObject *kwnames)
{
    Py_ssize_t n = PyTuple_GET_SIZE(kwnames), i;
    PyObject *out = NULL;
    for (i = 0; i < n; i++) {
        PyObject *to = PyDict_GetItemWithError(aliases, PyTuple_GET_ITEM(kwnames, i));
        if (to == NULL) {
            if (PyErr_Occurred()) {
                Py_XDECREF(out);
                return NULL;
            }
            continue;
        }
        if (out == NULL) {
            out = PyTuple_GetSlice(kwnames, 0, n);      /* a copy */
            if (out == NULL) {
                return NULL;
            }
        }
        PyObject *old = PyTuple_GET_ITEM(out, i);
        Py_INCREF(to);
        PyTuple_SET_ITEM(out, i, to);
        Py_DECREF(old);
    }
    if (out == NULL) {
        Py_INCREF(kwnames);
        return kwnames;
    }
    return out;
}

/* The key of the attribute dict that holds the out= form of the function (cgrad/_api.py,
 * Note [out= arguments]); interned at type initialisation. */
static PyObject *out_impl_key = NULL;

/* Whether one of the keyword names is "out". */
static int has_out(PyObject *kwnames)
{
    Py_ssize_t n = PyTuple_GET_SIZE(kwnames), i;
    for (i = 0; i < n; i++) {
        PyObject *k = PyTuple_GET_ITEM(kwnames, i);
        if (PyUnicode_GET_LENGTH(k) == 3 && PyUnicode_CompareWithASCIIString(k, "out") == 0) {
            return 1;
        }
    }
    return 0;
}

static PyObject *tfn_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf,
                                PyObject *kwnames)
{
    cg_tfn_t *f = (cg_tfn_t *)self;
    if (f->fn == NULL || f->name == NULL || f->tensor_type == NULL) {
        /* cleared by the cycle collector (tp_clear) while something could still call it */
        PyErr_SetString(PyExc_RuntimeError, "this cgrad function has been cleared");
        return NULL;
    }
    if (f->check && PyVectorcall_NARGS(nargsf) > 0 &&
        !PyObject_TypeCheck(args[0], (PyTypeObject *)f->tensor_type)) {
        PyErr_Format(PyExc_TypeError,
                     "%U(): argument 'input' (position 1) must be Tensor, not %s", f->name,
                     Py_TYPE(args[0])->tp_name);
        return NULL;
    }
    if (kwnames == NULL) {
        return PyObject_Vectorcall(f->fn, args, nargsf, NULL);
    }
    PyObject *target = f->fn;       /* borrowed */
    if (f->dict != NULL && has_out(kwnames)) {
        /* out=: the function installed to write into it, when there is one */
        PyObject *impl = PyDict_GetItemWithError(f->dict, out_impl_key);   /* borrowed */
        if (impl != NULL) {
            target = impl;
        } else if (PyErr_Occurred()) {
            return NULL;
        }
    }
    Py_INCREF(target);              /* the call may replace the dict's entry */
    PyObject *res;
    if (f->aliases != NULL) {
        PyObject *names = rename_keywords(f->aliases, kwnames);
        if (names == NULL) {
            Py_DECREF(target);
            return NULL;
        }
        res = PyObject_Vectorcall(target, args, nargsf, names);
        Py_DECREF(names);
    } else {
        res = PyObject_Vectorcall(target, args, nargsf, kwnames);
    }
    Py_DECREF(target);
    return res;
}

static PyObject *tfn_descr_get(PyObject *self, PyObject *obj, PyObject *type)
{
    /* on a class, a method: bound to an instance, the class's own attribute otherwise */
    (void)type;
    if (obj == NULL || obj == Py_None) {
        Py_INCREF(self);
        return self;
    }
    return PyMethod_New(self, obj);
}

static int tfn_traverse(PyObject *self, visitproc visit, void *arg)
{
    cg_tfn_t *f = (cg_tfn_t *)self;
    Py_VISIT(f->fn);
    Py_VISIT(f->name);
    Py_VISIT(f->tensor_type);
    Py_VISIT(f->dict);
    Py_VISIT(f->aliases);
    return 0;
}

static int tfn_clear(PyObject *self)
{
    cg_tfn_t *f = (cg_tfn_t *)self;
    Py_CLEAR(f->fn);
    Py_CLEAR(f->name);
    Py_CLEAR(f->tensor_type);
    Py_CLEAR(f->dict);
    Py_CLEAR(f->aliases);
    return 0;
}

static void tfn_dealloc(PyObject *self)
{
    PyObject_GC_UnTrack(self);
    tfn_clear(self);
    PyObject_GC_Del(self);
}

static PyObject *tfn_repr(PyObject *self)
{
    cg_tfn_t *f = (cg_tfn_t *)self;
    if (f->fn == NULL) {
        return PyUnicode_FromString("<cgrad function>");
    }
    return PyObject_Repr(f->fn);
}

static PyObject *tfn_reduce(PyObject *self, PyObject *unused)
{
    /* pickled by name, as functions are: module.qualname must find this object */
    cg_tfn_t *f = (cg_tfn_t *)self;
    (void)unused;
    if (f->dict == NULL) {
        PyErr_SetString(PyExc_TypeError, "cannot pickle a cleared cgrad function");
        return NULL;
    }
    PyObject *q = PyDict_GetItemString(f->dict, "__qualname__");   /* borrowed */
    if (q == NULL) {
        PyErr_SetString(PyExc_TypeError, "cgrad function without __qualname__");
        return NULL;
    }
    Py_INCREF(q);
    return q;
}

static PyMethodDef tfn_methods[] = {
    {"__reduce__", tfn_reduce, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef tfn_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject cg_tfn_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "cgrad._C.TensorFunction",
    .tp_basicsize = sizeof(cg_tfn_t),
    .tp_dealloc = tfn_dealloc,
    .tp_vectorcall_offset = offsetof(cg_tfn_t, vectorcall),
    .tp_repr = tfn_repr,
    .tp_call = PyVectorcall_Call,
    .tp_getattro = PyObject_GenericGetAttr,
    .tp_setattro = PyObject_GenericSetAttr,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL |
                Py_TPFLAGS_METHOD_DESCRIPTOR,
    .tp_doc = "A cgrad function or Tensor method with torch's calling conventions.",
    .tp_descr_get = tfn_descr_get,
    .tp_traverse = tfn_traverse,
    .tp_clear = tfn_clear,
    .tp_methods = tfn_methods,
    .tp_getset = tfn_getset,
    .tp_dictoffset = offsetof(cg_tfn_t, dict),
};

int cg_tfn_type_ready(void)
{
    if (out_impl_key == NULL) {
        out_impl_key = PyUnicode_InternFromString("_out_impl");
        if (out_impl_key == NULL) {
            return -1;
        }
    }
    return PyType_Ready(&cg_tfn_type);
}

/* Copy one attribute of fn into d (a missing attribute is skipped). Returns 0 or -1. */
static int copy_attr(PyObject *d, PyObject *fn, const char *attr)
{
    PyObject *v = PyObject_GetAttrString(fn, attr);
    if (v == NULL) {
        if (PyErr_ExceptionMatches(PyExc_AttributeError)) {
            PyErr_Clear();
            return 0;
        }
        return -1;
    }
    int r = PyDict_SetItemString(d, attr, v);
    Py_DECREF(v);
    return r;
}

PyObject *cg_tfn_new(PyObject *fn, PyObject *name, PyObject *tensor_type, int check,
                     PyObject *aliases)
{
    static const char *attrs[] = {"__name__", "__qualname__", "__doc__", "__module__"};
    if (aliases == Py_None) {
        aliases = NULL;
    }
    if (aliases != NULL && !PyDict_Check(aliases)) {
        PyErr_SetString(PyExc_TypeError, "aliases must be a dict or None");
        return NULL;
    }
    PyObject *d = PyDict_New();
    if (d == NULL) {
        return NULL;
    }
    if (PyDict_SetItemString(d, "__wrapped__", fn) < 0) {
        Py_DECREF(d);
        return NULL;
    }
    for (size_t i = 0; i < sizeof(attrs) / sizeof(attrs[0]); i++) {
        if (copy_attr(d, fn, attrs[i]) < 0) {
            Py_DECREF(d);
            return NULL;
        }
    }
    cg_tfn_t *f = PyObject_GC_New(cg_tfn_t, &cg_tfn_type);
    if (f == NULL) {
        Py_DECREF(d);
        return NULL;
    }
    f->vectorcall = tfn_vectorcall;
    Py_INCREF(fn);
    f->fn = fn;
    Py_INCREF(name);
    f->name = name;
    Py_INCREF(tensor_type);
    f->tensor_type = tensor_type;
    f->dict = d;            /* the reference from PyDict_New */
    Py_XINCREF(aliases);
    f->aliases = aliases;
    f->check = check;
    PyObject_GC_Track((PyObject *)f);
    return (PyObject *)f;
}
