/* The step core in C: transforms._capture._core.StepCore behaves as transforms._capture._step_core.PyStepCore
 * (the reference; read its docstrings first), doing the common case of each step without
 * running Python code:
 *   - a tracer whose trace, class and facts were met before: its record from the
 *     describer's `fast` table; a concrete array by (class, aval) from its `arrays` table
 *     (a small one by its bytes too, from `small_arrays`),
 *     a Python scalar or typed literal by (class, exact value, aval) from `scalars`;
 *   - the user's line: a walk over frames whose code objects' kinds are known
 *     (_snapshot.CODE_KINDS), ending on a user line already in _snapshot.LOCATIONS;
 *   - the name stack: the same object as the previous step's;
 *   - params of plain data seen before (_rules.param_summaries, keyed as _rules.params_key);
 *     a jit step's summary kept for its jaxpr object (the shared summaries' jit_entries:
 *     JAX reuses the jaxprs of jnp wrappers, and those its rules make of them).
 * Everything else calls the Python functions PyStepCore calls, so both record the same
 * data. No JAX names here: configure() hands them over from the door (_interpreters).
 *
 * Built by setup.py with -DCORE_SOURCE_SHA="<sha256 of this file>": a build from another
 * version of this file is not used (_step_core.step_core_class).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <marshal.h>
#include <stdint.h>

#ifndef CORE_SOURCE_SHA
#define CORE_SOURCE_SHA "unknown"
#endif

/* The cells of a row, as _step_core names them. */
enum { LEVEL, PRIMITIVE, KIND, PHASE, PARAMS, INPUTS, OUTPUTS, SOURCE, NAMES, SUBJAXPRS,
       ERROR_, CAUSE, INLINE, STRIDE };
#define RUNNING (-1)
#define NONE (-1)
/* Numbers of the seeded texts (_step_core.SEEDED; checked by configure). */
#define TEXT_ERROR 5
#define TEXT_FORWARD 6
#define TEXT_BACKWARD 7
/* How a trace's tracers are keyed (Describer.fast entries). */
enum { PARTS_FLAT = 0, PARTS_BATCHED = 1, PARTS_PAIR = 2 };

/* --- configuration: set once by configure() ------------------------------------------ */
static int configured = 0;
static PyObject *tracer_type;        /* JAX's Tracer class */
static PyObject *s_trace, *s_aval, *s_val, *s_bdim, *s_primal, *s_tangent;
static PyObject *name_stack_holder;  /* the object holding JAX's source-info context */
static PyObject *s_context, *s_name_stack;
static PyObject *name_stack_fn;      /* () -> the current name stack's text */
static PyObject *code_kinds;         /* id(code) -> (code, kind) */
static PyObject *locations;          /* (id(code), line) -> (code, None, SourceLocation) */
static long user_kind, internal_kind;
static PyObject *user_location_fn;   /* (skip) -> SourceLocation | None */
static PyObject *param_summaries;    /* params_key(...) -> pairs */
static PyObject *keyed_objects;      /* classes whose instances key params as they are */
static PyObject *small_record;       /* Describer.arrays' mark of a small array */
static PyObject *seeded;             /* the texts every call starts with */
static PyObject *jit_names;          /* the names of JAX's jit primitive */
static PyObject *array_type;         /* array.array */
static PyObject *s_name, *s_jaxpr, *s_donated, *s_inline, *s_i;
static PyObject *float_hex;          /* float.hex */
static PyObject *inline_members;     /* id(an inline param's enum member) -> it */

/* --- the core ------------------------------------------------------------------------- */
typedef struct {
    int index;        /* the step */
    int phase;        /* its phase's text number */
    PyObject *source; /* a SourceLocation, None, or NULL for a barrier */
    int number;       /* the source's number */
} Active;

typedef struct {
    PyObject_HEAD
    PyObject *describer;
    PyObject *new_tracer_record, *concrete_record, *describe_all_py;
    PyObject *fast, *arrays, *scalars, *small_arrays, *values, *tuple_index, *single_index;
    int check_leak;
    PyObject *step_params, *jit_step, *jit_entries;
    PyObject *sources, *source_numbers;
    PyObject *texts, *text_numbers;
    PyObject *params, *param_numbers;
    PyObject *subjaxprs, *subjaxpr_numbers;
    int32_t *cells;
    Py_ssize_t count, capacity;
    Active *active;
    Py_ssize_t n_active, cap_active;
    int *phases;
    PyObject **backward;  /* by level: its backward pass's source, or NULL */
    Py_ssize_t n_levels, cap_levels;
    PyObject *last_stack;
    int last_stack_text;
} StepCore;

/* The number `key` has in `numbers`; when it has none, `object` (made by make(arg) when
 * object is NULL: only on a miss) is appended to `objects` and key numbered by its place. */
