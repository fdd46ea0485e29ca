// demo._C: the CPython extension, like torch._C (links the ops library via $ORIGIN RPATH).
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <exception>
#include <vector>

#include "ops.h"

namespace {

bool to_vector(PyObject* seq, std::vector<double>* out) {
  PyObject* fast = PySequence_Fast(seq, "expected a sequence of numbers");
  if (!fast) return false;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
  out->reserve(static_cast<size_t>(n));
  for (Py_ssize_t i = 0; i < n; ++i) {
    double v = PyFloat_AsDouble(PySequence_Fast_GET_ITEM(fast, i));
    if (PyErr_Occurred()) {
      Py_DECREF(fast);
      return false;
    }
    out->push_back(v);
  }
  Py_DECREF(fast);
  return true;
}

PyObject* py_add(PyObject*, PyObject* args, PyObject* kwargs) {
  static const char* kwlist[] = {"a", "b", "alpha", nullptr};
  PyObject *a = nullptr, *b = nullptr;
  double alpha = 1.0;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO|d", const_cast<char**>(kwlist), &a, &b, &alpha))
    return nullptr;
  std::vector<double> va, vb;
  if (!to_vector(a, &va) || !to_vector(b, &vb)) return nullptr;
  try {
    demo::Tensor out = demo::call_op("add", demo::Tensor(va), demo::Tensor(vb), alpha);
    PyObject* list = PyList_New(out.numel());
    for (int64_t i = 0; i < out.numel(); ++i) PyList_SET_ITEM(list, i, PyFloat_FromDouble(out.data()[i]));
    return list;
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
    return nullptr;
  }
}

PyObject* py_build_type(PyObject*, PyObject*) { return PyUnicode_FromString(demo::build_type()); }

PyMethodDef methods[] = {
    {"add", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(py_add)), METH_VARARGS | METH_KEYWORDS,
     "add(a, b, alpha=1.0): a + alpha * b through demo::native::add_kernel"},
    {"build_type", py_build_type, METH_NOARGS, "CMAKE_BUILD_TYPE the core library was built as"},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef module = {PyModuleDef_HEAD_INIT, "demo._C", "demo's native core", -1, methods};

}  // namespace

PyMODINIT_FUNC PyInit__C() { return PyModule_Create(&module); }
