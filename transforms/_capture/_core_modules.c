/* The module path of the stack (Step.module): a walk over the frames of module methods, as
 * _modules.current_module_path walks (read its module's docstring first), with its tables
 * (method_codes) and its callbacks (module_bases, is_method_code, module_path). No library's
 * name here: configure() hands them over. See _core.h. */
#include "_core.h"

/* The registered libraries' module base classes imported so far (borrowed); asked of
 * Python again only when another of the libraries is in sys.modules. NULL on error. */
static PyObject *
current_bases(CoreState *st)
{
    PyObject *modules = PyImport_GetModuleDict();  /* borrowed */
    Py_ssize_t present = 0, n = PyTuple_GET_SIZE(st->module_libraries);
    for (Py_ssize_t i = 0; i < n; i++) {
        if (PyDict_GetItemWithError(modules, PyTuple_GET_ITEM(st->module_libraries, i)) != NULL)
            present++;
        else if (PyErr_Occurred())
            return NULL;
    }
    if (present == st->bases_for)
        return st->module_bases;
    PyObject *bases = PyObject_CallNoArgs(st->module_bases_fn);
    if (bases == NULL)
        return NULL;
    if (!PyTuple_Check(bases)) {
        bad_entry("module_bases()", "a tuple of classes", bases);
        Py_DECREF(bases);
        return NULL;
    }
    Py_XSETREF(st->module_bases, bases);
    /* a library half-imported (its base not there yet) is asked about again */
    st->bases_for = PyTuple_GET_SIZE(bases) == present ? present : -1;
    return bases;
}

/* 1 when a frame of `code` may be a module's method (method_codes, or Python's
 * is_method_code the first time), 0 when not, -1 on error. */
static int
is_method_frame(CoreState *st, PyCodeObject *code)
{
    PyObject *known = code_entry(st->method_codes, code);
    if (known != NULL)
        return known == Py_True;
    if (PyErr_Occurred())
        return -1;
    PyObject *answer = PyObject_CallOneArg(st->is_method_code_fn, (PyObject *)code);
    if (answer == NULL)
        return -1;
    int method = PyObject_IsTrue(answer);
    Py_DECREF(answer);
    return method;
}

/* A frame's first argument `self`, a new reference; NULL with no error when it has none
 * bound (deleted), NULL with an error on error. */
static PyObject *
frame_self(CoreState *st, PyFrameObject *frame)
{
#if PY_VERSION_HEX >= 0x030C0000
    PyObject *value = PyFrame_GetVar(frame, st->s_self);
    if (value == NULL && PyErr_ExceptionMatches(PyExc_NameError))
        PyErr_Clear();  /* NameError: `self` unbound in this frame, so no module here */
    return value;
#else
    /* Python 3.11 has no PyFrame_GetVar: the frame's locals, as f_locals reads them */
    PyObject *locals = PyFrame_GetLocals(frame);
    if (locals == NULL)
        return NULL;
    PyObject *value = PyDict_Check(locals) ? PyDict_GetItemWithError(locals, st->s_self)
                                           : NULL;
    Py_XINCREF(value);
    if (!PyDict_Check(locals))
        bad_entry("a frame's locals", "a dict", locals);
    Py_DECREF(locals);
    return value;
#endif
}

/* Appends a method frame's `self` to `chain` when it is a module other than the last one
 * appended (a module's method calling its own). 0, or -1 on error. */
static int
add_module(CoreState *st, PyFrameObject *frame, PyObject *bases, PyObject *chain)
{
    PyObject *obj = frame_self(st, frame);
    if (obj == NULL)
        return PyErr_Occurred() ? -1 : 0;
    int is_module = PyObject_IsInstance(obj, bases);
    Py_ssize_t n = PyList_GET_SIZE(chain);
    int added = 0;
    if (is_module > 0 && (n == 0 || PyList_GET_ITEM(chain, n - 1) != obj))
        added = PyList_Append(chain, obj);
    Py_DECREF(obj);
    return is_module < 0 ? -1 : added;
}

/* The module instances of the current stack's method frames, innermost first (a new list,
 * emptied of them by the caller); NULL on error. */
static PyObject *
module_chain(CoreState *st, PyObject *bases)
{
    PyObject *chain = PyList_New(0);
    if (chain == NULL)
        return NULL;
    PyFrameObject *frame = PyEval_GetFrame();
    Py_XINCREF(frame);
    while (frame != NULL) {
        PyCodeObject *code = PyFrame_GetCode(frame);
        int method = is_method_frame(st, code);
        Py_DECREF(code);
        if (method < 0 || (method && add_module(st, frame, bases, chain) < 0)) {
            Py_DECREF(frame);
            Py_DECREF(chain);
            return NULL;
        }
        PyFrameObject *back = PyFrame_GetBack(frame);
        Py_DECREF(frame);
        frame = back;
    }
    return chain;
}

int
module_number(StepCore *self)
{
    CoreState *st = self->st;
    PyObject *bases = current_bases(st);
    if (bases == NULL)
        return -1;
    if (PyTuple_GET_SIZE(bases) == 0)  /* no registered library imported: no walk */
        return 0;
    PyObject *chain = module_chain(st, bases);
    if (chain == NULL)
        return -1;
    if (PyList_GET_SIZE(chain) == 0) {
        Py_DECREF(chain);
        return 0;
    }
    PyObject *instances = PyList_AsTuple(chain);
    Py_DECREF(chain);  /* nothing of the stack kept past this step */
    PyObject *path = instances == NULL ? NULL : PyObject_CallOneArg(st->module_path_fn,
                                                                    instances);
    Py_XDECREF(instances);
    if (path == NULL)
        return -1;
    int number = PyUnicode_Check(path) ? text_number(self, path)
                                       : bad_entry("module_path()", "a str", path);
    Py_DECREF(path);
    return number;
}
