/* Describing values: a tracer, a concrete array or a scalar as its record, from the
 * describer's tables when they have it (Python's Describer otherwise); tuples of records
 * numbered in the describer's `tuples`. See _core.h. */
#include "_core.h"

/* Raises TypeError: `what`, read by the core, is not what it expected; returns -1. */
int
bad_entry(const char *what, const char *expected, PyObject *got)
{
    PyErr_Format(PyExc_TypeError, "the step core read %s: expected %s, got %.200R", what,
                 expected, got);
    return -1;
}

/* What a table keyed by id(code) holds for `code` (its (code, value) entries keep the code
 * to rule out a reused id): the value, borrowed; NULL when not there (an error set if the
 * lookup failed). */
PyObject *
code_entry(PyObject *table, PyCodeObject *code)
{
    PyObject *id = PyLong_FromVoidPtr(code);
    PyObject *hit = id == NULL ? NULL : PyDict_GetItemWithError(table, id);
    Py_XDECREF(id);
    if (hit != NULL && PyTuple_Check(hit) && PyTuple_GET_SIZE(hit) == 2 &&
        PyTuple_GET_ITEM(hit, 0) == (PyObject *)code)
        return PyTuple_GET_ITEM(hit, 1);
    return NULL;
}

/* A number kept in a table of the core's: an int that fits a cell, or -1 with an error. */
static int
cell_number(const char *what, PyObject *number)
{
    if (!PyLong_Check(number))
        return bad_entry(what, "an int", number);
    long n = PyLong_AsLong(number);
    if (n == -1 && PyErr_Occurred())
        return -1;
    if (n < 0 || n > INT32_MAX) {
        PyErr_Format(PyExc_ValueError, "the step core read %s: %ld is no number of a table",
                     what, n);
        return -1;
    }
    return (int)n;
}

/* The number `key` has in `numbers`; when it has none, `object` (made by make(arg) when
 * object is NULL: only on a miss) is appended to `objects` and key numbered by its place. */
int
numbered(PyObject *key, PyObject *object, PyObject *(*make)(PyObject *), PyObject *arg,
         PyObject *objects, PyObject *numbers)
{
    PyObject *hit = PyDict_GetItemWithError(numbers, key);
    if (hit != NULL)
        return cell_number("a table's number", hit);
    if (PyErr_Occurred())
        return -1;
    PyObject *made = object == NULL ? make(arg) : NULL;
    if (object == NULL && made == NULL)
        return -1;
    Py_ssize_t n = PyList_GET_SIZE(objects);
    PyObject *number = PyLong_FromSsize_t(n);
    int failed = number == NULL || PyDict_SetItem(numbers, key, number) < 0 ||
                 PyList_Append(objects, object != NULL ? object : made) < 0;
    Py_XDECREF(number);
    Py_XDECREF(made);
    return failed ? -1 : (int)n;
}

/* obj's number in `objects` (appended when new), found by id in `numbers`. */
int
number_of(PyObject *obj, PyObject *objects, PyObject *numbers)
{
    PyObject *key = PyLong_FromVoidPtr(obj);
    if (key == NULL)
        return -1;
    int number = numbered(key, obj, NULL, NULL, objects, numbers);
    Py_DECREF(key);
    return number;
}

int
text_number(StepCore *self, PyObject *text)
{
    return numbered(text, text, NULL, NULL, self->texts, self->text_numbers);
}

/* --- one value ------------------------------------------------------------------------ */
static PyObject *describe(StepCore *self, PyObject *x, int check_leak);

/* The id of x's record as a key part (the record stays alive in the describer's tables). */
static PyObject *
record_id(StepCore *self, PyObject *x)
{
    PyObject *rec = describe(self, x, 0);
    if (rec == NULL)
        return NULL;
    PyObject *id = PyLong_FromVoidPtr(rec);
    Py_DECREF(rec);
    return id;
}

/* The key of a tracer held as two parts (a batched value and its axis, or a primal and its
 * tangent) in its trace's records: (aval, a, b), each part by its record's id (an axis as
 * it is). A new reference. */
static PyObject *
tracer_parts_key(StepCore *self, PyObject *x, PyObject *aval, long parts)
{
    CoreState *st = self->st;
    int batched = parts == PARTS_BATCHED;
    PyObject *key = NULL, *first = PyObject_GetAttr(x, batched ? st->s_val : st->s_primal);
    PyObject *second = first == NULL ? NULL :
        PyObject_GetAttr(x, batched ? st->s_bdim : st->s_tangent);
    if (second != NULL) {
        PyObject *a = record_id(self, first);
        PyObject *b = a == NULL ? NULL :
            (batched ? (Py_INCREF(second), second) : record_id(self, second));
        if (b != NULL)
            key = batched ? PyTuple_Pack(3, aval, b, a) : PyTuple_Pack(3, aval, a, b);
        Py_XDECREF(a);
        Py_XDECREF(b);
    }
    Py_XDECREF(first);
    Py_XDECREF(second);
    return key;
}

