/* The module transforms._capture._core: multi-phase init (PEP 489), its state (what
 * configure() hands over from Python, the StepCore type), configure(). See _core.h. */
#include "_core.h"

/* --- configure ------------------------------------------------------------------------ */

/* *slot = value (a new reference taken) */
static void
set_object(PyObject **slot, PyObject *value)
{
    Py_XSETREF(*slot, Py_NewRef(value));
}

/* *slot = names[i], which must be a str (interned: attribute and key lookups compare it
 * by identity first) */
static int
set_name(PyObject **slot, PyObject *names, Py_ssize_t i, const char *what)
{
    PyObject *name = PyTuple_GET_ITEM(names, i);
    if (!PyUnicode_Check(name)) {
        bad_entry(what, "a tuple of str", names);
        return -1;
    }
    Py_INCREF(name);
    PyUnicode_InternInPlace(&name);
    Py_XSETREF(*slot, name);
    return 0;
}

static int
check_sizes(PyObject *parts, PyObject *place, PyObject *seed, PyObject *jit_params)
{
    if (PyTuple_GET_SIZE(parts) != 6)
        return bad_entry("tracer_parts", "6 names (trace, aval, val, batch dim, primal, tangent)",
                         parts);
    if (PyTuple_GET_SIZE(place) != 3)
        return bad_entry("name_stack_place",
                         "(holder, context attribute, name stack attribute)", place);
    if (PyTuple_GET_SIZE(jit_params) < 2)
        return bad_entry("jit_summary_params", "(jaxpr, *keyed params, inline) names",
                         jit_params);
    static const char *expected[] = {"error", "forward", "backward"};
    int numbers[] = {TEXT_ERROR, TEXT_FORWARD, TEXT_BACKWARD};
    for (int i = 0; i < 3; i++) {
        PyObject *text = PyTuple_GET_SIZE(seed) > numbers[i] ? PyTuple_GET_ITEM(seed, numbers[i]) : NULL;
        if (text == NULL || !PyUnicode_Check(text) ||
            PyUnicode_CompareWithASCIIString(text, expected[i]) != 0) {
            PyErr_Format(PyExc_ValueError, "seeded text %d must be '%s'", numbers[i], expected[i]);
            return -1;
        }
    }
    return 0;
}

/* jit's params keying its summary besides its jaxpr: jit_summary_params[1:-1], as str. */
static int
set_jit_params(CoreState *st, PyObject *jit_params)
{
    Py_ssize_t n = PyTuple_GET_SIZE(jit_params);
    if (set_name(&st->s_jaxpr, jit_params, 0, "jit_summary_params") < 0 ||
        set_name(&st->s_inline, jit_params, n - 1, "jit_summary_params") < 0)
        return -1;
    PyObject *keyed = PyTuple_New(n - 2);
    if (keyed == NULL)
        return -1;
    for (Py_ssize_t i = 1; i < n - 1; i++) {
        PyObject *name = NULL;
        if (set_name(&name, jit_params, i, "jit_summary_params") < 0) {
            Py_DECREF(keyed);
            return -1;
        }
        PyTuple_SET_ITEM(keyed, i - 1, name);
    }
    Py_XSETREF(st->jit_keyed, keyed);
    return 0;
}

/* The module libraries' names, interned (looked up in sys.modules at each step). */
static int
set_module_libraries(CoreState *st, PyObject *libraries)
{
    Py_ssize_t n = PyTuple_GET_SIZE(libraries);
    PyObject *names = PyTuple_New(n);
    if (names == NULL)
        return -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *name = NULL;
        if (set_name(&name, libraries, i, "module_libraries") < 0) {
            Py_DECREF(names);
            return -1;
        }
        PyTuple_SET_ITEM(names, i, name);
    }
    Py_XSETREF(st->module_libraries, names);
    return 0;
}

/* What the module path's walk reads (_modules): see CORE_STATE_OBJECTS. */
static int
set_module_walk(CoreState *st, PyObject *libraries, PyObject *bases_fn, PyObject *codes,
                PyObject *is_method_fn, PyObject *path_fn)
{
    PyObject *empty = PyTuple_New(0);
    PyObject *self_name = PyUnicode_InternFromString("self");
    if (empty == NULL || self_name == NULL || set_module_libraries(st, libraries) < 0) {
        Py_XDECREF(empty);
        Py_XDECREF(self_name);
        return -1;
    }
    Py_XSETREF(st->module_bases, empty);
    Py_XSETREF(st->s_self, self_name);
    st->bases_for = -1;  /* asked at the first step */
    set_object(&st->module_bases_fn, bases_fn);
    set_object(&st->method_codes, codes);
    set_object(&st->is_method_code_fn, is_method_fn);
    set_object(&st->module_path_fn, path_fn);
    return 0;
}