static int
numbered(PyObject *key, PyObject *object, PyObject *(*make)(PyObject *), PyObject *arg,
         PyObject *objects, PyObject *numbers)
{
    PyObject *hit = PyDict_GetItemWithError(numbers, key);
    if (hit != NULL)
        return (int)PyLong_AsLong(hit);
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
static int
number_of(PyObject *obj, PyObject *objects, PyObject *numbers)
{
    PyObject *key = PyLong_FromVoidPtr(obj);
    if (key == NULL)
        return -1;
    int number = numbered(key, obj, NULL, NULL, objects, numbers);
    Py_DECREF(key);
    return number;
}

static int
text_number(StepCore *self, PyObject *text)
{
    return numbered(text, text, NULL, NULL, self->texts, self->text_numbers);
}

/* --- describing values ---------------------------------------------------------------- */
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

/* A tracer's record from its trace's table; NULL with no error when not there. */
static PyObject *
known_tracer(StepCore *self, PyObject *x, int check_leak)
{
    PyObject *trace = PyObject_GetAttr(x, s_trace);
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
    if (PyTuple_GET_ITEM(entry, 0) != (PyObject *)Py_TYPE(x) ||
        (check_leak && PyTuple_GET_ITEM(entry, 1) != Py_True))
        return NULL;
    Py_INCREF(entry);  /* describing a part may run Python code that drops it */
    PyObject *rec = NULL, *key = NULL, *aval = PyObject_GetAttr(x, s_aval);
    if (aval == NULL)
        goto done;
    long parts = PyLong_AsLong(PyTuple_GET_ITEM(entry, 2));
    if (parts == PARTS_FLAT) {
        key = aval;
        Py_INCREF(key);
    } else {
        PyObject *first = PyObject_GetAttr(x, parts == PARTS_BATCHED ? s_val : s_primal);
        PyObject *second = first == NULL ? NULL :
            PyObject_GetAttr(x, parts == PARTS_BATCHED ? s_bdim : s_tangent);
        if (second != NULL) {
            PyObject *a = record_id(self, first);
            PyObject *b = a == NULL ? NULL :
                (parts == PARTS_BATCHED ? (Py_INCREF(second), second) : record_id(self, second));
            if (b != NULL)
                key = parts == PARTS_BATCHED ? PyTuple_Pack(3, aval, b, a) : PyTuple_Pack(3, aval, a, b);
            Py_XDECREF(a);
            Py_XDECREF(b);
        }
        Py_XDECREF(first);
        Py_XDECREF(second);
        if (key == NULL)
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

/* getattr(x, "aval", None), a new reference */
static PyObject *
aval_or_none(PyObject *x)
{
    PyObject *aval = PyObject_GetAttr(x, s_aval);
    if (aval == NULL && PyErr_ExceptionMatches(PyExc_AttributeError)) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    return aval;
}

/* A Python scalar's or JAX typed literal's record by (class, exact value, aval), as
 * Describer._scalar keys it (a float by float.hex: 0.0 == -0.0, and nan is no key);
 * NULL with no error when not there (a complex: always asked of Python). */
static PyObject *
known_scalar(StepCore *self, PyObject *x)
{
    PyObject *exact;
    if (PyFloat_Check(x))
        exact = PyObject_CallOneArg(float_hex, x);
    else if (PyLong_Check(x))
        exact = PyNumber_Long(x);
    else
        return NULL;
    if (exact == NULL)
        return NULL;
    PyObject *aval = aval_or_none(x);
    PyObject *key = aval == NULL ? NULL : PyTuple_Pack(3, (PyObject *)Py_TYPE(x), exact, aval);
    Py_DECREF(exact);
    Py_XDECREF(aval);
    if (key == NULL)
        return NULL;
    PyObject *rec = PyDict_GetItemWithError(self->scalars, key);
    Py_DECREF(key);
    if (rec == NULL) {
        if (PyErr_Occurred() && PyErr_ExceptionMatches(PyExc_TypeError))
            PyErr_Clear();
        return NULL;
    }
    Py_INCREF(rec);
    return rec;
}

/* A small array's record by (class, aval, its bytes), as Describer._small_array keys it
 * (np.asarray(x).tobytes(): the C-contiguous buffer's bytes); NULL with no error when not
 * there or when x has no such buffer (a bfloat16, a deleted array: Python decides). */
static PyObject *
known_small_array(StepCore *self, PyObject *x, PyObject *key)
{
    Py_buffer view;
    if (PyObject_GetBuffer(x, &view, PyBUF_C_CONTIGUOUS) < 0) {
        PyErr_Clear();
        return NULL;
    }
    PyObject *bytes = PyBytes_FromStringAndSize(view.buf, view.len);
    PyBuffer_Release(&view);
    PyObject *by_bytes = bytes == NULL ? NULL :
        PyTuple_Pack(3, PyTuple_GET_ITEM(key, 0), PyTuple_GET_ITEM(key, 1), bytes);
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
    PyObject *aval = PyObject_GetAttr(x, s_aval);
    if (aval == NULL) {
        if (PyErr_ExceptionMatches(PyExc_AttributeError))
            PyErr_Clear();
        return NULL;
    }
    PyObject *key = PyTuple_Pack(2, (PyObject *)Py_TYPE(x), aval);
    Py_DECREF(aval);
    if (key == NULL)
        return NULL;
    PyObject *rec = PyDict_GetItemWithError(self->arrays, key);
    if (rec == NULL) {
        Py_DECREF(key);
        if (PyErr_Occurred() && PyErr_ExceptionMatches(PyExc_TypeError))
            PyErr_Clear();
        return NULL;
    }
    if (rec == small_record) {
        rec = known_small_array(self, x, key);
        Py_DECREF(key);
        return rec;
    }
    Py_DECREF(key);
    Py_INCREF(rec);
    return rec;
}

/* Describer.describe(x) (check_leak as the describer's top level), a new reference. */
static PyObject *
describe(StepCore *self, PyObject *x, int check_leak)
{
    int is_tracer = PyObject_TypeCheck(x, (PyTypeObject *)tracer_type);
    PyObject *rec = is_tracer ? known_tracer(self, x, check_leak) : known_array(self, x);
    if (rec != NULL || PyErr_Occurred())
        return rec;
    if (is_tracer)
        return PyObject_CallFunctionObjArgs(self->new_tracer_record, x,
                                           check_leak ? Py_True : Py_False, NULL);
    return PyObject_CallOneArg(self->concrete_record, x);
}

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

static int
describe_one(StepCore *self, PyObject *x)
{
    PyObject *rec = describe(self, x, self->check_leak);
    if (rec == NULL)
        return -1;
    int number = single(self, rec);
    Py_DECREF(rec);
    return number;
}

/* Describer.describe_all(xs): the number of the tuple of xs' records. */
static int
describe_all(StepCore *self, PyObject *xs)
{
    if (!PyList_CheckExact(xs) && !PyTuple_CheckExact(xs)) {  /* e.g. JAX's FlatTree */
        PyObject *number = PyObject_CallOneArg(self->describe_all_py, xs);
        if (number == NULL)
            return -1;
        int n = (int)PyLong_AsLong(number);
        Py_DECREF(number);
        return n;
    }
    PyObject *seq = PySequence_Fast(xs, "");  /* a new reference: xs stays as it is */
    if (seq == NULL)
        return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n == 1) {
        int number = describe_one(self, PySequence_Fast_GET_ITEM(seq, 0));
        Py_DECREF(seq);
        return number;
    }
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
    Py_DECREF(seq);
    return number;
}

/* --- where a step comes from ---------------------------------------------------------- */

/* The user's line by a walk over known frames, a new reference; NULL with no error when
 * the walk meets anything else (Python's user_location then decides). */
static PyObject *
known_user_location(void)
{
    PyFrameObject *frame = PyEval_GetFrame();
    Py_XINCREF(frame);
    PyObject *found = NULL;
    while (frame != NULL) {
        PyCodeObject *code = PyFrame_GetCode(frame);
        PyObject *id = PyLong_FromVoidPtr(code);
        PyObject *hit = id == NULL ? NULL : PyDict_GetItemWithError(code_kinds, id);
        Py_XDECREF(id);
        long kind = -1;
        if (hit != NULL && PyTuple_Check(hit) && PyTuple_GET_SIZE(hit) == 2 &&
            PyTuple_GET_ITEM(hit, 0) == (PyObject *)code)
            kind = PyLong_AsLong(PyTuple_GET_ITEM(hit, 1));
        if (kind == user_kind) {
            PyObject *key = Py_BuildValue("(Ni)", PyLong_FromVoidPtr(code),
                                          PyFrame_GetLineNumber(frame));
            PyObject *loc = key == NULL ? NULL : PyDict_GetItemWithError(locations, key);
            Py_XDECREF(key);
            if (loc != NULL && PyTuple_Check(loc) && PyTuple_GET_SIZE(loc) == 3 &&
                PyTuple_GET_ITEM(loc, 0) == (PyObject *)code && PyTuple_GET_ITEM(loc, 1) == Py_None) {
                found = PyTuple_GET_ITEM(loc, 2);
                Py_INCREF(found);
            }
            Py_DECREF(code);
            break;
        }
        Py_DECREF(code);
        if (kind != internal_kind)  /* unknown code, or a library's: Python's walk */
            break;
        PyFrameObject *back = PyFrame_GetBack(frame);
        Py_DECREF(frame);
        frame = back;
    }
    Py_XDECREF(frame);
    return found;
}

static PyObject *
user_location(void)
{
    PyObject *found = known_user_location();
    if (found != NULL || PyErr_Occurred())
        return found;
    /* NB: skip 1: user_location's caller's frame is the Python code calling the core */
    return PyObject_CallFunction(user_location_fn, "i", 1);
}

static int
name_stack_text(StepCore *self)
{
    PyObject *context = PyObject_GetAttr(name_stack_holder, s_context);
    PyObject *stack = context == NULL ? NULL : PyObject_GetAttr(context, s_name_stack);
    Py_XDECREF(context);
    if (stack == NULL)
        return -1;
    if (stack == self->last_stack) {  /* consecutive steps mostly share one */
        Py_DECREF(stack);
        return self->last_stack_text;
    }
    PyObject *text = PyObject_CallNoArgs(name_stack_fn);
    int number = text == NULL ? -1 : text_number(self, text);
    Py_XDECREF(text);
    if (number < 0) {
        Py_DECREF(stack);
        return -1;
    }
    Py_XSETREF(self->last_stack, stack);  /* kept: its id is not reused */
    self->last_stack_text = number;
    return number;
}

/* --- rows ----------------------------------------------------------------------------- */
static int32_t *
new_row(StepCore *self)
{
    if (self->count == self->capacity) {
        Py_ssize_t capacity = self->capacity ? self->capacity * 2 : 64;
        int32_t *cells = PyMem_Realloc(self->cells, (size_t)capacity * STRIDE * sizeof(int32_t));
        if (cells == NULL) {
            PyErr_NoMemory();
            return NULL;
        }
        self->cells = cells;
        self->capacity = capacity;
    }
    return self->cells + self->count++ * STRIDE;
}

static int
push_active(StepCore *self, int index, int phase, PyObject *source, int number)
{
    if (self->n_active == self->cap_active) {
        Py_ssize_t cap = self->cap_active ? self->cap_active * 2 : 16;
        Active *active = PyMem_Realloc(self->active, (size_t)cap * sizeof(Active));
        if (active == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        self->active = active;
        self->cap_active = cap;
    }
    Py_XINCREF(source);
    self->active[self->n_active++] = (Active){index, phase, source, number};
    return 0;
}

static void
pop_active(StepCore *self)
{
    if (self->n_active > 0) {
        self->n_active--;
        Py_XDECREF(self->active[self->n_active].source);
    }
}

static int
check_level(StepCore *self, int level)
{
    if (level < 0 || level >= self->n_levels) {
        PyErr_Format(PyExc_IndexError, "level %d of a call with %zd levels", level,
                     self->n_levels);
        return -1;
    }
    return 0;
}

static int
check_index(StepCore *self, Py_ssize_t index)
{
    if (index < 0 || index >= self->count) {
        PyErr_Format(PyExc_IndexError, "step %zd of %zd", index, self->count);
        return -1;
    }
    return 0;
}

/* The primitive's name is jit's (its summary comes from jit_step). */
static int
is_jit(PyObject *name)
{
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(jit_names); i++) {
        int same = PyObject_RichCompareBool(name, PyTuple_GET_ITEM(jit_names, i), Py_EQ);
        if (same != 0)
            return same;
    }
    return 0;
}

/* _rules.params_key(name, params): a new reference, None when the params are not plain. */
static PyObject *
params_key(PyObject *name, PyObject *params)
{
    PyObject *parts = PyList_New(0);
    if (parts == NULL || PyList_Append(parts, name) < 0)
        goto fail;
    Py_ssize_t pos = 0;
    PyObject *k, *v;
    while (PyDict_Next(params, &pos, &k, &v)) {
        PyTypeObject *type = Py_TYPE(v);
        PyObject *value;
        if (type == &PyTuple_Type) {
            /* NB: held once more, as marshal.dumps(value) in Python holds it: marshal's
             * bytes depend on whether an object is referenced more than once */
            Py_INCREF(v);
            value = PyMarshal_WriteObjectToString(v, Py_MARSHAL_VERSION);
            Py_DECREF(v);
            if (value == NULL) {
                if (!PyErr_ExceptionMatches(PyExc_ValueError))
                    goto fail;
                PyErr_Clear();
                goto none;
            }
        } else if (type == &PyLong_Type || type == &PyBool_Type || type == &PyFloat_Type ||
                   type == &PyUnicode_Type || v == Py_None) {
            value = v;
            Py_INCREF(value);
        } else {
            int keyed = PyObject_IsInstance(v, keyed_objects);
            if (keyed < 0)
                goto fail;
            if (!keyed)
                goto none;
            value = v;
            Py_INCREF(value);
        }
        int failed = PyList_Append(parts, k) < 0 || PyList_Append(parts, (PyObject *)type) < 0 ||
                     PyList_Append(parts, value) < 0;
        Py_DECREF(value);
        if (failed)
            goto fail;
    }
    PyObject *key = PyList_AsTuple(parts);
    Py_DECREF(parts);
    return key;
none:
    Py_DECREF(parts);
    Py_RETURN_NONE;
fail:
    Py_XDECREF(parts);
    return NULL;
}

/* _interpreters.inline_token(params), a new reference: an enum member by its id, the
 * member kept in inline_members so that its id stays its own (an Enum's hash is Python code). */
static PyObject *
inline_token(PyObject *params)
{
    PyObject *inline_ = PyDict_GetItemWithError(params, s_inline);
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
    if (PyDict_SetDefault(inline_members, id, inline_) == NULL) {
        Py_DECREF(id);
        return NULL;
    }
    return id;
}

/* A jit step's (pairs, subjaxprs, inline) kept for its jaxpr object, or NULL with no error. */
static PyObject *
known_jit(StepCore *self, PyObject *params)
{
    PyObject *jaxpr = PyDict_GetItemWithError(params, s_jaxpr);
    if (jaxpr == NULL)
        return NULL;
    PyObject *name = PyDict_GetItemWithError(params, s_name);
    PyObject *donated = name == NULL && PyErr_Occurred() ? NULL : PyDict_GetItemWithError(params, s_donated);
    if (PyErr_Occurred())
        return NULL;
    PyObject *token = inline_token(params);
    if (token == NULL)
        return NULL;
    PyObject *id = PyLong_FromVoidPtr(jaxpr);
    PyObject *extra = id == NULL ? NULL :
        PyTuple_Pack(3, name ? name : Py_None, donated ? donated : Py_None, token);
    PyObject *key = extra == NULL ? NULL : PyTuple_Pack(2, id, extra);
    Py_XDECREF(id);
    Py_XDECREF(extra);
    Py_DECREF(token);
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
        !PyWeakref_Check(PyTuple_GET_ITEM(hit, 0)) ||
        PyWeakref_GetObject(PyTuple_GET_ITEM(hit, 0)) != jaxpr)
        return NULL;
    PyObject *value = PyTuple_GET_ITEM(hit, 1);
    Py_INCREF(value);
    return value;
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
static int
finish(StepCore *self, Py_ssize_t index, PyObject *primitive, PyObject *params, int outputs,
       PyObject *error)
{
    if (!PyDict_Check(params)) {
        PyErr_SetString(PyExc_TypeError, "a step's params must be a dict");
        return -1;
    }
    PyObject *name = PyObject_GetAttr(primitive, s_name);
    if (name == NULL)
        return -1;
    PyObject *summary = NULL, *pairs = NULL, *subjaxprs = NULL;
    int inline_ = 0, result = -1;
    int jit = is_jit(name);
    if (jit < 0)
        goto done;
    if (jit) {
        summary = known_jit(self, params);
        if (summary == NULL && !PyErr_Occurred())
            summary = PyObject_CallOneArg(self->jit_step, params);
        if (summary == NULL)
            goto done;
        if (!PyTuple_Check(summary) || PyTuple_GET_SIZE(summary) != 3) {
            PyErr_SetString(PyExc_TypeError, "jit_step must return (pairs, subjaxprs, inline)");
            goto done;
        }
        pairs = PyTuple_GET_ITEM(summary, 0);
        subjaxprs = PyTuple_GET_ITEM(summary, 1);
        inline_ = PyObject_IsTrue(PyTuple_GET_ITEM(summary, 2));
        if (inline_ < 0)
            goto done;
    } else if (PyDict_GET_SIZE(params) == 0) {
        summary = PyTuple_New(0);
        pairs = summary;
    } else {
        PyObject *key = params_key(name, params);
        if (key == NULL)
            goto done;
        pairs = key == Py_None ? NULL : PyDict_GetItemWithError(param_summaries, key);
        Py_DECREF(key);
        if (pairs != NULL) {
            summary = pairs;
            Py_INCREF(summary);
        } else {
            if (PyErr_Occurred())
                goto done;
            summary = PyObject_CallFunctionObjArgs(self->step_params, name, params, NULL);
            if (summary == NULL)
                goto done;
            if (!PyTuple_Check(summary) || PyTuple_GET_SIZE(summary) != 2) {
                PyErr_SetString(PyExc_TypeError, "step_params must return (pairs, subjaxprs)");
                goto done;
            }
            pairs = PyTuple_GET_ITEM(summary, 0);
            subjaxprs = PyTuple_GET_ITEM(summary, 1);
        }
    }
    if (store_number(self, index, PARAMS, pairs, self->params, self->param_numbers) < 0)
        goto done;
    if (subjaxprs != NULL && PyObject_IsTrue(subjaxprs) &&
        store_number(self, index, SUBJAXPRS, subjaxprs, self->subjaxprs, self->subjaxpr_numbers) < 0)
        goto done;
    if (inline_)
        self->cells[index * STRIDE + INLINE] = 1;
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

/* --- methods -------------------------------------------------------------------------- */
static PyObject *
core_begin(StepCore *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "begin(level, primitive, tracers, kind)");
        return NULL;
    }
    int level = (int)PyLong_AsLong(args[0]);
    if ((level == -1 && PyErr_Occurred()) || check_level(self, level) < 0)
        return NULL;
    int inputs = describe_all(self, args[2]);
    if (inputs < 0)
        return NULL;
    int cause, phase, number;
    PyObject *source;
    if (self->n_active > 0) {
        /* A step bound while processing another comes from the same user line, unless
         * user code (a custom rule body) runs in between. */
        Active *top = &self->active[self->n_active - 1];
        cause = top->index;
        phase = top->phase == TEXT_BACKWARD ? TEXT_BACKWARD : self->phases[level];
        source = top->source;
        number = top->number;
        if (source == NULL) {
            source = user_location();
            if (source == NULL)
                return NULL;
            number = number_of(source, self->sources, self->source_numbers);
            Py_DECREF(source);
            if (number < 0)
                return NULL;
        }
    } else {
        cause = NONE;
        phase = self->phases[level];
        if (phase == TEXT_BACKWARD) {
            /* The backward pass runs deep inside JAX, called from one user line: found
             * once per pass. */
            if (self->backward[level] == NULL) {
                self->backward[level] = user_location();
                if (self->backward[level] == NULL)
                    return NULL;
            }
            source = self->backward[level];
            Py_INCREF(source);
        } else {
            source = user_location();
            if (source == NULL)
                return NULL;
        }
        number = number_of(source, self->sources, self->source_numbers);
        Py_DECREF(source);
        if (number < 0)
            return NULL;
    }
    /* borrowed from here on: the sources list holds it */
    source = PyList_GET_ITEM(self->sources, number);
    PyObject *name = PyObject_GetAttr(args[1], s_name);
    int primitive = name == NULL ? -1 : text_number(self, name);
    Py_XDECREF(name);
    int kind = primitive < 0 ? -1 : text_number(self, args[3]);
    int names = kind < 0 ? -1 : name_stack_text(self);
    if (names < 0)
        return NULL;
    Py_ssize_t index = self->count;
    int32_t *row = new_row(self);
    if (row == NULL || push_active(self, (int)index, phase, source, number) < 0)
        return NULL;
    int32_t values[STRIDE] = {level, primitive, kind, phase, 0, inputs, RUNNING, number, names,
                              0, NONE, cause, 0};
    memcpy(row, values, sizeof(values));
    return PyLong_FromSsize_t(index);
}

static PyObject *
core_end(StepCore *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "end(index, primitive, params, out, multiple)");
        return NULL;
    }
    Py_ssize_t index = PyLong_AsSsize_t(args[0]);
    if ((index == -1 && PyErr_Occurred()) || check_index(self, index) < 0)
        return NULL;
    pop_active(self);
    int multiple = PyObject_IsTrue(args[4]);
    if (multiple < 0)
        return NULL;
    int outputs = multiple ? describe_all(self, args[3]) : describe_one(self, args[3]);
    if (outputs < 0 || finish(self, index, args[1], args[2], outputs, NULL) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *
core_fail(StepCore *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4 || !PyUnicode_Check(args[3])) {
        PyErr_SetString(PyExc_TypeError, "fail(index, primitive, params, error: str)");
        return NULL;
    }
    Py_ssize_t index = PyLong_AsSsize_t(args[0]);
    if ((index == -1 && PyErr_Occurred()) || check_index(self, index) < 0)
        return NULL;
    if (self->n_active > 0 && self->active[self->n_active - 1].index == index)
        pop_active(self);
    PyObject *empty = PyTuple_New(0);
    int outputs = empty == NULL ? -1 : describe_all(self, empty);
    Py_XDECREF(empty);
    if (outputs < 0 || finish(self, index, args[1], args[2], outputs, args[3]) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *
core_event(StepCore *self, PyObject *args)
{
    int level, values, source;
    PyObject *name, *error, *cause;
    if (!PyArg_ParseTuple(args, "iUiiOO:event", &level, &name, &values, &source, &error, &cause))
        return NULL;
    if (check_level(self, level) < 0)
        return NULL;
    int primitive = text_number(self, name);
    int err = primitive < 0 ? -1 : (error == Py_None ? NONE : text_number(self, error));
    if (primitive < 0 || (error != Py_None && err < 0))
        return NULL;
    int because = NONE;
    if (cause != Py_None) {
        because = (int)PyLong_AsLong(cause);
        if (because == -1 && PyErr_Occurred())
            return NULL;
    }
    Py_ssize_t index = self->count;
    int32_t *row = new_row(self);
    if (row == NULL)
        return NULL;
    int32_t cells[STRIDE] = {level, primitive, TEXT_ERROR, self->phases[level], 0, values,
                             values, source, 0, 0, err, because, 0};
    memcpy(row, cells, sizeof(cells));
    return PyLong_FromSsize_t(index);
}

static PyObject *
core_push_barrier(StepCore *self, PyObject *Py_UNUSED(ignored))
{
    if (self->n_active == 0)
        Py_RETURN_FALSE;
    Active top = self->active[self->n_active - 1];
    if (push_active(self, top.index, top.phase, NULL, -1) < 0)
        return NULL;
    Py_RETURN_TRUE;
}

static PyObject *
core_pop_barrier(StepCore *self, PyObject *Py_UNUSED(ignored))
{
    pop_active(self);
    Py_RETURN_NONE;
}

static PyObject *
core_add_level(StepCore *self, PyObject *Py_UNUSED(ignored))
{
    if (self->n_levels == self->cap_levels) {
        Py_ssize_t cap = self->cap_levels ? self->cap_levels * 2 : 8;
        int *phases = PyMem_Realloc(self->phases, (size_t)cap * sizeof(int));
        if (phases == NULL)
            return PyErr_NoMemory();
        self->phases = phases;
        PyObject **backward = PyMem_Realloc(self->backward, (size_t)cap * sizeof(PyObject *));
        if (backward == NULL)
            return PyErr_NoMemory();
        self->backward = backward;
        self->cap_levels = cap;
    }
    self->phases[self->n_levels] = TEXT_FORWARD;
    self->backward[self->n_levels] = NULL;
    self->n_levels++;
    Py_RETURN_NONE;
}

static PyObject *
core_set_phase(StepCore *self, PyObject *args)
{
    int level;
    PyObject *phase;
    if (!PyArg_ParseTuple(args, "iU:set_phase", &level, &phase) || check_level(self, level) < 0)
        return NULL;
    int number = text_number(self, phase);
    if (number < 0)
        return NULL;
    self->phases[level] = number;
    Py_CLEAR(self->backward[level]);
    Py_RETURN_NONE;
}

static PyObject *
core_phase(StepCore *self, PyObject *arg)
{
    int level = (int)PyLong_AsLong(arg);
    if ((level == -1 && PyErr_Occurred()) || check_level(self, level) < 0)
        return NULL;
    PyObject *text = PyList_GET_ITEM(self->texts, self->phases[level]);
    Py_INCREF(text);
    return text;
}

static PyObject *
core_text(StepCore *self, PyObject *arg)
{
    if (!PyUnicode_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "text(str)");
        return NULL;
    }
    int number = text_number(self, arg);
    return number < 0 ? NULL : PyLong_FromLong(number);
}

static PyObject *
core_source_number(StepCore *self, PyObject *arg)
{
    int number = number_of(arg, self->sources, self->source_numbers);
    return number < 0 ? NULL : PyLong_FromLong(number);
}

static PyObject *
core_source_at(StepCore *self, PyObject *arg)
{
    Py_ssize_t index = PyLong_AsSsize_t(arg);
    if ((index == -1 && PyErr_Occurred()) || check_index(self, index) < 0)
        return NULL;
    PyObject *source = PyList_GET_ITEM(self->sources, self->cells[index * STRIDE + SOURCE]);
    Py_INCREF(source);
    return source;
}

static PyObject *
core_cell(StepCore *self, PyObject *args)
{
    Py_ssize_t index;
    int column;
    if (!PyArg_ParseTuple(args, "ni:cell", &index, &column) || check_index(self, index) < 0)
        return NULL;
    if (column < 0 || column >= STRIDE) {
        PyErr_Format(PyExc_IndexError, "column %d of %d", column, STRIDE);
        return NULL;
    }
    return PyLong_FromLong(self->cells[index * STRIDE + column]);
}

static PyObject *
core_parts(StepCore *self, PyObject *Py_UNUSED(ignored))
{
    /* NB: y# makes None of a NULL pointer (no steps yet) */
    PyObject *cells = PyObject_CallFunction(array_type, "Oy#", s_i,
                                            self->cells ? (const char *)self->cells : "",
                                            (Py_ssize_t)(self->count * STRIDE * sizeof(int32_t)));
    if (cells == NULL)
        return NULL;
    return Py_BuildValue("(NnOOOOO)", cells, self->count, self->texts, self->params,
                         self->subjaxprs, self->values, self->sources);
}

static Py_ssize_t
core_len(StepCore *self)
{
    return self->count;
}

/* --- life ----------------------------------------------------------------------------- */
static int
core_init(StepCore *self, PyObject *args, PyObject *kwds)
{
    static char *names[] = {"describer", "step_params", "jit_step", "jit_entries", NULL};
    PyObject *describer, *step_params, *jit_step, *jit_entries;
    if (!configured) {
        PyErr_SetString(PyExc_RuntimeError, "transforms._capture._core.configure() was not called");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOO!:StepCore", names, &describer,
                                     &step_params, &jit_step, &PyDict_Type, &jit_entries))
        return -1;
    if (self->describer != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "a StepCore is initialised once");
        return -1;
    }
    Py_INCREF(describer);
    self->describer = describer;
    Py_INCREF(step_params);
    self->step_params = step_params;
    Py_INCREF(jit_step);
    self->jit_step = jit_step;
    Py_INCREF(jit_entries);
    self->jit_entries = jit_entries;
    if ((self->new_tracer_record = PyObject_GetAttrString(describer, "new_tracer_record")) == NULL ||
        (self->concrete_record = PyObject_GetAttrString(describer, "concrete_record")) == NULL ||
        (self->describe_all_py = PyObject_GetAttrString(describer, "describe_all")) == NULL ||
        (self->fast = PyObject_GetAttrString(describer, "fast")) == NULL ||
        (self->arrays = PyObject_GetAttrString(describer, "arrays")) == NULL ||
        (self->scalars = PyObject_GetAttrString(describer, "scalars")) == NULL ||
        (self->small_arrays = PyObject_GetAttrString(describer, "small_arrays")) == NULL ||
        (self->values = PyObject_GetAttrString(describer, "tuples")) == NULL ||
        (self->tuple_index = PyObject_GetAttrString(describer, "tuple_index")) == NULL ||
        (self->single_index = PyObject_GetAttrString(describer, "single_index")) == NULL)
        return -1;
    if (!PyDict_Check(self->fast) || !PyDict_Check(self->arrays) || !PyDict_Check(self->scalars) ||
        !PyDict_Check(self->small_arrays) ||
        !PyList_Check(self->values) ||
        !PyDict_Check(self->tuple_index) || !PyDict_Check(self->single_index)) {
        PyErr_SetString(PyExc_TypeError, "the describer's tables must be dicts and a list");
        return -1;
    }
    PyObject *enclosing = PyObject_GetAttrString(describer, "enclosing");
    if (enclosing == NULL)
        return -1;
    self->check_leak = enclosing != Py_None;
    Py_DECREF(enclosing);
    if ((self->sources = PyList_New(0)) == NULL || (self->source_numbers = PyDict_New()) == NULL ||
        (self->texts = PyList_New(0)) == NULL ||
        (self->text_numbers = PyDict_New()) == NULL ||
        (self->params = PyList_New(0)) == NULL || (self->param_numbers = PyDict_New()) == NULL ||
        (self->subjaxprs = PyList_New(0)) == NULL || (self->subjaxpr_numbers = PyDict_New()) == NULL)
        return -1;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(seeded); i++)
        if (text_number(self, PyTuple_GET_ITEM(seeded, i)) < 0)
            return -1;
    PyObject *empty = PyTuple_New(0);
    int failed = empty == NULL || number_of(empty, self->params, self->param_numbers) < 0 ||
                 number_of(empty, self->subjaxprs, self->subjaxpr_numbers) < 0;
    Py_XDECREF(empty);
    return failed ? -1 : 0;
}

