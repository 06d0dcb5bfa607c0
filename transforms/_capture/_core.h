/* The step core in C, private header: what its sources share (listed in _core_sources.py).
 *
 * transforms._capture._core.StepCore behaves as transforms._capture._step_core.PyStepCore
 * (the reference; read its docstrings first), doing the common case of each step without
 * running Python code:
 *   - a tracer whose trace, class and facts were met before: its record from the
 *     describer's `fast` table; a concrete array by (class, aval) from its `arrays` table
 *     (a small one by its bytes too, from `small_arrays`),
 *     a Python scalar or typed literal by (class, exact value, aval) from `scalars`;
 *   - the user's line: a walk over frames whose code objects' kinds are known
 *     (_locations.CODE_KINDS), ending on a user line already in _locations.LOCATIONS;
 *   - the name stack (its text and scope path): the same object as the previous step's;
 *   - the module path (_modules): no walk while no module library is imported; a walk over
 *     frames whose code objects are known (method_codes), reading `self` from methods';
 *     a step bound while processing another, or in a backward pass, takes its module;
 *   - params of plain data seen before (_param_rules.param_summaries, keyed as params_key);
 *     a jit step's summary kept for its jaxpr object (the shared summaries' jit_entries:
 *     JAX reuses the jaxprs of jnp wrappers, and those its rules make of them).
 * Everything else calls the Python functions PyStepCore calls, so both record the same
 * data. No JAX names here: configure() hands them over from the door (transforms/_jax).
 *
 * The sources:
 *   _core_module.c  the module (multi-phase init), its state, configure()
 *   _core_values.c  describing values: tracers, arrays, scalars, tuples of them
 *   _core_params.c  a step's params: plain params' keys, jit steps' summaries, finishing a row
 *   _core_steps.c   where a step comes from, rows, and the methods that record steps
 *   _core_modules.c the module path of the stack: its module methods' `self`
 *   _core_type.c    the StepCore type: reading it, its life, its spec
 *
 * Built by setup.py with -DCORE_SOURCE_SHA="<sha256 of these sources>": a build from other
 * sources is not used (_step_core.step_core_class).
 */
#ifndef TRANSFORMS_CAPTURE_CORE_H
#define TRANSFORMS_CAPTURE_CORE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#ifndef CORE_SOURCE_SHA
#define CORE_SOURCE_SHA "unknown"
#endif

/* The sources' shared functions are not exported from the extension. */
#if defined(__GNUC__)
#define CORE_INTERNAL __attribute__((visibility("hidden")))
#else
#define CORE_INTERNAL
#endif

/* The cells of a row, as _step_core names them. */
enum { LEVEL, PRIMITIVE, KIND, PHASE, PARAMS, INPUTS, OUTPUTS, SOURCE, NAMES, SUBJAXPRS,
       ERROR_, CAUSE, INLINE, SCOPE, MODULE, STRIDE };
#define RUNNING (-1)
#define NONE (-1)
/* Numbers of the seeded texts (_step_core.SEEDED; checked by configure). */
#define TEXT_ERROR 5
#define TEXT_FORWARD 6
#define TEXT_BACKWARD 7
/* How a trace's tracers are keyed (Describer.fast entries: _describe.FLAT, BATCHED, PAIR). */
enum { PARTS_FLAT = 0, PARTS_BATCHED = 1, PARTS_PAIR = 2 };

/* --- the module's state: set by the module's exec (the first block) and by configure() - */
#define CORE_STATE_OBJECTS(X)                                                            \
    X(step_core_type)     /* the StepCore heap type */                                   \
    X(array_type)         /* array.array */                                              \
    X(s_i)                /* its typecode for the cells */                               \
    X(float_hex)          /* float.hex */                                                \
    X(inline_members)     /* id(an inline param's enum member) -> it */                  \
    X(tracer_type)        /* JAX's Tracer class */                                       \
    X(s_trace) X(s_aval) X(s_val) X(s_bdim) X(s_primal) X(s_tangent) /* its parts */     \
    X(name_stack_holder)  /* the object holding JAX's source-info context */             \
    X(s_context) X(s_name_stack)                                                         \
    X(name_stack_fn)      /* () -> the current name stack's (text, scope path) */        \
    X(code_kinds)         /* id(code) -> (code, kind) */                                 \
    X(locations)          /* (id(code), line) -> (code, None, SourceLocation) */         \
    X(user_location_fn)   /* (skip) -> SourceLocation | None */                          \
    X(param_summaries)    /* params_key(...) -> pairs */                                 \
    X(keyed_objects)      /* classes whose instances key params as they are */           \
    X(small_record)       /* Describer.arrays' mark of a small array */                  \
    X(seeded)             /* the texts every call starts with */                         \
    X(jit_names)          /* the names of JAX's jit primitive */                         \
    X(s_primitive_name)   /* a primitive's attribute holding its name */                 \
    X(s_jaxpr)            /* jit's param holding its jaxpr */                            \
    X(jit_keyed)          /* jit's params keying its summary besides the jaxpr (a tuple) */ \
    X(s_inline)           /* jit's inline param (keyed by inline_token) */               \
    X(module_libraries)   /* the module libraries' names in sys.modules */               \
    X(module_bases_fn)    /* () -> the module base classes of those imported */          \
    X(module_bases)       /* what it answered last */                                    \
    X(method_codes)       /* id(code) -> (code, may it be a module's method) */          \
    X(is_method_code_fn)  /* (code) -> that bool, kept in method_codes */                \
    X(module_path_fn)     /* (modules, innermost first) -> their path */                 \
    X(s_self)             /* a method's first argument */

