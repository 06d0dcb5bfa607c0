/* JitCall: the call of what transforms.jit returns (transforms/_wrappers/_jit.py, Jitted),
 * choosing between JAX's jitted object and the recording path with no Python code run:
 * outside record() a cached call costs what jax.jit(f)'s does. PyJitCall
 * (transforms/_capture/_jit_call.py) behaves the same, with a Python property. */
#include "_core.h"
#include <structmember.h>

typedef struct {
    PyObject_HEAD
    PyObject *jitted;       /* JAX's jitted object */
    PyObject *entry;        /* the _JitEntry: its `owner` is the block that recorded its traces */
    PyObject *in_block;     /* the recording path of a call in a block */
    PyObject *open_blocks;  /* [count of blocks open]: OPEN_BLOCKS */
    PyObject *only_block;   /* [serial of the one block open, or None]: ONLY_BLOCK */
    PyObject *single_block; /* the context's one block's serial (a ContextVar): SINGLE_BLOCK */
    vectorcallfunc vectorcall;
} JitCall;

static PyObject *s_owner;  /* "owner", interned */

/* What this call runs (a new reference): see PyJitCall.__call__ for the rule. */
static PyObject *
jit_call_target(JitCall *self)
{
    int open = PyObject_IsTrue(PyList_GET_ITEM(self->open_blocks, 0));
    if (open <= 0)
        return open < 0 ? NULL : Py_NewRef(self->jitted);
    PyObject *owner = PyObject_GetAttr(self->entry, s_owner);
    if (owner == NULL)
        return NULL;
    int same = PyObject_RichCompareBool(PyList_GET_ITEM(self->only_block, 0), owner, Py_EQ);
    if (same == 0) {
        PyObject *single;
        if (PyContextVar_Get(self->single_block, Py_None, &single) < 0) {
            Py_DECREF(owner);
            return NULL;
        }
        same = PyObject_RichCompareBool(single, owner, Py_EQ);
        Py_DECREF(single);
    }
    Py_DECREF(owner);
    if (same < 0)
        return NULL;
    return Py_NewRef(same ? self->jitted : self->in_block);
}

static PyObject *
jit_call_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    PyObject *target = jit_call_target((JitCall *)self);
    if (target == NULL)
        return NULL;
    PyObject *out = PyObject_Vectorcall(target, args, nargsf, kwnames);
    Py_DECREF(target);
    return out;
}

static PyObject *
jit_call_call(PyObject *self, PyObject *args, PyObject *kwargs)
{
    PyObject *target = jit_call_target((JitCall *)self);
    if (target == NULL)
        return NULL;
    PyObject *out = PyObject_Call(target, args, kwargs);
    Py_DECREF(target);
    return out;
}

static int
jit_call_init(JitCall *self, PyObject *args, PyObject *kwargs)
{
    PyObject *jitted, *entry, *in_block, *open_blocks, *only_block, *single_block;
    static char *names[] = {"jitted", "entry", "in_block", "open_blocks", "only_block",
                            "single_block", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOO!O!O!:JitCall", names, &jitted, &entry,
                                     &in_block, &PyList_Type, &open_blocks, &PyList_Type,
                                     &only_block, &PyContextVar_Type, &single_block))
        return -1;
    if (PyList_GET_SIZE(open_blocks) != 1 || PyList_GET_SIZE(only_block) != 1) {
        PyErr_SetString(PyExc_ValueError, "JitCall: open_blocks and only_block hold one item");
        return -1;
    }
    Py_XSETREF(self->jitted, Py_NewRef(jitted));
    Py_XSETREF(self->entry, Py_NewRef(entry));
    Py_XSETREF(self->in_block, Py_NewRef(in_block));
    Py_XSETREF(self->open_blocks, Py_NewRef(open_blocks));
    Py_XSETREF(self->only_block, Py_NewRef(only_block));
    Py_XSETREF(self->single_block, Py_NewRef(single_block));
    self->vectorcall = jit_call_vectorcall;
    return 0;
}

