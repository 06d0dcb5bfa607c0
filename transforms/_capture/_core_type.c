/* The StepCore type: reading a core (phases, texts, sources, cells, its parts), its life
 * (init from a describer, GC), and its spec, made a heap type of the module. See _core.h. */
#include "_core.h"

/* --- reading -------------------------------------------------------------------------- */
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
    self->backward_module[level] = -1;
    Py_RETURN_NONE;
}

/* The object numbered `number` in one of the core's tables, a new reference. */
static PyObject *
table_item(PyObject *table, Py_ssize_t number, const char *what)
{
    if (number < 0 || number >= PyList_GET_SIZE(table)) {
        PyErr_Format(PyExc_SystemError, "%s %zd of a table of %zd", what, number,
                     PyList_GET_SIZE(table));
        return NULL;
    }
    PyObject *item = PyList_GET_ITEM(table, number);
    Py_INCREF(item);
    return item;
}

static PyObject *
core_phase(StepCore *self, PyObject *arg)
{
    int level = (int)PyLong_AsLong(arg);
    if ((level == -1 && PyErr_Occurred()) || check_level(self, level) < 0)
        return NULL;
    return table_item(self->texts, self->phases[level], "text");
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
    return table_item(self->sources, self->cells[index * STRIDE + SOURCE], "source");
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
    PyObject *cells = PyObject_CallFunction(self->st->array_type, "Oy#", self->st->s_i,
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
dict_check(PyObject *obj)
{
    return PyDict_Check(obj);
}

static int
list_check(PyObject *obj)
{
    return PyList_Check(obj);
}

/* The describer's attribute `name` into *slot; `check` (NULL for any) says what it must be. */
static int
describer_part(PyObject *describer, const char *name, PyObject **slot, int (*check)(PyObject *))
{
    if ((*slot = PyObject_GetAttrString(describer, name)) == NULL)
        return -1;
    if (check != NULL && !check(*slot)) {
        PyErr_Format(PyExc_TypeError, "the describer's %s must be a %s, got %.200R", name,
                     check == list_check ? "list" : "dict", *slot);
        return -1;
    }
    return 0;
}

static int
take_describer(StepCore *self, PyObject *describer)
{
    if (describer_part(describer, "new_tracer_record", &self->new_tracer_record, NULL) < 0 ||
        describer_part(describer, "concrete_record", &self->concrete_record, NULL) < 0 ||
        describer_part(describer, "describe_all", &self->describe_all_py, NULL) < 0 ||
        describer_part(describer, "fast", &self->fast, dict_check) < 0 ||
        describer_part(describer, "arrays", &self->arrays, dict_check) < 0 ||
        describer_part(describer, "scalars", &self->scalars, dict_check) < 0 ||
        describer_part(describer, "small_arrays", &self->small_arrays, dict_check) < 0 ||
        describer_part(describer, "tuples", &self->values, list_check) < 0 ||
        describer_part(describer, "tuple_index", &self->tuple_index, dict_check) < 0 ||
        describer_part(describer, "single_index", &self->single_index, dict_check) < 0)
        return -1;
    PyObject *enclosing = PyObject_GetAttrString(describer, "enclosing");
    if (enclosing == NULL)
        return -1;
    self->check_leak = enclosing != Py_None;
    Py_DECREF(enclosing);
    return 0;
}

/* The call's own tables, seeded as every call's are. */
static int
new_tables(StepCore *self)
{
    if ((self->sources = PyList_New(0)) == NULL || (self->source_numbers = PyDict_New()) == NULL ||
        (self->texts = PyList_New(0)) == NULL || (self->text_numbers = PyDict_New()) == NULL ||
        (self->params = PyList_New(0)) == NULL || (self->param_numbers = PyDict_New()) == NULL ||
        (self->subjaxprs = PyList_New(0)) == NULL || (self->subjaxpr_numbers = PyDict_New()) == NULL)
        return -1;
    PyObject *seeded = self->st->seeded;
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
core_init(StepCore *self, PyObject *args, PyObject *kwds)
{
    static char *names[] = {"describer", "step_params", "jit_step", "jit_entries", NULL};
    PyObject *describer, *step_params, *jit_step, *jit_entries;
    CoreState *st = PyType_GetModuleState(Py_TYPE(self));
    if (st == NULL)
        return -1;
    if (!st->configured) {
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
    self->st = st;
    self->describer = Py_NewRef(describer);
    self->step_params = Py_NewRef(step_params);
    self->jit_step = Py_NewRef(jit_step);
    self->jit_entries = Py_NewRef(jit_entries);
    return take_describer(self, describer) < 0 || new_tables(self) < 0 ? -1 : 0;
}

#define VISIT_FIELD(name) Py_VISIT(self->name);
#define CLEAR_FIELD(name) Py_CLEAR(self->name);

static int
core_traverse(StepCore *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));  /* a heap type: its instances hold it */
    STEP_CORE_OBJECTS(VISIT_FIELD)
    for (Py_ssize_t i = 0; i < self->n_active; i++)
        Py_VISIT(self->active[i].source);
    for (Py_ssize_t i = 0; i < self->n_levels; i++)
        Py_VISIT(self->backward[i]);
    return 0;
}

static int
core_clear(StepCore *self)
{
    STEP_CORE_OBJECTS(CLEAR_FIELD)
    while (self->n_active > 0)
        pop_active(self);
    for (Py_ssize_t i = 0; i < self->n_levels; i++)
        Py_CLEAR(self->backward[i]);
    return 0;
}

static void
core_dealloc(StepCore *self)
{
    PyTypeObject *type = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    core_clear(self);
    PyMem_Free(self->cells);
    PyMem_Free(self->active);
    PyMem_Free(self->phases);
    PyMem_Free(self->backward);
    PyMem_Free(self->backward_module);
    type->tp_free((PyObject *)self);
    Py_DECREF(type);
}

/* --- the type ------------------------------------------------------------------------- */
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
        return Py_NewRef(self->field ? self->field : Py_None);            \
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

static PyType_Slot core_slots[] = {
    {Py_tp_doc, "The step core in C: see transforms._capture._step_core.PyStepCore."},
    {Py_tp_new, PyType_GenericNew},
    {Py_tp_init, core_init},
    {Py_tp_dealloc, core_dealloc},
    {Py_tp_traverse, core_traverse},
    {Py_tp_clear, core_clear},
    {Py_tp_methods, core_methods},
    {Py_tp_getset, core_getset},
    {Py_sq_length, core_len},
    {0, NULL},
};

static PyType_Spec core_spec = {
    .name = "transforms._capture._core.StepCore",
    .basicsize = sizeof(StepCore),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_IMMUTABLETYPE,
    .slots = core_slots,
};

/* The StepCore type of `module` (a new reference): its instances find the module's state. */
PyObject *
step_core_type_new(PyObject *module)
{
    return PyType_FromModuleAndSpec(module, &core_spec, NULL);
}