#define CORE_STATE_FIELD(name) PyObject *name;
typedef struct {
    CORE_STATE_OBJECTS(CORE_STATE_FIELD)
    long user_kind, internal_kind;
    Py_ssize_t bases_for;  /* how many libraries were imported when module_bases answered */
    int configured;
} CoreState;

/* --- the core ------------------------------------------------------------------------- */
typedef struct {
    int index;        /* the step */
    int phase;        /* its phase's text number */
    PyObject *source; /* a SourceLocation, None, or NULL for a barrier */
    int number;       /* the source's number */
    int module;       /* its module path's number (-1 for a barrier) */
} Active;

#define STEP_CORE_OBJECTS(X)                                                             \
    X(describer) X(new_tracer_record) X(concrete_record) X(describe_all_py)              \
    X(fast) X(arrays) X(scalars) X(small_arrays) X(values) X(tuple_index) X(single_index) \
    X(step_params) X(jit_step) X(jit_entries)                                            \
    X(sources) X(source_numbers) X(texts) X(text_numbers)                                \
    X(params) X(param_numbers) X(subjaxprs) X(subjaxpr_numbers) X(last_stack)

typedef struct {
    PyObject_HEAD
    CoreState *st;    /* its module's (the type holds the module) */
    STEP_CORE_OBJECTS(CORE_STATE_FIELD)
    int check_leak;
    int32_t *cells;
    Py_ssize_t count, capacity;
    Active *active;
    Py_ssize_t n_active, cap_active;
    int *phases;
    PyObject **backward;  /* by level: its backward pass's source, or NULL */
    int *backward_module; /* by level: its backward pass's module path's number, or -1 */
    Py_ssize_t n_levels, cap_levels;
    int last_stack_text, last_stack_scope;  /* the numbers of last_stack's facts */
} StepCore;

/* _core_values.c */
CORE_INTERNAL int bad_entry(const char *what, const char *expected, PyObject *got);
CORE_INTERNAL PyObject *code_entry(PyObject *table, PyCodeObject *code);
CORE_INTERNAL int numbered(PyObject *key, PyObject *object, PyObject *(*make)(PyObject *),
                           PyObject *arg, PyObject *objects, PyObject *numbers);
CORE_INTERNAL int number_of(PyObject *obj, PyObject *objects, PyObject *numbers);
CORE_INTERNAL int text_number(StepCore *self, PyObject *text);
CORE_INTERNAL int describe_one(StepCore *self, PyObject *x);
CORE_INTERNAL int describe_all(StepCore *self, PyObject *xs);

/* _core_params.c */
CORE_INTERNAL int finish(StepCore *self, Py_ssize_t index, PyObject *primitive,
                         PyObject *params, int outputs, PyObject *error);

/* _core_steps.c */
CORE_INTERNAL PyObject *core_begin(StepCore *self, PyObject *const *args, Py_ssize_t nargs);
CORE_INTERNAL PyObject *core_end(StepCore *self, PyObject *const *args, Py_ssize_t nargs);
CORE_INTERNAL PyObject *core_fail(StepCore *self, PyObject *const *args, Py_ssize_t nargs);
CORE_INTERNAL PyObject *core_event(StepCore *self, PyObject *args);
CORE_INTERNAL PyObject *core_push_barrier(StepCore *self, PyObject *ignored);
CORE_INTERNAL PyObject *core_pop_barrier(StepCore *self, PyObject *ignored);
CORE_INTERNAL PyObject *core_add_level(StepCore *self, PyObject *ignored);
CORE_INTERNAL void pop_active(StepCore *self);
CORE_INTERNAL int check_level(StepCore *self, int level);
CORE_INTERNAL int check_index(StepCore *self, Py_ssize_t index);

/* _core_modules.c */
CORE_INTERNAL int module_number(StepCore *self);

/* _core_type.c */
CORE_INTERNAL PyObject *step_core_type_new(PyObject *module);
CORE_INTERNAL PyObject *bracket_type_new(PyObject *module);
CORE_INTERNAL PyObject *jit_call_type_new(PyObject *module);

#endif