static PyObject *
jit_call_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    JitCall *self = (JitCall *)PyType_GenericNew(type, args, kwargs);
    if (self != NULL)
        self->vectorcall = jit_call_vectorcall;
    return (PyObject *)self;
}

static int
jit_call_traverse(JitCall *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->jitted);
    Py_VISIT(self->entry);
    Py_VISIT(self->in_block);
    Py_VISIT(self->open_blocks);
    Py_VISIT(self->only_block);
    Py_VISIT(self->single_block);
    return 0;
}

static int
jit_call_clear(JitCall *self)
{
    Py_CLEAR(self->jitted);
    Py_CLEAR(self->entry);
    Py_CLEAR(self->in_block);
    Py_CLEAR(self->open_blocks);
    Py_CLEAR(self->only_block);
    Py_CLEAR(self->single_block);
    return 0;
}

static void
jit_call_dealloc(JitCall *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    jit_call_clear(self);
    tp->tp_free(self);
    Py_DECREF(tp);
}

static PyObject *
jit_call_call_target(PyObject *self, PyObject *Py_UNUSED(ignored))
{
    return jit_call_target((JitCall *)self);
}

/* Python 3.11 does not pass vectorcall on to a Python subclass (3.12 does), so its calls
 * would build an argument tuple first. A subclass that keeps this layout and call (Jitted
 * adds methods only) takes it. */
static PyObject *
jit_call_init_subclass(PyObject *cls, PyObject *Py_UNUSED(args), PyObject *Py_UNUSED(kwargs))
{
    PyTypeObject *tp = (PyTypeObject *)cls;
    if (tp->tp_call == jit_call_call &&
        tp->tp_vectorcall_offset == offsetof(JitCall, vectorcall))
        tp->tp_flags |= Py_TPFLAGS_HAVE_VECTORCALL;
    Py_RETURN_NONE;
}

static PyMethodDef jit_call_methods[] = {
    {"__init_subclass__", (PyCFunction)(void (*)(void))jit_call_init_subclass,
     METH_VARARGS | METH_KEYWORDS | METH_CLASS,
     "A subclass keeping JitCall's call is called with vectorcall."},
    {"_call_target", jit_call_call_target, METH_NOARGS,
     "What a call now runs: JAX's jitted object, or the recording path."},
    {NULL}
};

static PyMemberDef jit_call_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(JitCall, vectorcall), READONLY},
    /* NB: _EX: unset (copying, unpickling) raises AttributeError, as an unset attribute */
    {"_jitted", T_OBJECT_EX, offsetof(JitCall, jitted), READONLY, "JAX's jitted object"},
    {"_entry", T_OBJECT_EX, offsetof(JitCall, entry), READONLY, "the function's jit entry"},
    {"_in_block", T_OBJECT_EX, offsetof(JitCall, in_block), READONLY,
     "the recording path of a call in a block"},
    {NULL}
};

static PyType_Slot jit_call_slots[] = {
    {Py_tp_doc, "JitCall(jitted, entry, in_block, open_blocks, only_block, single_block): see "
                "transforms._capture._jit_call.PyJitCall."},
    {Py_tp_new, jit_call_new},
    {Py_tp_init, jit_call_init},
    {Py_tp_call, jit_call_call},
    {Py_tp_dealloc, jit_call_dealloc},
    {Py_tp_traverse, jit_call_traverse},
    {Py_tp_clear, jit_call_clear},
    {Py_tp_members, jit_call_members},
    {Py_tp_methods, jit_call_methods},
    {0, NULL},
};

static PyType_Spec jit_call_spec = {
    .name = "transforms._capture._core.JitCall",
    .basicsize = sizeof(JitCall),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_BASETYPE |
             Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_HAVE_VECTORCALL,
    .slots = jit_call_slots,
};

PyObject *
jit_call_type_new(PyObject *module)
{
    if (s_owner == NULL && (s_owner = PyUnicode_InternFromString("owner")) == NULL)
        return NULL;
    return PyType_FromModuleAndSpec(module, &jit_call_spec, NULL);
}