static int
core_traverse(StepCore *self, visitproc visit, void *arg)
{
    Py_VISIT(self->describer);
    Py_VISIT(self->new_tracer_record);
    Py_VISIT(self->concrete_record);
    Py_VISIT(self->describe_all_py);
    Py_VISIT(self->fast);
    Py_VISIT(self->arrays);
    Py_VISIT(self->scalars);
    Py_VISIT(self->small_arrays);
    Py_VISIT(self->values);
    Py_VISIT(self->tuple_index);
    Py_VISIT(self->single_index);
    Py_VISIT(self->step_params);
    Py_VISIT(self->jit_step);
    Py_VISIT(self->jit_entries);
    Py_VISIT(self->sources);
    Py_VISIT(self->source_numbers);
    Py_VISIT(self->texts);
    Py_VISIT(self->text_numbers);
    Py_VISIT(self->params);
    Py_VISIT(self->param_numbers);
    Py_VISIT(self->subjaxprs);
    Py_VISIT(self->subjaxpr_numbers);
    Py_VISIT(self->last_stack);
    for (Py_ssize_t i = 0; i < self->n_active; i++)
        Py_VISIT(self->active[i].source);
    for (Py_ssize_t i = 0; i < self->n_levels; i++)
        Py_VISIT(self->backward[i]);
    return 0;
}