static PyObject *
configure(PyObject *module, PyObject *args, PyObject *kwds)
{
    static char *names[] = {"tracer_type", "tracer_parts", "name_stack_place", "name_stack",
                            "code_kinds", "locations", "user_kind", "internal_kind",
                            "user_location", "param_summaries", "keyed_objects",
                            "small_record", "seeded", "jit_names", "primitive_name",
                            "jit_summary_params", "module_libraries", "module_bases",
                            "method_codes", "is_method_code", "module_path", NULL};
    PyObject *tracer, *parts, *place, *stack_fn, *kinds, *locs, *user_fn, *summaries, *keyed,
             *small, *seed, *jits, *primitive_name, *jit_params, *libraries, *bases_fn,
             *codes, *is_method_fn, *path_fn;
    long user, internal;
    CoreState *st = PyModule_GetState(module);
    if (st == NULL)
        return NULL;
    if (!PyArg_ParseTupleAndKeywords(
            args, kwds, "O!O!O!OO!O!llOO!O!OO!O!UO!O!OO!OO:configure", names, &PyType_Type,
            &tracer, &PyTuple_Type, &parts, &PyTuple_Type, &place, &stack_fn, &PyDict_Type,
            &kinds, &PyDict_Type, &locs, &user, &internal, &user_fn, &PyDict_Type, &summaries,
            &PyTuple_Type, &keyed, &small, &PyTuple_Type, &seed, &PyTuple_Type, &jits,
            &primitive_name, &PyTuple_Type, &jit_params, &PyTuple_Type, &libraries, &bases_fn,
            &PyDict_Type, &codes, &is_method_fn, &path_fn))
        return NULL;
    if (check_sizes(parts, place, seed, jit_params) < 0)
        return NULL;
    PyObject *primitive = PyTuple_Pack(1, primitive_name);
    int failed = primitive == NULL ||
        set_name(&st->s_primitive_name, primitive, 0, "primitive_name") < 0;
    Py_XDECREF(primitive);
    const char *tp = "tracer_parts", *np = "name_stack_place";
    if (failed || set_name(&st->s_trace, parts, 0, tp) < 0 || set_name(&st->s_aval, parts, 1, tp) < 0 ||
        set_name(&st->s_val, parts, 2, tp) < 0 || set_name(&st->s_bdim, parts, 3, tp) < 0 ||
        set_name(&st->s_primal, parts, 4, tp) < 0 || set_name(&st->s_tangent, parts, 5, tp) < 0 ||
        set_name(&st->s_context, place, 1, np) < 0 || set_name(&st->s_name_stack, place, 2, np) < 0 ||
        set_jit_params(st, jit_params) < 0 ||
        set_module_walk(st, libraries, bases_fn, codes, is_method_fn, path_fn) < 0)
        return NULL;
    set_object(&st->tracer_type, tracer);
    set_object(&st->name_stack_holder, PyTuple_GET_ITEM(place, 0));
    set_object(&st->name_stack_fn, stack_fn);
    set_object(&st->code_kinds, kinds);
    set_object(&st->locations, locs);
    set_object(&st->user_location_fn, user_fn);
    set_object(&st->param_summaries, summaries);
    set_object(&st->keyed_objects, keyed);
    set_object(&st->small_record, small);
    set_object(&st->seeded, seed);
    set_object(&st->jit_names, jits);
    st->user_kind = user;
    st->internal_kind = internal;
    st->configured = 1;
    Py_RETURN_NONE;
}

/* --- the module ----------------------------------------------------------------------- */

/* What the module's state holds before configure(): Python's own objects. */
static int
core_exec(PyObject *module)
{
    CoreState *st = PyModule_GetState(module);
    PyObject *array = PyImport_ImportModule("array");
    if (array == NULL)
        return -1;
    st->array_type = PyObject_GetAttrString(array, "array");
    Py_DECREF(array);
    st->s_i = PyUnicode_InternFromString("i");
    st->float_hex = PyObject_GetAttrString((PyObject *)&PyFloat_Type, "hex");
    st->inline_members = PyDict_New();
    st->step_core_type = step_core_type_new(module);
    if (st->array_type == NULL || st->s_i == NULL || st->float_hex == NULL ||
        st->inline_members == NULL || st->step_core_type == NULL)
        return -1;
    PyObject *bracket_type = bracket_type_new(module);
    if (bracket_type == NULL)
        return -1;
    int added = PyModule_AddObjectRef(module, "Bracket", bracket_type);
    Py_DECREF(bracket_type);
    PyObject *jit_call_type = added < 0 ? NULL : jit_call_type_new(module);
    if (jit_call_type == NULL)
        return -1;
    added = PyModule_AddObjectRef(module, "JitCall", jit_call_type);
    Py_DECREF(jit_call_type);
    if (added < 0 ||
        PyModule_AddObjectRef(module, "StepCore", st->step_core_type) < 0 ||
        PyModule_AddStringConstant(module, "SOURCE_SHA", CORE_SOURCE_SHA) < 0 ||
        PyModule_AddIntConstant(module, "STRIDE", STRIDE) < 0)
        return -1;
    return 0;
}

#define STATE_VISIT(name) Py_VISIT(st->name);
#define STATE_CLEAR(name) Py_CLEAR(st->name);

static int
core_module_traverse(PyObject *module, visitproc visit, void *arg)
{
    CoreState *st = PyModule_GetState(module);
    if (st != NULL) {
        CORE_STATE_OBJECTS(STATE_VISIT)
    }
    return 0;
}

static int
core_module_clear(PyObject *module)
{
    CoreState *st = PyModule_GetState(module);
    if (st != NULL) {
        st->configured = 0;
        CORE_STATE_OBJECTS(STATE_CLEAR)
    }
    return 0;
}

static void
core_module_free(void *module)
{
    core_module_clear((PyObject *)module);
}

static PyMethodDef module_methods[] = {
    {"configure", (PyCFunction)(void (*)(void))configure, METH_VARARGS | METH_KEYWORDS,
     "Hand the core what it reads of JAX and of the recorder (see _step_core._core_setting)."},
    {NULL}
};

static PyModuleDef_Slot core_module_slots[] = {
    {Py_mod_exec, core_exec},
    {0, NULL},
};

static struct PyModuleDef core_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "transforms._capture._core",
    .m_doc = "The step core in C (see transforms._capture._step_core).",
    .m_size = sizeof(CoreState),
    .m_methods = module_methods,
    .m_slots = core_module_slots,
    .m_traverse = core_module_traverse,
    .m_clear = core_module_clear,
    .m_free = core_module_free,
};

PyMODINIT_FUNC
PyInit__core(void)
{
    return PyModuleDef_Init(&core_module);
}
