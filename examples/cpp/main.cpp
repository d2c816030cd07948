// The article's GeGLU, traced, compiled (-O2 unless --level says) and run through mlpc's library
// API on device buffers this program allocates. Weights and input come from files (or, without
// them, the seeded values `mlpc run --sample geglu` uses), and -O2 decides at the batch run, as
// mlpc run does, so its output can be compared with `mlpc run -O<level> --output`'s:
//   geglu_example [--weights W.safetensors] [--input X.npy | --batch M] [--output Y.npy] [--level L]
#include <mlpc/mlpc.h>

#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "compiler/data_files.h"  // the files and seeded values of `mlpc run`
#include "host/random_init.h"

namespace {

mlpc::ir::Graph geglu() {
  using namespace mlpc;
  Tracer t("geglu");
  Tensor x = t.input("x", DType::BF16, {kBatch, 768});
  Tensor gate = linear(x, 3072, false, "gate");
  Tensor up = linear(x, 3072, false, "up");
  Tensor h = (gelu_tanh(gate).named("act") * up).named("h");
  return t.finish({linear(h, 768, false, "down")});
}

void cuda(cudaError_t s) {
  if (s != cudaSuccess) throw mlpc::Error(std::string("CUDA: ") + cudaGetErrorString(s));
}

int run(int argc, char** argv) {
  mlpc::DataFiles files;
  int64_t asked_batch = 0;
  int level = 2;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--weights")) files.weights = argv[i + 1];
    else if (!std::strcmp(argv[i], "--input")) files.inputs = {argv[i + 1]};
    else if (!std::strcmp(argv[i], "--output")) files.outputs = {argv[i + 1]};
    else if (!std::strcmp(argv[i], "--batch")) asked_batch = std::stoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--level")) level = std::stoi(argv[i + 1]);
    else throw mlpc::Error(std::string("unknown flag ") + argv[i]);
  }
  if (argc % 2 == 0) throw mlpc::Error(std::string("flag without a value: ") + argv[argc - 1]);

  const mlpc::ir::Graph g = geglu();
  const mlpc::InputArrays in = mlpc::read_inputs(g, files);
  const int64_t batch = mlpc::resolve_batch(asked_batch, in, 8192);  // the sample's default
  const mlpc::Values values =
      mlpc::make_values(g, batch, mlpc::runtime::kDefaultSeed, files, in);

  mlpc::Module m = mlpc::compile(g, {.level = level, .decide_batches = {batch}});
  std::string why;
  if (!mlpc::gpu_available(&why)) {
    std::fprintf(stderr, "geglu_example: %s\n", why.c_str());
    return 3;
  }
  for (const mlpc::TensorInfo& p : m.params()) {
    const mlpc::runtime::HostTensor& t = values.at(p.name);
    m.set_param_f64(p.name, t.data.data(), t.dims);
  }
  const mlpc::runtime::HostTensor& x = values.at("x");
  const std::vector<uint8_t> x_bytes = mlpc::runtime::encode(x);
  const std::vector<int64_t> y_dims = m.output_shape(0, batch);
  mlpc::runtime::HostTensor y{mlpc::DType::BF16, y_dims, {}};
  const size_t y_bytes = static_cast<size_t>(y.numel()) * 2;
  void *dx = nullptr, *dy = nullptr;
  cuda(cudaMalloc(&dx, x_bytes.size()));
  cuda(cudaMalloc(&dy, y_bytes));
  cuda(cudaMemcpy(dx, x_bytes.data(), x_bytes.size(), cudaMemcpyHostToDevice));
  m.run({{dx, mlpc::DType::BF16, x.dims}}, {{dy, mlpc::DType::BF16, y_dims}});
  std::vector<uint8_t> out(y_bytes);
  cuda(cudaMemcpy(out.data(), dy, y_bytes, cudaMemcpyDeviceToHost));  // waits for the run
  cudaFree(dx);
  cudaFree(dy);
  y.data = mlpc::runtime::decode(y.dtype, out.data(), y.numel());
  mlpc::write_outputs({y}, files);
  std::printf("geglu_example: ran geglu at batch %lld, %d launches%s%s\n",
              static_cast<long long>(batch), m.launches(batch),
              files.outputs.empty() ? "" : ", wrote ",
              files.outputs.empty() ? "" : files.outputs[0].c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "geglu_example: error: %s\n", e.what());
    return 1;
  }
}