/* A Describer.fast entry as the core reads it: (tracer class, leak free, parts kind,
 * records by key). Its parts kind, or -1 with a TypeError naming what was there. */
static long
fast_entry_parts(PyObject *entry)
{
    if (!PyTuple_Check(entry) || PyTuple_GET_SIZE(entry) != 4 ||
        !PyLong_Check(PyTuple_GET_ITEM(entry, 2)) || !PyDict_Check(PyTuple_GET_ITEM(entry, 3)))
        return bad_entry("a Describer.fast entry",
                         "(tracer class, leak free, parts kind, dict of records)", entry);
    long parts = PyLong_AsLong(PyTuple_GET_ITEM(entry, 2));
    if (parts != PARTS_FLAT && parts != PARTS_BATCHED && parts != PARTS_PAIR) {
        if (!PyErr_Occurred())
            bad_entry("a Describer.fast entry's parts kind", "FLAT, BATCHED or PAIR (0, 1, 2)",
                      PyTuple_GET_ITEM(entry, 2));
        return -1;
    }
    return parts;
}

/* A tracer's record from its trace's table; NULL with no error when not there. */
static PyObject *
known_tracer(StepCore *self, PyObject *x, int check_leak)
{
    PyObject *trace = PyObject_GetAttr(x, self->st->s_trace);
    if (trace == NULL)
        return NULL;
    PyObject *trace_id = PyLong_FromVoidPtr(trace);
    Py_DECREF(trace);
    if (trace_id == NULL)
        return NULL;
    PyObject *entry = PyDict_GetItemWithError(self->fast, trace_id);
    Py_DECREF(trace_id);
    if (entry == NULL)
        return NULL;
    long parts = fast_entry_parts(entry);
    if (parts < 0)
        return NULL;
    if (PyTuple_GET_ITEM(entry, 0) != (PyObject *)Py_TYPE(x) ||
        (check_leak && PyTuple_GET_ITEM(entry, 1) != Py_True))
        return NULL;
    Py_INCREF(entry);  /* describing a part may run Python code that drops it */
    PyObject *rec = NULL, *key = NULL, *aval = PyObject_GetAttr(x, self->st->s_aval);
    if (aval == NULL)
        goto done;
    if (parts == PARTS_FLAT) {
        key = aval;
        Py_INCREF(key);
    } else if ((key = tracer_parts_key(self, x, aval, parts)) == NULL) {
        goto done;
    }
    rec = PyDict_GetItemWithError(PyTuple_GET_ITEM(entry, 3), key);
    if (rec != NULL)
        Py_INCREF(rec);
    else if (PyErr_ExceptionMatches(PyExc_TypeError))
        PyErr_Clear();  /* an aval kind that cannot be hashed: the describer's way */
done:
    Py_XDECREF(key);
    Py_XDECREF(aval);
    Py_DECREF(entry);
    return rec;
}

/* getattr(x, aval, None), a new reference */
static PyObject *
aval_or_none(StepCore *self, PyObject *x)
{
    PyObject *aval = PyObject_GetAttr(x, self->st->s_aval);
    if (aval == NULL && PyErr_ExceptionMatches(PyExc_AttributeError)) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    return aval;
}

/* A record from a describer's table by key (a new reference); NULL with no error when not
 * there or when the key cannot be hashed (Python decides). */
static PyObject *
known_record(PyObject *table, PyObject *key)
{
    PyObject *rec = PyDict_GetItemWithError(table, key);
    if (rec == NULL) {
        if (PyErr_Occurred() && PyErr_ExceptionMatches(PyExc_TypeError))
            PyErr_Clear();
        return NULL;
    }
    Py_INCREF(rec);
    return rec;
}

/* A Python scalar's or JAX typed literal's record by (class, exact value, aval), as
 * Describer._scalar keys it (a float by float.hex: 0.0 == -0.0, and nan is no key);
 * NULL with no error when not there (a complex: always asked of Python). */
static PyObject *
known_scalar(StepCore *self, PyObject *x)
{
    PyObject *exact;
    if (PyFloat_Check(x))
        exact = PyObject_CallOneArg(self->st->float_hex, x);
    else if (PyLong_Check(x))
        exact = PyNumber_Long(x);
    else
        return NULL;
    if (exact == NULL)
        return NULL;
    PyObject *aval = aval_or_none(self, x);
    PyObject *key = aval == NULL ? NULL : PyTuple_Pack(3, (PyObject *)Py_TYPE(x), exact, aval);
    Py_DECREF(exact);
    Py_XDECREF(aval);
    if (key == NULL)
        return NULL;
    PyObject *rec = known_record(self->scalars, key);
    Py_DECREF(key);
    return rec;
}

/* A small array's record by (class, aval, its bytes), as Describer._small_array keys it
 * (np.asarray(x).tobytes(): the C-contiguous buffer's bytes); NULL with no error when not
 * there or when x has no such buffer (a bfloat16, a deleted array: Python decides). */