static int
core_clear(StepCore *self)
{
    Py_CLEAR(self->describer);
    Py_CLEAR(self->new_tracer_record);
    Py_CLEAR(self->concrete_record);
    Py_CLEAR(self->describe_all_py);
    Py_CLEAR(self->fast);
    Py_CLEAR(self->arrays);
    Py_CLEAR(self->scalars);
    Py_CLEAR(self->small_arrays);
    Py_CLEAR(self->values);
    Py_CLEAR(self->tuple_index);
    Py_CLEAR(self->single_index);
    Py_CLEAR(self->step_params);
    Py_CLEAR(self->jit_step);
    Py_CLEAR(self->jit_entries);
    Py_CLEAR(self->sources);
    Py_CLEAR(self->source_numbers);
    Py_CLEAR(self->texts);
    Py_CLEAR(self->text_numbers);
    Py_CLEAR(self->params);
    Py_CLEAR(self->param_numbers);
    Py_CLEAR(self->subjaxprs);
    Py_CLEAR(self->subjaxpr_numbers);
    Py_CLEAR(self->last_stack);
    while (self->n_active > 0)
        pop_active(self);
    for (Py_ssize_t i = 0; i < self->n_levels; i++)
        Py_CLEAR(self->backward[i]);
    return 0;
}

