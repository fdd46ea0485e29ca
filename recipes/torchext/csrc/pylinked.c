#include <Python.h>
static struct PyModuleDef mod = {PyModuleDef_HEAD_INIT, "pylinked", NULL, -1, NULL};
PyMODINIT_FUNC PyInit_pylinked(void) { return PyModule_Create(&mod); }
