/* A tiny CPython extension for the wheelhouse tests: compiled with -g, so the shared object
   carries DWARF that `strip --strip-debug` removes; demo_ext.add(2, 3) == 5 proves the
   stripped object still loads. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static PyObject *add(PyObject *self, PyObject *args) {
    long a, b;
    if (!PyArg_ParseTuple(args, "ll", &a, &b)) {
        return NULL;
    }
    return PyLong_FromLong(a + b);
}

static PyMethodDef methods[] = {
    {"add", add, METH_VARARGS, "a + b"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_ext", NULL, -1, methods};

PyMODINIT_FUNC PyInit__ext(void) { return PyModule_Create(&module); }
