// NVTX ranges in mlpc's own domain, so Nsight Systems shows each step under the name the IR, the
// dump and the trace give it. Header-only NVTX3 from the CUDA toolkit: nothing to link, and a
// no-op (one branch) unless a tool such as nsys is attached.
#pragma once

#include <nvtx3/nvToolsExt.h>

namespace mlpc::runtime {

inline nvtxDomainHandle_t nvtx_domain() {
  static const nvtxDomainHandle_t domain = nvtxDomainCreateA("mlpc");
  return domain;
}

class NvtxRange {
 public:
  explicit NvtxRange(const char* name) {
    nvtxEventAttributes_t attr{};
    attr.version = NVTX_VERSION;
    attr.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    attr.messageType = NVTX_MESSAGE_TYPE_ASCII;
    attr.message.ascii = name;
    nvtxDomainRangePushEx(nvtx_domain(), &attr);
  }
  ~NvtxRange() { nvtxDomainRangePop(nvtx_domain()); }
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;
};

}  // namespace mlpc::runtime
