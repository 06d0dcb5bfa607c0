/* A step's params: the pairs of plain params seen before (by _param_rules.params_key), a
 * jit step's summary kept for its jaxpr object (as _jax.jit_summary_key keys it), Python's
 * summaries otherwise; and the rest of a finished step's row. See _core.h. */
#include "_core.h"
#include <marshal.h>

/* The primitive's name is jit's (its summary comes from jit_step). */
static int
is_jit(CoreState *st, PyObject *name)
{
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(st->jit_names); i++) {
        int same = PyObject_RichCompareBool(name, PyTuple_GET_ITEM(st->jit_names, i), Py_EQ);
        if (same != 0)
            return same;
    }
    return 0;
}

/* A param's value as params_key keys it (a new reference), or None when it is not plain. */
static PyObject *
param_key_value(CoreState *st, PyObject *v)
{
    PyTypeObject *type = Py_TYPE(v);
    if (type == &PyTuple_Type) {
        /* NB: held once more, as marshal.dumps(value) in Python holds it: marshal's
         * bytes depend on whether an object is referenced more than once */
        Py_INCREF(v);
        PyObject *value = PyMarshal_WriteObjectToString(v, Py_MARSHAL_VERSION);
        Py_DECREF(v);
        if (value == NULL && PyErr_ExceptionMatches(PyExc_ValueError)) {
            PyErr_Clear();
            Py_RETURN_NONE;
        }
        return value;
    }
    if (type == &PyLong_Type || type == &PyBool_Type || type == &PyFloat_Type ||
        type == &PyUnicode_Type || v == Py_None) {
        Py_INCREF(v);
        return v;
    }
    int keyed = PyObject_IsInstance(v, st->keyed_objects);
    if (keyed < 0)
        return NULL;
    if (!keyed)
        Py_RETURN_NONE;
    Py_INCREF(v);
    return v;
}

/* _param_rules.params_key(name, params): a new reference, None when the params are not plain. */
static PyObject *
params_key(CoreState *st, PyObject *name, PyObject *params)
{
    PyObject *parts = PyList_New(0);
    if (parts == NULL || PyList_Append(parts, name) < 0)
        goto fail;
    Py_ssize_t pos = 0;
    PyObject *k, *v;
    while (PyDict_Next(params, &pos, &k, &v)) {
        PyObject *value = param_key_value(st, v);
        if (value == NULL)
            goto fail;
        if (value == Py_None && v != Py_None) {
            Py_DECREF(value);
            Py_DECREF(parts);
            Py_RETURN_NONE;
        }
        int failed = PyList_Append(parts, k) < 0 ||
                     PyList_Append(parts, (PyObject *)Py_TYPE(v)) < 0 ||
                     PyList_Append(parts, value) < 0;
        Py_DECREF(value);
        if (failed)
            goto fail;
    }
    PyObject *key = PyList_AsTuple(parts);
    Py_DECREF(parts);
    return key;
fail:
    Py_XDECREF(parts);
    return NULL;
}

/* _jax.inline_token(params), a new reference: an enum member by its id, the member kept in
 * inline_members so that its id stays its own (an Enum's hash is Python code). */
static PyObject *
inline_token(CoreState *st, PyObject *params)
{
    PyObject *inline_ = PyDict_GetItemWithError(params, st->s_inline);
    if (inline_ == NULL && PyErr_Occurred())
        return NULL;
    if (inline_ == NULL || inline_ == Py_None || PyBool_Check(inline_)) {
        inline_ = inline_ == NULL ? Py_None : inline_;
        Py_INCREF(inline_);
        return inline_;
    }
    PyObject *id = PyLong_FromVoidPtr(inline_);
    if (id == NULL)
        return NULL;
    if (PyDict_SetDefault(st->inline_members, id, inline_) == NULL) {
        Py_DECREF(id);
        return NULL;
    }
    return id;
}

/* _jax.jit_summary_key(params)'s second part: the keyed params' values (None when missing)
 * and the inline token, a new reference. */
static PyObject *
jit_extra_key(CoreState *st, PyObject *params)
{
    Py_ssize_t n = PyTuple_GET_SIZE(st->jit_keyed);
    PyObject *extra = PyTuple_New(n + 1);
    if (extra == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *value = PyDict_GetItemWithError(params, PyTuple_GET_ITEM(st->jit_keyed, i));
        if (value == NULL && PyErr_Occurred()) {
            Py_DECREF(extra);
            return NULL;
        }
        value = value == NULL ? Py_None : value;
        Py_INCREF(value);
        PyTuple_SET_ITEM(extra, i, value);
    }
    PyObject *token = inline_token(st, params);
    if (token == NULL) {
        Py_DECREF(extra);
        return NULL;
    }
    PyTuple_SET_ITEM(extra, n, token);
    return extra;
}

