/* Bracket: a callable that runs Python hooks before and after a call without a frame of
 * its own on the stack while the call runs (see transforms/_capture/_bracket.py, whose
 * PyBracket behaves the same with one frame). Recording wraps JAX's transformed function
 * and the user's function in these, so the user's function sees JAX's stack depth. */
#include "_core.h"
#include <structmember.h>

typedef struct {
    PyObject_HEAD
    PyObject *open;     /* open(args, kwargs) -> None | (target, args, kwargs, returned, raised) */
    PyObject *fun;      /* called with the caller's arguments when open returns None */
    PyObject *dict;     /* functools.update_wrapper's attributes */
    PyObject *weakrefs;
} Bracket;

static int
bracket_init(Bracket *self, PyObject *args, PyObject *kwargs)
{
    PyObject *open, *fun;
    static char *names[] = {"open", "fun", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO:Bracket", names, &open, &fun))
        return -1;
    Py_INCREF(open);
    Py_INCREF(fun);
    Py_XSETREF(self->open, open);
    Py_XSETREF(self->fun, fun);
    return 0;
}

/* The exception being raised, taken off the thread (a new reference, its traceback set). */
static PyObject *
take_exception(void)
{
#if PY_VERSION_HEX >= 0x030C0000
    return PyErr_GetRaisedException();
#else
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    if (tb != NULL)
        PyException_SetTraceback(value, tb);
    Py_XDECREF(type);
    Py_XDECREF(tb);
    return value;
#endif
}

/* Raise `exc` again (stolen), with the traceback it holds now. */
static void
restore_exception(PyObject *exc)
{
#if PY_VERSION_HEX >= 0x030C0000
    PyErr_SetRaisedException(exc);
#else
    PyObject *tb = PyException_GetTraceback(exc);
    PyErr_Restore(Py_NewRef((PyObject *)Py_TYPE(exc)), exc, tb);
#endif
}

static PyObject *
bracket_call(Bracket *self, PyObject *args, PyObject *kwargs)
{
    PyObject *run = PyObject_CallFunctionObjArgs(self->open, args, kwargs ? kwargs : Py_None,
                                                 NULL);
    if (run == NULL)
        return NULL;
    if (run == Py_None) {
        Py_DECREF(run);
        return PyObject_Call(self->fun, args, kwargs);
    }
    if (!PyTuple_Check(run) || PyTuple_GET_SIZE(run) != 5) {
        Py_DECREF(run);
        PyErr_SetString(PyExc_TypeError,
                        "Bracket: open must return None or (target, args, kwargs, returned, raised)");
        return NULL;
    }
    PyObject *target = PyTuple_GET_ITEM(run, 0), *call_args = PyTuple_GET_ITEM(run, 1),
             *call_kwargs = PyTuple_GET_ITEM(run, 2), *returned = PyTuple_GET_ITEM(run, 3),
             *raised = PyTuple_GET_ITEM(run, 4);
    if (!PyTuple_Check(call_args) || (call_kwargs != Py_None && !PyDict_Check(call_kwargs))) {
        Py_DECREF(run);
        PyErr_SetString(PyExc_TypeError, "Bracket: open's args must be a tuple, kwargs a dict or None");
        return NULL;
    }
    /* NB: the run's parts are held here, not by the tuple, while the target runs: nothing
     * the collector tracks refers to them (JAX's leak checker walks gc referrers). */
    Py_INCREF(target);
    Py_INCREF(call_args);
    Py_INCREF(call_kwargs);
    Py_INCREF(returned);
    Py_INCREF(raised);
    Py_DECREF(run);
    PyObject *out = PyObject_Call(target, call_args, call_kwargs == Py_None ? NULL : call_kwargs);
    Py_DECREF(target);
    Py_DECREF(call_args);
    Py_DECREF(call_kwargs);
    PyObject *result = NULL;
    if (out != NULL) {
        result = PyObject_CallOneArg(returned, out);
        Py_DECREF(out);
    }
    else {
        PyObject *exc = take_exception();
        PyObject *r = PyObject_CallOneArg(raised, exc);
        if (r == NULL) {  /* the hook failed: its error, with the call's as its context */
            PyObject *hook_error = take_exception();
            PyException_SetContext(hook_error, exc);  /* steals exc */
            restore_exception(hook_error);
        }
        else {
            Py_DECREF(r);
            restore_exception(exc);
        }
    }
    Py_DECREF(returned);
    Py_DECREF(raised);
    return result;
}

static int
bracket_traverse(Bracket *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->open);
    Py_VISIT(self->fun);
    Py_VISIT(self->dict);
    return 0;
}

static int
bracket_clear(Bracket *self)
{
    Py_CLEAR(self->open);
    Py_CLEAR(self->fun);
    Py_CLEAR(self->dict);
    return 0;
}

static void
bracket_dealloc(Bracket *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    if (self->weakrefs != NULL)
        PyObject_ClearWeakRefs((PyObject *)self);
    bracket_clear(self);
    tp->tp_free(self);
    Py_DECREF(tp);
}

static PyObject *
bracket_repr(Bracket *self)
{
    return PyUnicode_FromFormat("<Bracket of %R>", self->fun);
}

static PyMemberDef bracket_members[] = {
    {"__dictoffset__", T_PYSSIZET, offsetof(Bracket, dict), READONLY},
    {"__weaklistoffset__", T_PYSSIZET, offsetof(Bracket, weakrefs), READONLY},
    {"fun", T_OBJECT, offsetof(Bracket, fun), READONLY, "what a call runs when open returns None"},
    {NULL}
};

static PyGetSetDef bracket_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict},
    {NULL}
};

static PyType_Slot bracket_slots[] = {
    {Py_tp_doc, "Bracket(open, fun): see transforms._capture._bracket.PyBracket."},
    {Py_tp_new, PyType_GenericNew},
    {Py_tp_init, bracket_init},
    {Py_tp_call, bracket_call},
    {Py_tp_dealloc, bracket_dealloc},
    {Py_tp_traverse, bracket_traverse},
    {Py_tp_clear, bracket_clear},
    {Py_tp_repr, bracket_repr},
    {Py_tp_members, bracket_members},
    {Py_tp_getset, bracket_getset},
    {0, NULL},
};

static PyType_Spec bracket_spec = {
    .name = "transforms._capture._core.Bracket",
    .basicsize = sizeof(Bracket),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = bracket_slots,
};

PyObject *
bracket_type_new(PyObject *module)
{
    return PyType_FromModuleAndSpec(module, &bracket_spec, NULL);
}
