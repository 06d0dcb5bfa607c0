/* Recording steps: where a step comes from (the user's line, the name stack), its row, the
 * steps being processed, and the methods a RecordingTrace calls (begin, end, fail, event,
 * barriers, levels). See _core.h. */
#include "_core.h"

/* --- where a step comes from ---------------------------------------------------------- */

/* A code object's kind from CODE_KINDS ((code, kind) by id), or -1 when not known. */
static long
code_kind(CoreState *st, PyCodeObject *code)
{
    PyObject *kind = code_entry(st->code_kinds, code);
    return kind != NULL && PyLong_Check(kind) ? PyLong_AsLong(kind) : -1;
}

/* A user line's SourceLocation from LOCATIONS, a new reference; NULL when not there. */
static PyObject *
known_location(CoreState *st, PyCodeObject *code, int line)
{
    PyObject *key = Py_BuildValue("(Ni)", PyLong_FromVoidPtr(code), line);
    PyObject *loc = key == NULL ? NULL : PyDict_GetItemWithError(st->locations, key);
    Py_XDECREF(key);
    if (loc != NULL && PyTuple_Check(loc) && PyTuple_GET_SIZE(loc) == 3 &&
        PyTuple_GET_ITEM(loc, 0) == (PyObject *)code && PyTuple_GET_ITEM(loc, 1) == Py_None) {
        PyObject *found = PyTuple_GET_ITEM(loc, 2);
        Py_INCREF(found);
        return found;
    }
    return NULL;
}

/* The user's line by a walk over known frames, a new reference; NULL with no error when
 * the walk meets anything else (Python's user_location then decides). */
static PyObject *
known_user_location(CoreState *st)
{
    PyFrameObject *frame = PyEval_GetFrame();
    Py_XINCREF(frame);
    PyObject *found = NULL;
    while (frame != NULL) {
        PyCodeObject *code = PyFrame_GetCode(frame);
        long kind = code_kind(st, code);
        if (kind == st->user_kind) {
            found = known_location(st, code, PyFrame_GetLineNumber(frame));
            Py_DECREF(code);
            break;
        }
        Py_DECREF(code);
        if (kind != st->internal_kind)  /* unknown code, or a library's: Python's walk */
            break;
        PyFrameObject *back = PyFrame_GetBack(frame);
        Py_DECREF(frame);
        frame = back;
    }
    Py_XDECREF(frame);
    return found;
}

static PyObject *
user_location(CoreState *st)
{
    PyObject *found = known_user_location(st);
    if (found != NULL || PyErr_Occurred())
        return found;
    /* NB: skip 1: user_location's caller's frame is the Python code calling the core */
    return PyObject_CallFunction(st->user_location_fn, "i", 1);
}

/* The numbers of the current name stack's text and scope path (in *scope); -1 on error. */
static int
name_stack_numbers(StepCore *self, int *scope)
{
    CoreState *st = self->st;
    PyObject *context = PyObject_GetAttr(st->name_stack_holder, st->s_context);
    PyObject *stack = context == NULL ? NULL : PyObject_GetAttr(context, st->s_name_stack);
    Py_XDECREF(context);
    if (stack == NULL)
        return -1;
    if (stack == self->last_stack) {  /* consecutive steps mostly share one */
        Py_DECREF(stack);
        *scope = self->last_stack_scope;
        return self->last_stack_text;
    }
    PyObject *facts = PyObject_CallNoArgs(st->name_stack_fn);
    int number = -1, path = -1;
    if (facts != NULL && (!PyTuple_Check(facts) || PyTuple_GET_SIZE(facts) != 2 ||
                          !PyUnicode_Check(PyTuple_GET_ITEM(facts, 0)) ||
                          !PyUnicode_Check(PyTuple_GET_ITEM(facts, 1))))
        bad_entry("name_stack()", "a (text, scope path) pair of str", facts);
    else if (facts != NULL && (number = text_number(self, PyTuple_GET_ITEM(facts, 0))) >= 0)
        path = text_number(self, PyTuple_GET_ITEM(facts, 1));
    Py_XDECREF(facts);
    if (number < 0 || path < 0) {
        Py_DECREF(stack);
        return -1;
    }
    Py_XSETREF(self->last_stack, stack);  /* kept: its id is not reused */
    self->last_stack_text = number;
    self->last_stack_scope = path;
    *scope = path;
    return number;
}

/* --- rows and the steps being processed ----------------------------------------------- */
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
push_active(StepCore *self, int index, int phase, PyObject *source, int number, int module)
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
    self->active[self->n_active++] = (Active){index, phase, source, number, module};
    return 0;
}

void
pop_active(StepCore *self)
{
    if (self->n_active > 0) {
        self->n_active--;
        Py_XDECREF(self->active[self->n_active].source);
    }
}

int
check_level(StepCore *self, int level)
{
    if (level < 0 || level >= self->n_levels) {
        PyErr_Format(PyExc_IndexError, "level %d of a call with %zd levels", level,
                     self->n_levels);
        return -1;
    }
    return 0;
}

