#include "codegen/elementwise_producer.h"

#include <algorithm>

namespace mlpc::codegen {

int readers(const Plan& plan, int b) {
  int n = 0;
  for (const Step& s : plan.steps) {
    std::vector<int> bufs = step_buffers(s);
    n += static_cast<int>(std::count(bufs.begin(), bufs.end() - 1, b));
  }
  return n;
}

std::optional<ElementwiseProducer> elementwise_producer(const Plan& plan, const ir::Graph& g,
                                                        int x) {
  const Buffer& xb = plan.buffers[static_cast<size_t>(x)];
  if (xb.role != BufferRole::Intermediate || readers(plan, x) != 1) return std::nullopt;
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const auto* k = std::get_if<KernelStep>(&plan.steps[i]);
    if (!k || k->output != x) continue;
    const auto* e = k->as<Elementwise>();
    const bool elementwise = e && e->store == Store::RowMajor;
    const auto node = std::find_if(g.nodes.begin(), g.nodes.end(),
                                   [&](const ir::Node& n) { return n.name == xb.name; });
    if (elementwise && node != g.nodes.end() && node->op == ir::Op::FusedPointwise)
      return ElementwiseProducer{i, &*node};
    return std::nullopt;
  }
  return std::nullopt;
}

KernelStep regenerated(const Plan& plan, const ir::Graph& g, const ElementwiseProducer& producer,
                       const PointwiseOptions& options) {
  const auto& old = std::get<KernelStep>(plan.steps[producer.step]);
  KernelStep k = generate_pointwise_kernel(g, *producer.region, options);
  k.name = old.name;  // unique already
  k.inputs = old.inputs;
  k.output = old.output;
  return k;
}

}  // namespace mlpc::codegen
