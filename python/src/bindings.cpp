// mlpc._mlpc: mlpc::compile and mlpc::Module for Python (nanobind). Tensors cross as device
// pointers (ints) and shapes, so torch tensors pass without copies; run_ptrs is the hot path,
// which reuses the Module's TensorRefs and changes only their pointers and batch dims.
#include <nanobind/nanobind.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "mlpc/mlpc.h"

namespace nb = nanobind;

namespace {

PyObject* g_error = nullptr;  // mlpc._errors.Error: one class for the extension and pure Python

// A Module with the TensorRefs of one forward kept between calls.
struct PyModule {
  explicit PyModule(mlpc::Module m) : module(std::move(m)) {
    for (const auto& i : module.inputs()) ins.push_back({nullptr, i.dtype, i.dims});
    for (const auto& o : module.outputs()) outs.push_back({nullptr, o.dtype, o.dims});
  }

  // Sets each ref's data and every batch dim (kBatch in the declared dims) to `rows`.
  void fill(std::vector<mlpc::TensorRef>& refs, const std::vector<mlpc::TensorInfo>& infos,
            const std::vector<uintptr_t>& ptrs, int64_t rows, const char* what) {
    if (ptrs.size() != refs.size()) {
      throw mlpc::Error("run_ptrs: " + std::to_string(ptrs.size()) + " " + what + " pointers for " +
                        std::to_string(refs.size()) + " " + what + "s");
    }
    for (size_t i = 0; i < refs.size(); ++i) {
      refs[i].data = reinterpret_cast<void*>(ptrs[i]);
      for (size_t d = 0; d < refs[i].shape.size(); ++d) {
        if (infos[i].dims[d] == mlpc::kBatch) refs[i].shape[d] = rows;
      }
    }
  }

  void run_ptrs(const std::vector<uintptr_t>& in, const std::vector<uintptr_t>& out, int64_t rows,
                uintptr_t stream) {
    fill(ins, module.inputs(), in, rows, "input");
    fill(outs, module.outputs(), out, rows, "output");
    module.run(ins, outs, reinterpret_cast<cudaStream_t>(stream));
  }

  mlpc::Module module;
  std::vector<mlpc::TensorRef> ins, outs;
};

nb::list infos(const std::vector<mlpc::TensorInfo>& v) {
  nb::list out;
  for (const auto& i : v) out.append(nb::make_tuple(i.name, i.dtype, i.dims));
  return out;
}

// A CompileSpec with the level's kernel choices overridden by name; an unknown name is an error
// naming the known ones (their values are checked by mlpc::compile and mlpc::check_spec).
mlpc::CompileSpec spec_of(int level, std::vector<int64_t> decide_batches,
                          const std::map<std::string, std::string>& kernels) {
  mlpc::CompileSpec spec;
  spec.level = level;
  spec.decide_batches = std::move(decide_batches);
  const std::pair<const char*, std::string mlpc::CompileSpec::*> fields[] = {
      {"merge_gemms", &mlpc::CompileSpec::merge_gemms},
      {"small_gemms", &mlpc::CompileSpec::small_gemms},
      {"gated_gemms", &mlpc::CompileSpec::gated_gemms},
      {"fp32_gemms", &mlpc::CompileSpec::fp32_gemms},
      {"transposed_x", &mlpc::CompileSpec::transposed_x},
      {"fused_mlp", &mlpc::CompileSpec::fused_mlp}};
  for (const auto& [name, value] : kernels) {
    const auto* field = std::find_if(std::begin(fields), std::end(fields),
                                     [&](const auto& f) { return name == f.first; });
    if (field == std::end(fields)) {
      std::string known;
      for (const auto& f : fields) known += std::string(known.empty() ? "" : ", ") + f.first;
      throw mlpc::Error("kernel choice '" + name + "': expected one of " + known);
    }
    spec.*(field->second) = value;
  }
  return spec;
}

mlpc::TensorRef ref(uintptr_t ptr, mlpc::DType dtype, std::vector<int64_t> shape) {
  return {reinterpret_cast<void*>(ptr), dtype, std::move(shape)};
}

}  // namespace

