/* Twin of patchscope.testing._snapshot._py_same_namespace: the quick check a
 * snapshot makes before comparing name by name, run before and after every
 * test by the pytest plugin. */
#include "speedups.h"

/* A name of *current* is the saved one if it is the same object or, both
 * being exact str, an equal string (a name deleted and set again is often a
 * new string object). No other key is compared by value: that could run
 * Python code. Keep in sync with _same_name in testing/_snapshot.py. */
static int
same_name(PyObject *key, PyObject *saved_key)
{
    return key == saved_key || (PyUnicode_CheckExact(key) && PyUnicode_CheckExact(saved_key) &&
                                PyUnicode_Compare(key, saved_key) == 0);
}

/* same_namespace(current, saved, names): True if the dict *current* holds the
 * same names, in the same order, bound to the same objects as *saved*, the
 * snapshot's copy; False if not (the caller then compares name by name).
 * None for a namespace that is not a plain dict (a class's mappingproxy):
 * the Python twin serves it. *names* is only the Python twin's. */
PyObject *
py_same_namespace(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "same_namespace(current, saved, names) takes 3 arguments");
        return NULL;
    }
    PyObject *current = args[0], *saved = args[1];
    if (!PyDict_CheckExact(current) || !PyDict_CheckExact(saved)) {
        Py_RETURN_NONE;
    }
    if (PyDict_GET_SIZE(current) != PyDict_GET_SIZE(saved)) {
        Py_RETURN_FALSE;
    }
    Py_ssize_t i = 0, j = 0;
    PyObject *key, *value, *saved_key, *saved_value;
    /* No Python code runs in the loop (identities, and exact strs by value),
     * so neither dict can change under it. */
    while (PyDict_Next(current, &i, &key, &value)) {
        if (!PyDict_Next(saved, &j, &saved_key, &saved_value) || value != saved_value ||
            !same_name(key, saved_key)) {
            Py_RETURN_FALSE;
        }
    }
    Py_RETURN_TRUE;
}
