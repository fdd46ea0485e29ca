/* cext._speed.dot(a, b): the dot product of two float sequences, in C. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static PyObject *dot(PyObject *self, PyObject *args) {
  PyObject *a, *b;
  if (!PyArg_ParseTuple(args, "OO", &a, &b)) return NULL;
  Py_ssize_t n = PySequence_Size(a);
  if (n < 0 || n != PySequence_Size(b)) {
    PyErr_SetString(PyExc_ValueError, "dot: sequences of equal length expected");
    return NULL;
  }
  double sum = 0.0;
  for (Py_ssize_t i = 0; i < n; i++) {
    PyObject *x = PySequence_GetItem(a, i), *y = PySequence_GetItem(b, i);
    sum += PyFloat_AsDouble(x) * PyFloat_AsDouble(y);
    Py_XDECREF(x);
    Py_XDECREF(y);
  }
  if (PyErr_Occurred()) return NULL;
  return PyFloat_FromDouble(sum);
}

static PyMethodDef methods[] = {{"dot", dot, METH_VARARGS, "dot(a, b) -> float"}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_speed", NULL, -1, methods};

PyMODINIT_FUNC PyInit__speed(void) { return PyModule_Create(&module); }
