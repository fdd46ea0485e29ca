// The core library: like c10, everything else depends on it.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#if defined(DEMO_CORE_BUILDING)
#define DEMO_CORE_API __attribute__((visibility("default")))
#else
#define DEMO_CORE_API
#endif

namespace demo {

// A minimal 1-D tensor of doubles.
class DEMO_CORE_API Tensor {
 public:
  explicit Tensor(std::vector<double> data);
  int64_t numel() const;
  double* data();
  const double* data() const;
  std::string repr() const;

 private:
  std::vector<double> data_;
};

// CMAKE_BUILD_TYPE this library was compiled as.
DEMO_CORE_API const char* build_type();

// Checks a condition and throws std::runtime_error with the message otherwise.
DEMO_CORE_API void check(bool cond, const std::string& message);

}  // namespace demo