static void
core_dealloc(StepCore *self)
{
    PyObject_GC_UnTrack(self);
    core_clear(self);
    PyMem_Free(self->cells);
    PyMem_Free(self->active);
    PyMem_Free(self->phases);
    PyMem_Free(self->backward);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *
core_get_count(StepCore *self, void *Py_UNUSED(closure))
{
    return PyLong_FromSsize_t(self->count);
}

static PyObject *
core_get_active_depth(StepCore *self, void *Py_UNUSED(closure))
{
    return PyLong_FromSsize_t(self->n_active);
}

#define TABLE_GETTER(field)                                               \
    static PyObject *core_get_##field(StepCore *self, void *Py_UNUSED(c)) \
    {                                                                     \
        PyObject *value = self->field ? self->field : Py_None;            \
        Py_INCREF(value);                                                 \
        return value;                                                     \
    }
TABLE_GETTER(texts)
TABLE_GETTER(params)
TABLE_GETTER(subjaxprs)
TABLE_GETTER(values)
TABLE_GETTER(sources)
TABLE_GETTER(describer)

static PyGetSetDef core_getset[] = {
    {"count", (getter)core_get_count, NULL, "steps begun", NULL},
    {"active_depth", (getter)core_get_active_depth, NULL, "steps being processed (and barriers)", NULL},
    {"texts", (getter)core_get_texts, NULL, "the call's texts, by number", NULL},
    {"params", (getter)core_get_params, NULL, "param pairs, by number", NULL},
    {"subjaxprs", (getter)core_get_subjaxprs, NULL, "sub-jaxpr records, by number", NULL},
    {"values", (getter)core_get_values, NULL, "the describer's tuples of records", NULL},
    {"sources", (getter)core_get_sources, NULL, "source locations, by number", NULL},
    {"describer", (getter)core_get_describer, NULL, "the call's describer", NULL},
    {NULL}
};

static PyMethodDef core_methods[] = {
    {"begin", (PyCFunction)(void (*)(void))core_begin, METH_FASTCALL,
     "begin(level, primitive, tracers, kind) -> index: a step starts"},
    {"end", (PyCFunction)(void (*)(void))core_end, METH_FASTCALL,
     "end(index, primitive, params, out, multiple): a step ends"},
    {"fail", (PyCFunction)(void (*)(void))core_fail, METH_FASTCALL,
     "fail(index, primitive, params, error): a step raised"},
    {"event", (PyCFunction)core_event, METH_VARARGS,
     "event(level, name, values, source, error, cause) -> index: an error event"},
    {"push_barrier", (PyCFunction)core_push_barrier, METH_NOARGS,
     "user code runs inside the current step; True when there is one"},
    {"pop_barrier", (PyCFunction)core_pop_barrier, METH_NOARGS, "the user code returned"},
    {"add_level", (PyCFunction)core_add_level, METH_NOARGS, "a level is added (forward)"},
    {"set_phase", (PyCFunction)core_set_phase, METH_VARARGS, "set_phase(level, phase)"},
    {"phase", (PyCFunction)core_phase, METH_O, "phase(level) -> its phase"},
    {"text", (PyCFunction)core_text, METH_O, "text(str) -> its number"},
    {"source_number", (PyCFunction)core_source_number, METH_O,
     "source_number(source) -> its number"},
    {"source_at", (PyCFunction)core_source_at, METH_O, "source_at(index) -> the step's source"},
    {"cell", (PyCFunction)core_cell, METH_VARARGS, "cell(index, column) -> a row's cell"},
    {"parts", (PyCFunction)core_parts, METH_NOARGS,
     "(cells, count, texts, params, subjaxprs, values, sources), for steps_from"},
    {NULL}
};

static PySequenceMethods core_as_sequence = {
    .sq_length = (lenfunc)core_len,
};

static PyTypeObject StepCoreType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "transforms._capture._core.StepCore",
    .tp_doc = "The step core in C: see transforms._capture._step_core.PyStepCore.",
    .tp_basicsize = sizeof(StepCore),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)core_init,
    .tp_dealloc = (destructor)core_dealloc,
    .tp_traverse = (traverseproc)core_traverse,
    .tp_clear = (inquiry)core_clear,
    .tp_methods = core_methods,
    .tp_getset = core_getset,
    .tp_as_sequence = &core_as_sequence,
};