NB_MODULE(_mlpc, m) {
  nb::object error = nb::module_::import_("mlpc._errors").attr("Error");
  g_error = error.release().ptr();  // held for the life of the process
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const mlpc::Error& e) {
      PyErr_SetString(g_error, e.what());
    }
  });

  nb::enum_<mlpc::DType>(m, "DType")
      .value("F32", mlpc::DType::F32)
      .value("F16", mlpc::DType::F16)
      .value("BF16", mlpc::DType::BF16);

  m.def(
      "gpu_available",
      [] {
        std::string why;
        bool ok = mlpc::gpu_available(&why);
        return std::make_pair(ok, why);
      },
      "(whether a usable GPU is here, why not)");

  m.def(
      "compile",
      [](const std::string& text, int level, std::vector<int64_t> decide_batches,
         std::string arch, bool cuda_graphs, bool tune_gemms, const std::string& file,
         const std::map<std::string, std::string>& kernels) {
        mlpc::CompileSpec spec = spec_of(level, std::move(decide_batches), kernels);
        spec.arch = std::move(arch);
        spec.cuda_graphs = cuda_graphs;
        spec.tune_gemms = tune_gemms;
        nb::gil_scoped_release unlocked;  // NVRTC builds and -O2's measurements take a while
        return new PyModule(mlpc::compile(text, spec, file));
      },
      nb::arg("text"), nb::arg("level") = 2, nb::arg("decide_batches") = std::vector<int64_t>{},
      nb::arg("arch") = "", nb::arg("cuda_graphs") = true, nb::arg("tune_gemms") = true,
      nb::arg("file") = "<python>",
      nb::arg("kernels") = std::map<std::string, std::string>{},
      "Compiles mlpc text into a Module (mlpc::compile). kernels: the level's kernel choices "
      "overridden by name (merge_gemms, small_gemms, gated_gemms, fp32_gemms, transposed_x, "
      "fused_mlp), as `mlpc compile`'s flags of the same names take them.");

  m.def(
      "check_spec",
      [](int level, std::vector<int64_t> decide_batches,
         const std::map<std::string, std::string>& kernels) {
        mlpc::check_spec(spec_of(level, std::move(decide_batches), kernels));
      },
      nb::arg("level") = 2, nb::arg("decide_batches") = std::vector<int64_t>{},
      nb::arg("kernels") = std::map<std::string, std::string>{},
      "Raises the mlpc.Error compile would for these options, compiling nothing.");

  nb::class_<PyModule>(m, "Module")
      .def_prop_ro("name", [](const PyModule& p) { return p.module.name(); })
      .def_prop_ro("inputs", [](const PyModule& p) { return infos(p.module.inputs()); })
      .def_prop_ro("outputs", [](const PyModule& p) { return infos(p.module.outputs()); })
      .def_prop_ro("params", [](const PyModule& p) { return infos(p.module.params()); })
      .def("output_shape", [](const PyModule& p, size_t i, int64_t batch) {
        return p.module.output_shape(i, batch);
      })
      .def("ir", [](const PyModule& p) { return p.module.ir(); })
      .def("fusion_report", [](const PyModule& p) { return p.module.fusion_report(); })
      .def("plan", [](const PyModule& p, int64_t b) { return p.module.plan(b); },
           nb::arg("batch") = 4096)
      .def("explain", [](const PyModule& p, int64_t b) { return p.module.explain(b); },
           nb::arg("batch") = 4096)
      .def("kernel_sources", [](const PyModule& p) { return p.module.kernel_sources(); })
      .def("launches", [](const PyModule& p, int64_t b) { return p.module.launches(b); },
           nb::arg("batch"))
      .def("nvrtc_builds_since_compile",
           [](const PyModule& p) { return p.module.nvrtc_builds_since_compile(); })
      .def(
          "set_param",
          [](PyModule& p, const std::string& name, uintptr_t host, mlpc::DType dtype,
             const std::vector<int64_t>& shape) {
            p.module.set_param(name, reinterpret_cast<const void*>(host), dtype, shape);
          },
          nb::arg("name"), nb::arg("host_ptr"), nb::arg("dtype"), nb::arg("shape"),
          "Copies host values (the param's dtype, or f32) to the device.")
      .def(
          "bind_param",
          [](PyModule& p, const std::string& name, uintptr_t dev, mlpc::DType dtype,
             std::vector<int64_t> shape) {
            return p.module.bind_param(name, ref(dev, dtype, std::move(shape)));
          },
          nb::arg("name"), nb::arg("device_ptr"), nb::arg("dtype"), nb::arg("shape"),
          "Uses device memory as the param, without a copy where the plan reads it as stored; "
          "returns False when it copied.")
      .def(
          "run",
          [](PyModule& p, const std::vector<std::tuple<uintptr_t, mlpc::DType, std::vector<int64_t>>>& in,
             const std::vector<std::tuple<uintptr_t, mlpc::DType, std::vector<int64_t>>>& out,
             uintptr_t stream) {
            std::vector<mlpc::TensorRef> ins, outs;
            for (auto& [d, t, s] : in) ins.push_back(ref(d, t, s));
            for (auto& [d, t, s] : out) outs.push_back(ref(d, t, s));
            nb::gil_scoped_release unlocked;
            p.module.run(ins, outs, reinterpret_cast<cudaStream_t>(stream));
          },
          nb::arg("inputs"), nb::arg("outputs"), nb::arg("stream") = 0,
          "One forward: inputs and outputs as (device_ptr, dtype, shape), in declared order.")
      .def(
          "run_ptrs",
          [](PyModule& p, const std::vector<uintptr_t>& in, const std::vector<uintptr_t>& out,
             int64_t rows, uintptr_t stream) {
            nb::gil_scoped_release unlocked;
            p.run_ptrs(in, out, rows, stream);
          },
          nb::arg("inputs"), nb::arg("outputs"), nb::arg("rows"), nb::arg("stream") = 0,
          "The hot path: device pointers in declared order, every batch dim `rows`.");
}
