// The built-in samples, traced with the C++ API. The same graphs live as text in samples/*.mlp.
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"

namespace mlpc {

struct SampleInfo {
  std::string name;
  std::string description;
  int64_t default_batch;
};

const std::vector<SampleInfo>& samples();
const SampleInfo& sample_info(const std::string& name);  // throws mlpc::Error when unknown
ir::Graph make_sample(const std::string& name);

}  // namespace mlpc