/* --- configure ------------------------------------------------------------------------ */
static int
set_global(PyObject **slot, PyObject *value)
{
    Py_INCREF(value);
    Py_XSETREF(*slot, value);
    return 0;
}

static int
set_name(PyObject **slot, PyObject *names, Py_ssize_t i)
{
    PyObject *name = PyTuple_GET_ITEM(names, i);
    if (!PyUnicode_Check(name)) {
        PyErr_SetString(PyExc_TypeError, "attribute names must be str");
        return -1;
    }
    Py_INCREF(name);
    PyUnicode_InternInPlace(&name);
    Py_XSETREF(*slot, name);
    return 0;
}

static PyObject *
configure(PyObject *Py_UNUSED(module), PyObject *args, PyObject *kwds)
{
    static char *names[] = {"tracer_type", "tracer_parts", "name_stack_place", "name_stack",
                            "code_kinds", "locations", "user_kind", "internal_kind",
                            "user_location", "param_summaries", "keyed_objects",
                            "small_record", "seeded", "jit_names", NULL};
    PyObject *tracer, *parts, *place, *stack_fn, *kinds, *locs, *user_fn, *summaries, *keyed,
             *small, *seed, *jits;
    long user, internal;
    if (!PyArg_ParseTupleAndKeywords(
            args, kwds, "O!O!O!OO!O!llOO!O!OO!O!:configure", names, &PyType_Type, &tracer,
            &PyTuple_Type, &parts, &PyTuple_Type, &place, &stack_fn, &PyDict_Type, &kinds,
            &PyDict_Type, &locs, &user, &internal, &user_fn, &PyDict_Type, &summaries,
            &PyTuple_Type, &keyed, &small, &PyTuple_Type, &seed, &PyTuple_Type, &jits))
        return NULL;
    if (PyTuple_GET_SIZE(parts) != 6 || PyTuple_GET_SIZE(place) != 3 ||
        PyTuple_GET_SIZE(seed) <= TEXT_BACKWARD) {
        PyErr_SetString(PyExc_ValueError, "tracer_parts: 6 names; name_stack_place: "
                        "(holder, context attribute, name stack attribute); seeded texts");
        return NULL;
    }
    static const char *expected[] = {"error", "forward", "backward"};
    int numbers[] = {TEXT_ERROR, TEXT_FORWARD, TEXT_BACKWARD};
    for (int i = 0; i < 3; i++) {
        PyObject *text = PyTuple_GET_ITEM(seed, numbers[i]);
        if (!PyUnicode_Check(text) || PyUnicode_CompareWithASCIIString(text, expected[i]) != 0) {
            PyErr_Format(PyExc_ValueError, "seeded text %d must be '%s'", numbers[i], expected[i]);
            return NULL;
        }
    }
    if (set_name(&s_trace, parts, 0) < 0 || set_name(&s_aval, parts, 1) < 0 ||
        set_name(&s_val, parts, 2) < 0 || set_name(&s_bdim, parts, 3) < 0 ||
        set_name(&s_primal, parts, 4) < 0 || set_name(&s_tangent, parts, 5) < 0 ||
        set_name(&s_context, place, 1) < 0 || set_name(&s_name_stack, place, 2) < 0)
        return NULL;
    set_global(&tracer_type, tracer);
    set_global(&name_stack_holder, PyTuple_GET_ITEM(place, 0));
    set_global(&name_stack_fn, stack_fn);
    set_global(&code_kinds, kinds);
    set_global(&locations, locs);
    set_global(&user_location_fn, user_fn);
    set_global(&param_summaries, summaries);
    set_global(&keyed_objects, keyed);
    set_global(&small_record, small);
    set_global(&seeded, seed);
    set_global(&jit_names, jits);
    user_kind = user;
    internal_kind = internal;
    configured = 1;
    Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"configure", (PyCFunction)(void (*)(void))configure, METH_VARARGS | METH_KEYWORDS,
     "Hand the core what it reads of JAX and of the recorder (see _step_core._core_setting)."},
    {NULL}
};