static PyObject *
known_small_array(StepCore *self, PyObject *x, PyObject *type, PyObject *aval)
{
    Py_buffer view;
    if (PyObject_GetBuffer(x, &view, PyBUF_C_CONTIGUOUS) < 0) {
        PyErr_Clear();
        return NULL;
    }
    PyObject *bytes = PyBytes_FromStringAndSize(view.buf, view.len);
    PyBuffer_Release(&view);
    PyObject *by_bytes = bytes == NULL ? NULL : PyTuple_Pack(3, type, aval, bytes);
    Py_XDECREF(bytes);
    if (by_bytes == NULL)
        return NULL;
    PyObject *rec = PyDict_GetItemWithError(self->small_arrays, by_bytes);
    Py_DECREF(by_bytes);
    Py_XINCREF(rec);
    return rec;
}

/* A concrete array's record by (class, aval); NULL with no error when not there. */
static PyObject *
known_array(StepCore *self, PyObject *x)
{
    if (PyLong_Check(x) || PyFloat_Check(x) || PyComplex_Check(x))
        return known_scalar(self, x);
    PyObject *aval = PyObject_GetAttr(x, self->st->s_aval);
    if (aval == NULL) {
        if (PyErr_ExceptionMatches(PyExc_AttributeError))
            PyErr_Clear();
        return NULL;
    }
    PyObject *key = PyTuple_Pack(2, (PyObject *)Py_TYPE(x), aval);
    PyObject *rec = key == NULL ? NULL : known_record(self->arrays, key);
    Py_XDECREF(key);
    if (rec == self->st->small_record) {
        Py_DECREF(rec);
        rec = known_small_array(self, x, (PyObject *)Py_TYPE(x), aval);
    }
    Py_DECREF(aval);
    return rec;
}

/* Describer.describe(x) (check_leak as the describer's top level), a new reference. */
static PyObject *
describe(StepCore *self, PyObject *x, int check_leak)
{
    int is_tracer = PyObject_TypeCheck(x, (PyTypeObject *)self->st->tracer_type);
    PyObject *rec = is_tracer ? known_tracer(self, x, check_leak) : known_array(self, x);
    if (rec != NULL || PyErr_Occurred())
        return rec;
    if (is_tracer)
        return PyObject_CallFunctionObjArgs(self->new_tracer_record, x,
                                           check_leak ? Py_True : Py_False, NULL);
    return PyObject_CallOneArg(self->concrete_record, x);
}

/* --- tuples of values ----------------------------------------------------------------- */
static PyObject *
one_tuple(PyObject *rec)
{
    return PyTuple_Pack(1, rec);
}

/* The number of (rec,) in the describer's tuples (the tuple made only when new). */
static int
single(StepCore *self, PyObject *rec)
{
    PyObject *key = PyLong_FromVoidPtr(rec);
    if (key == NULL)
        return -1;
    int number = numbered(key, NULL, one_tuple, rec, self->values, self->single_index);
    Py_DECREF(key);
    return number;
}

int
describe_one(StepCore *self, PyObject *x)
{
    PyObject *rec = describe(self, x, self->check_leak);
    if (rec == NULL)
        return -1;
    int number = single(self, rec);
    Py_DECREF(rec);
    return number;
}

/* The number of the tuple of the records of a list or tuple of several values. */
static int
describe_several(StepCore *self, PyObject *seq)
{
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    int number = -1;
    PyObject *recs = PyTuple_New(n), *ids = PyTuple_New(n);
    if (recs == NULL || ids == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *rec = describe(self, PySequence_Fast_GET_ITEM(seq, i), self->check_leak);
        if (rec == NULL)
            goto done;
        PyTuple_SET_ITEM(recs, i, rec);
        PyObject *id = PyLong_FromVoidPtr(rec);
        if (id == NULL)
            goto done;
        PyTuple_SET_ITEM(ids, i, id);
    }
    number = numbered(ids, recs, NULL, NULL, self->values, self->tuple_index);
done:
    Py_XDECREF(recs);
    Py_XDECREF(ids);
    return number;
}

/* Describer.describe_all(xs): the number of the tuple of xs' records. */
int
describe_all(StepCore *self, PyObject *xs)
{
    if (!PyList_CheckExact(xs) && !PyTuple_CheckExact(xs)) {  /* e.g. JAX's FlatTree */
        PyObject *number = PyObject_CallOneArg(self->describe_all_py, xs);
        if (number == NULL)
            return -1;
        int n = cell_number("Describer.describe_all's answer", number);
        Py_DECREF(number);
        return n;
    }
    PyObject *seq = PySequence_Fast(xs, "");  /* a new reference: xs stays as it is */
    if (seq == NULL)
        return -1;
    int number = PySequence_Fast_GET_SIZE(seq) == 1 ?
        describe_one(self, PySequence_Fast_GET_ITEM(seq, 0)) : describe_several(self, seq);
    Py_DECREF(seq);
    return number;
}
