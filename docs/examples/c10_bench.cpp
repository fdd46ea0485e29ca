// A benchmark of c10's own compiled code, for `doit bench` on the c10 slice (recipe=pytorch2
// targets=c10; docs/bench.md, "The c10 slice"). Built by c10_bench.sh against one artifact's
// headers and linked to its libc10.so (RUNPATH), so the time goes to that artifact's library.
//
//   c10_bench [tensorimpl|strings] [iterations]
//
// tensorimpl: what an empty CPU tensor costs c10: a Storage from the CPU allocator, a
//   TensorImpl (intrusive_ptr), its sizes set contiguous (strides, numel, contiguity flags),
//   read back, released. Every call below lands in libc10.so.
// strings: c10::Device parsing, DeviceTypeName, c10::str and c10::ReplaceAll.
//
// Prints one JSON line: {"kernel", "iterations", "check", "ns_per_op", "cpu_ns_per_op",
// "libc10"}: ns_per_op by the steady clock, cpu_ns_per_op by this thread's CPU clock (less
// moved by other processes on a busy machine), libc10 the libc10.so this process mapped
// (/proc/self/maps), to show which artifact ran.
#include <c10/core/CPUAllocator.h>
#include <c10/core/Device.h>
#include <c10/core/DeviceType.h>
#include <c10/core/Storage.h>
#include <c10/core/TensorImpl.h>
#include <c10/util/StringUtil.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include <time.h>

namespace {

std::string mapped_libc10() {
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) {
    auto at = line.find('/');
    if (at != std::string::npos && line.find("/libc10.so", at) != std::string::npos) {
      return line.substr(at);
    }
  }
  return "";
}

int64_t tensorimpl(int64_t iterations) {
  int64_t sum = 0;
  const int64_t shapes[][3] = {{2, 3, 4}, {16, 1, 8}, {1, 1, 1}, {7, 5, 3}};
  for (int64_t i = 0; i < iterations; ++i) {
    const int64_t* shape = shapes[i & 3];
    const int64_t numel = shape[0] * shape[1] * shape[2];
    c10::Storage storage(c10::Storage::use_byte_size_t(), numel * 4, c10::GetCPUAllocator(), true);
    auto impl = c10::make_intrusive<c10::TensorImpl>(
        std::move(storage), c10::DispatchKeySet(c10::DispatchKey::CPU), caffe2::TypeMeta::Make<float>());
    impl->set_sizes_contiguous(c10::IntArrayRef(shape, 3));
    sum += impl->numel() + impl->stride(0) + (impl->is_contiguous() ? 1 : 0);
  }
  return sum;
}

int64_t strings(int64_t iterations) {
  int64_t sum = 0;
  const char* devices[] = {"cpu", "cuda:1", "meta", "cuda:12"};
  for (int64_t i = 0; i < iterations; ++i) {
    c10::Device device(devices[i & 3]);
    std::string name = c10::DeviceTypeName(device.type(), true);
    std::string text = c10::str("tensor on ", device, " (", name, ") #", i);
    sum += static_cast<int64_t>(c10::ReplaceAll(text, "c", "C")) + static_cast<int64_t>(text.size());
  }
  return sum;
}

double thread_cpu_ns() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) * 1e9 + static_cast<double>(now.tv_nsec);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string kernel = argc > 1 ? argv[1] : "tensorimpl";
  const int64_t iterations = argc > 2 ? std::atoll(argv[2]) : 200000;
  int64_t (*run)(int64_t) = kernel == "strings" ? strings : kernel == "tensorimpl" ? tensorimpl : nullptr;
  if (run == nullptr || iterations <= 0) {
    std::fprintf(stderr, "usage: c10_bench [tensorimpl|strings] [iterations > 0]\n");
    return 2;
  }
  run(iterations / 10 + 1);  // warm the allocator and caches
  const double cpu_start = thread_cpu_ns();
  const auto start = std::chrono::steady_clock::now();
  const int64_t check = run(iterations);
  const std::chrono::duration<double, std::nano> took = std::chrono::steady_clock::now() - start;
  const double cpu_took = thread_cpu_ns() - cpu_start;
  const double n = static_cast<double>(iterations);
  std::printf(
      "{\"kernel\": \"%s\", \"iterations\": %lld, \"check\": %lld, \"ns_per_op\": %.3f, "
      "\"cpu_ns_per_op\": %.3f, \"libc10\": \"%s\"}\n",
      kernel.c_str(), static_cast<long long>(iterations), static_cast<long long>(check), took.count() / n,
      cpu_took / n, mapped_libc10().c_str());
  return 0;
}
