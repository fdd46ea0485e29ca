"""docs/debugging.md's example: a C++ kernel (demo::native::add_kernel) reached from a
two-level Python call chain."""
import demo


def inner(x):
    return demo.add(x, [10.0, 20.0], alpha=2.5)


def outer():
    return inner([1.0, 2.0])


print(outer())