static struct PyModuleDef core_module = {
    PyModuleDef_HEAD_INIT, "transforms._capture._core",
    "The step core in C (see transforms._capture._step_core).", -1, module_methods,
};

PyMODINIT_FUNC
PyInit__core(void)
{
    if (PyType_Ready(&StepCoreType) < 0)
        return NULL;
    PyObject *array = PyImport_ImportModule("array");
    if (array == NULL)
        return NULL;
    array_type = PyObject_GetAttrString(array, "array");
    Py_DECREF(array);
    s_name = PyUnicode_InternFromString("name");
    s_jaxpr = PyUnicode_InternFromString("jaxpr");
    s_donated = PyUnicode_InternFromString("donated_invars");
    s_inline = PyUnicode_InternFromString("inline");
    s_i = PyUnicode_InternFromString("i");
    float_hex = PyObject_GetAttrString((PyObject *)&PyFloat_Type, "hex");
    inline_members = PyDict_New();
    if (array_type == NULL || s_name == NULL || s_jaxpr == NULL || s_donated == NULL ||
        s_inline == NULL || s_i == NULL || float_hex == NULL ||
        inline_members == NULL)
        return NULL;
    PyObject *module = PyModule_Create(&core_module);
    if (module == NULL)
        return NULL;
    Py_INCREF(&StepCoreType);
    if (PyModule_AddObject(module, "StepCore", (PyObject *)&StepCoreType) < 0 ||
        PyModule_AddStringConstant(module, "SOURCE_SHA", CORE_SOURCE_SHA) < 0 ||
        PyModule_AddIntConstant(module, "STRIDE", STRIDE) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
