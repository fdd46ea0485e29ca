// findtorch::device_name(i): c10's name of CPU device i ("cpu:0"); links libc10 via find_package.
#include <c10/core/Device.h>

#include <string>

namespace findtorch {

std::string device_name(int index) {
  return c10::Device(c10::DeviceType::CPU, static_cast<c10::DeviceIndex>(index)).str();
}

}  // namespace findtorch
