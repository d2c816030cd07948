#include "compiler/retype.h"

#include <memory>

namespace mlpc {

ir::Graph with_dtype(const ir::Graph& g, ir::DType dtype) {
  ir::Graph out = g;
  for (ir::Node& n : out.nodes) {
    n.type.dtype = dtype;
    if (n.body) n.body = std::make_shared<const ir::Graph>(with_dtype(*n.body, dtype));
  }
  return out;
}

}  // namespace mlpc