/* A jit step's (pairs, subjaxprs, flags) kept for its jaxpr object, or NULL with no error. */
static PyObject *
known_jit(StepCore *self, PyObject *params)
{
    CoreState *st = self->st;
    PyObject *jaxpr = PyDict_GetItemWithError(params, st->s_jaxpr);
    if (jaxpr == NULL)
        return NULL;
    PyObject *extra = jit_extra_key(st, params);
    PyObject *id = extra == NULL ? NULL : PyLong_FromVoidPtr(jaxpr);
    PyObject *key = id == NULL ? NULL : PyTuple_Pack(2, id, extra);
    Py_XDECREF(id);
    Py_XDECREF(extra);
    if (key == NULL)
        return NULL;
    PyObject *hit = PyDict_GetItemWithError(self->jit_entries, key);
    Py_DECREF(key);
    if (hit == NULL) {
        if (PyErr_Occurred() && PyErr_ExceptionMatches(PyExc_TypeError))
            PyErr_Clear();
        return NULL;
    }
    if (!PyTuple_Check(hit) || PyTuple_GET_SIZE(hit) != 2 ||
        !PyWeakref_Check(PyTuple_GET_ITEM(hit, 0))) {
        bad_entry("a jit_entries entry", "(weakref to the jaxpr, summary)", hit);
        return NULL;
    }
    if (PyWeakref_GetObject(PyTuple_GET_ITEM(hit, 0)) != jaxpr)
        return NULL;  /* another jaxpr had this id */
    PyObject *value = PyTuple_GET_ITEM(hit, 1);
    Py_INCREF(value);
    return value;
}

/* A summary a Python callback returned: a tuple of `size` items. */
static int
check_summary(PyObject *summary, Py_ssize_t size, const char *what, const char *expected)
{
    if (!PyTuple_Check(summary) || PyTuple_GET_SIZE(summary) != size)
        return bad_entry(what, expected, summary);
    return 0;
}

/* A jit step's summary (a new reference): kept for its jaxpr, or jit_step's answer. */
static PyObject *
jit_summary(StepCore *self, PyObject *params)
{
    PyObject *summary = known_jit(self, params);
    if (summary == NULL && !PyErr_Occurred())
        summary = PyObject_CallOneArg(self->jit_step, params);
    if (summary != NULL && check_summary(summary, 3, "jit_step's answer (or a kept one)",
                                         "(pairs, subjaxprs, flags)") < 0)
        Py_CLEAR(summary);
    return summary;
}

/* Another step's summary (a new reference): ((),) for no params, (pairs,) of plain params
 * seen before, or step_params' (pairs, subjaxprs). */
static PyObject *
step_summary(StepCore *self, PyObject *name, PyObject *params)
{
    if (PyDict_GET_SIZE(params) == 0) {
        PyObject *empty = PyTuple_New(0);
        PyObject *summary = empty == NULL ? NULL : PyTuple_Pack(1, empty);
        Py_XDECREF(empty);
        return summary;
    }
    PyObject *key = params_key(self->st, name, params);
    if (key == NULL)
        return NULL;
    PyObject *pairs = key == Py_None ? NULL : PyDict_GetItemWithError(self->st->param_summaries, key);
    Py_DECREF(key);
    if (pairs != NULL)
        return PyTuple_Pack(1, pairs);
    if (PyErr_Occurred())
        return NULL;
    PyObject *summary = PyObject_CallFunctionObjArgs(self->step_params, name, params, NULL);
    if (summary != NULL && check_summary(summary, 2, "step_params' answer",
                                         "(pairs, subjaxprs)") < 0)
        Py_CLEAR(summary);
    return summary;
}

static int
store_number(StepCore *self, Py_ssize_t index, int column, PyObject *obj, PyObject *objects,
             PyObject *numbers)
{
    int number = number_of(obj, objects, numbers);
    if (number < 0)
        return -1;
    self->cells[index * STRIDE + column] = number;
    return 0;
}

/* The rest of a step's row: its outputs, params, sub-jaxprs, error. */
int
finish(StepCore *self, Py_ssize_t index, PyObject *primitive, PyObject *params, int outputs,
       PyObject *error)
{
    if (!PyDict_Check(params)) {
        PyErr_SetString(PyExc_TypeError, "a step's params must be a dict");
        return -1;
    }
    PyObject *name = PyObject_GetAttr(primitive, self->st->s_primitive_name);
    if (name == NULL)
        return -1;
    PyObject *summary = NULL;
    int inline_ = 0, result = -1;
    int jit = is_jit(self->st, name);
    if (jit < 0)
        goto done;
    summary = jit ? jit_summary(self, params) : step_summary(self, name, params);
    if (summary == NULL)
        goto done;
    PyObject *pairs = PyTuple_GET_ITEM(summary, 0);
    PyObject *subjaxprs = PyTuple_GET_SIZE(summary) > 1 ? PyTuple_GET_ITEM(summary, 1) : NULL;
    if (jit) {  /* the jit's flags: INLINE_FLAG | LIBRARY_FLAG (an int) */
        long flags = PyLong_AsLong(PyTuple_GET_ITEM(summary, 2));
        if (flags == -1 && PyErr_Occurred())
            goto done;
        inline_ = (int)flags;
    }
    if (store_number(self, index, PARAMS, pairs, self->params, self->param_numbers) < 0)
        goto done;
    int some = subjaxprs == NULL ? 0 : PyObject_IsTrue(subjaxprs);
    if (some < 0)
        goto done;
    if (some &&
        store_number(self, index, SUBJAXPRS, subjaxprs, self->subjaxprs, self->subjaxpr_numbers) < 0)
        goto done;
    if (inline_)
        self->cells[index * STRIDE + INLINE] = inline_;
    if (error != NULL) {
        int number = text_number(self, error);
        if (number < 0)
            goto done;
        self->cells[index * STRIDE + ERROR_] = number;
    }
    self->cells[index * STRIDE + OUTPUTS] = outputs;
    result = 0;
done:
    Py_XDECREF(summary);
    Py_DECREF(name);
    return result;
}