int
check_index(StepCore *self, Py_ssize_t index)
{
    if (index < 0 || index >= self->count) {
        PyErr_Format(PyExc_IndexError, "step %zd of %zd", index, self->count);
        return -1;
    }
    return 0;
}

/* The number of a step's source, found when `source` is NULL (a new reference otherwise,
 * given up here). */
static int
source_number(StepCore *self, PyObject *source)
{
    if (source == NULL && (source = user_location(self->st)) == NULL)
        return -1;
    int number = number_of(source, self->sources, self->source_numbers);
    Py_DECREF(source);
    return number;
}

/* Where a step begun at `level` comes from: its cause, phase, source's number and module
 * path's number. */
static int
step_origin(StepCore *self, int level, int *cause, int *phase, int *number, int *module)
{
    if (self->n_active > 0) {
        /* A step bound while processing another comes from the same user line and module,
         * unless user code (a custom rule body) runs in between. */
        Active *top = &self->active[self->n_active - 1];
        *cause = top->index;
        *phase = top->phase == TEXT_BACKWARD ? TEXT_BACKWARD : self->phases[level];
        if (top->source != NULL) {
            *module = top->module;
            return *number = top->number;
        }
        if ((*number = source_number(self, NULL)) < 0)
            return -1;
        return *module = module_number(self);
    }
    *cause = NONE;
    *phase = self->phases[level];
    if (*phase != TEXT_BACKWARD) {
        if ((*number = source_number(self, NULL)) < 0)
            return -1;
        return *module = module_number(self);
    }
    /* The backward pass runs deep inside JAX, called from one user line and module: found
     * once per pass. */
    if (self->backward[level] == NULL &&
        (self->backward[level] = user_location(self->st)) == NULL)
        return -1;
    if (self->backward_module[level] < 0 &&
        (self->backward_module[level] = module_number(self)) < 0)
        return -1;
    *module = self->backward_module[level];
    Py_INCREF(self->backward[level]);
    *number = source_number(self, self->backward[level]);
    return *number;
}

/* --- methods -------------------------------------------------------------------------- */
PyObject *
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
    int cause, phase, number, module;
    if (inputs < 0 || step_origin(self, level, &cause, &phase, &number, &module) < 0)
        return NULL;
    if (number >= PyList_GET_SIZE(self->sources)) {
        PyErr_Format(PyExc_SystemError, "source %d of %zd", number, PyList_GET_SIZE(self->sources));
        return NULL;
    }
    /* borrowed: the sources list holds it */
    PyObject *source = PyList_GET_ITEM(self->sources, number);
    PyObject *name = PyObject_GetAttr(args[1], self->st->s_primitive_name);
    int primitive = name == NULL ? -1 : text_number(self, name);
    Py_XDECREF(name);
    int kind = primitive < 0 ? -1 : text_number(self, args[3]);
    int scope = 0;
    int names = kind < 0 ? -1 : name_stack_numbers(self, &scope);
    if (names < 0)
        return NULL;
    Py_ssize_t index = self->count;
    int32_t *row = new_row(self);
    if (row == NULL || push_active(self, (int)index, phase, source, number, module) < 0)
        return NULL;
    int32_t values[STRIDE] = {level, primitive, kind, phase, 0, inputs, RUNNING, number, names,
                              0, NONE, cause, 0, scope, module};
    memcpy(row, values, sizeof(values));
    return PyLong_FromSsize_t(index);
}

PyObject *
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

PyObject *
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

PyObject *
core_event(StepCore *self, PyObject *args)
{
    int level, values, source;
    PyObject *name, *error, *cause;
    if (!PyArg_ParseTuple(args, "iUiiOO:event", &level, &name, &values, &source, &error, &cause))
        return NULL;
    if (check_level(self, level) < 0)
        return NULL;
    if (error != Py_None && !PyUnicode_Check(error)) {
        PyErr_SetString(PyExc_TypeError, "event's error must be a str or None");
        return NULL;
    }
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
                             values, source, 0, 0, err, because, 0, 0, 0};
    memcpy(row, cells, sizeof(cells));
    return PyLong_FromSsize_t(index);
}

PyObject *
core_push_barrier(StepCore *self, PyObject *Py_UNUSED(ignored))
{
    if (self->n_active == 0)
        Py_RETURN_FALSE;
    Active top = self->active[self->n_active - 1];
    if (push_active(self, top.index, top.phase, NULL, -1, -1) < 0)
        return NULL;
    Py_RETURN_TRUE;
}

PyObject *
core_pop_barrier(StepCore *self, PyObject *Py_UNUSED(ignored))
{
    pop_active(self);
    Py_RETURN_NONE;
}

PyObject *
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
        int *backward_module = PyMem_Realloc(self->backward_module, (size_t)cap * sizeof(int));
        if (backward_module == NULL)
            return PyErr_NoMemory();
        self->backward_module = backward_module;
        self->cap_levels = cap;
    }
    self->phases[self->n_levels] = TEXT_FORWARD;
    self->backward[self->n_levels] = NULL;
    self->backward_module[self->n_levels] = -1;
    self->n_levels++;
    Py_RETURN_NONE;
}
