"""docs/debugging.md's CUDA example: cudademo's device round trip (cudademo_selftest in
axpy.cu) called from Python through ctypes, on the active profile's library. Without a GPU it
stops at the first CUDA call (printing its error) after the host code before it ran."""
import ctypes
import sys

lib = ctypes.CDLL(".orch/profile/prefix/lib/libcudademo.so")
lib.cudademo_error_string.restype = ctypes.c_char_p
bad = ctypes.c_int(0)
rc = lib.cudademo_selftest(int(sys.argv[1]) if len(sys.argv) > 1 else 4096, ctypes.byref(bad))
print("cudademo_selftest:", "ok" if rc == 0 else lib.cudademo_error_string(rc).decode())
