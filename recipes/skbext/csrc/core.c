/* skbext._core.triple(n) = 3 * n, in C. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static PyObject *triple(PyObject *self, PyObject *arg) {
  long n = PyLong_AsLong(arg);
  if (n == -1 && PyErr_Occurred()) return NULL;
  return PyLong_FromLong(3 * n);
}

static PyMethodDef methods[] = {{"triple", triple, METH_O, "triple(n) -> 3 * n"}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_core", NULL, -1, methods};

PyMODINIT_FUNC PyInit__core(void) { return PyModule_Create(&module); }
