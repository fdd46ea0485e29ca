#include "core.h"

#include <sstream>
#include <stdexcept>
#include <utility>

namespace demo {

Tensor::Tensor(std::vector<double> data) : data_(std::move(data)) {}

int64_t Tensor::numel() const { return static_cast<int64_t>(data_.size()); }

double* Tensor::data() { return data_.data(); }

const double* Tensor::data() const { return data_.data(); }

std::string Tensor::repr() const {
  std::ostringstream os;
  os << "Tensor([";
  for (size_t i = 0; i < data_.size(); ++i) os << (i ? ", " : "") << data_[i];
  os << "])";
  return os.str();
}

const char* build_type() { return DEMO_BUILD_TYPE; }

void check(bool cond, const std::string& message) {
  if (!cond) throw std::runtime_error(message);
}

}  // namespace demo
