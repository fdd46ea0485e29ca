#include <Python.h>
#include <string>
#include "../../c10/build_info.h"

static PyObject* show_config(PyObject* self, PyObject* args) {
  std::string s = std::string("  - Build settings: BUILD_TYPE=") + c10::build_type() + "\n";
  return PyUnicode_FromString(s.c_str());
}

static PyMethodDef methods[] = {
    {"_show_config", show_config, METH_NOARGS, "build settings"},
    {nullptr, nullptr, 0, nullptr}};

static PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "torch._C", nullptr, -1, methods};

extern "C" __attribute__((visibility("default"))) PyObject* initModule() {
  PyObject* m = PyModule_Create(&module_def);
  if (m) PyModule_AddIntConstant(m, "_GLIBCXX_USE_CXX11_ABI", _GLIBCXX_USE_CXX11_ABI);
  return m;
}
