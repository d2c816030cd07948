#include "compiler/cli.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <CLI/CLI.hpp>
#include <nvrtc.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <optional>

#include "codegen/tf32x3_plan.h"
#include "dump/bench_explain.h"
#include "compiler/check.h"
#include "compiler/compile.h"
#include "compiler/data_files.h"
#include "compiler/gpu_session.h"
#include "dump/trace_recorder.h"
#include "compiler/levels.h"
#include "compiler/reference_progress.h"
#include "dump/report.h"
#include "compiler/retype.h"
#include "compiler/samples.h"
#include "ir/error.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "runtime/device/device.h"
#include "host/random_init.h"
#include "runtime/reference/reference.h"

namespace mlpc {
namespace {

constexpr int64_t kFileDefaultBatch = 1024;

// A GPU is needed but there is none: its own exit code, so scripts can tell.
struct NoGpu : Error {
  using Error::Error;
};

// A command line that CLI11 accepts but that does not say what to do: exit 2, as bad flags do.
struct UsageError : Error {
  using Error::Error;
};

// A --arch NVRTC cannot target is a bad flag (one line, exit 2), not a multi-line NVRTC log.
// "sm_90", "sm_90a", "sm_100f": NVRTC's list has the numbers; a trailing 'a' or 'f' is a variant.
std::string check_arch(const std::string& arch) {
  int n = 0;
  std::vector<int> archs;
  if (nvrtcGetNumSupportedArchs(&n) == NVRTC_SUCCESS && n > 0) {
    archs.resize(n);
    if (nvrtcGetSupportedArchs(archs.data()) != NVRTC_SUCCESS) archs.clear();
  }
  if (archs.empty()) return {};  // cannot tell: let NVRTC say
  std::string number = arch.size() > 3 ? arch.substr(3) : "";
  if (!number.empty() && (number.back() == 'a' || number.back() == 'f')) number.pop_back();
  for (int a : archs)
    if (arch.compare(0, 3, "sm_") == 0 && number == std::to_string(a)) return {};
  return fmt::format("'{}' is not an arch NVRTC can compile for (it can: sm_{})", arch,
                     fmt::join(archs, ", sm_"));
}

struct GraphArgs {
  std::string sample, file, dtype;
  std::vector<std::string> positionals;  // the .mlp file, and for run and bench .npy inputs
  int64_t batch = 0;  // 0: the sample's default
  std::vector<int64_t> batches;  // bench: several sizes, "--batch 1,16,256"
  uint64_t seed = runtime::kDefaultSeed;
  int opt_level = 1;
  bool no_fusion = false;
  bool no_cuda_graph = false, no_gemm_tuning = false;
  std::string merge_gemms;  // empty: the level's default
  std::string small_gemms;  // empty: the level's default
  std::string gated_gemms;  // empty: the level's default
  std::string fp32_gemms;   // empty: ieee, at every level
  std::string transposed_x;  // empty: the level's default
  std::string fused_mlp;     // empty: the level's default

  void add_to(CLI::App* cmd, bool several_batches = false) {
    cmd->add_option("--sample", sample, "a built-in sample (see `mlpc samples`)");
    cmd->add_option("file", positionals,
                    "a .mlp file (run and bench: .npy files here are inputs, after --input's)");
    const auto batch_range = CLI::Range(int64_t{1}, int64_t{1} << 24);
    if (several_batches)
      cmd->add_option("--batch", batches, "batch sizes M, e.g. 1,16,256: one compile for all, -O2 deciding at each")
          ->delimiter(',')
          ->check(batch_range);
    else
      cmd->add_option("--batch", batch, "the batch size M")->check(batch_range);
    cmd->add_option("--dtype", dtype, "run the graph in this dtype")
        ->check(CLI::IsMember({"f32", "f16", "bf16"}));
    cmd->add_option("--seed", seed, "seed of the random weights and inputs");
    cmd->add_option("-O,--opt-level", opt_level,
                    "0: eager, one kernel per op; 1: pointwise fusion, as torch.compile does "
                    "(default); 2: also GEMM epilogues (bias, relu, gelu_tanh, residual)")
        ->check(CLI::Range(0, 2));
    cmd->add_option("--merge-gemms", merge_gemms,
                    "sibling GEMMs (gate, up) as one GEMM over stacked weights: auto (-O2's "
                    "default: when measured faster on this GPU), on, off (-O0/-O1's default)")
        ->check(CLI::IsMember({"auto", "on", "off"}));
    cmd->add_option("--small-gemms", small_gemms,
                    "tiny GEMMs (N a multiple of 32, no residual) as generated kernels instead "
                    "of cuBLASLt calls: auto (-O2's default: each one measured faster on this "
                    "GPU; the CUDA-core kernel, or the tensor-core mma kernel at up to 128 rows "
                    "or wherever the CUDA-core one is timed), on (the CUDA-core kernel), mma (the tensor-core kernel: bf16/f16, "
                    "K % 32 == 0, N % 8 == 0), off (-O0/-O1's default)")
        ->check(CLI::IsMember({"auto", "on", "off", "mma"}));
    cmd->add_option("--gated-gemms", gated_gemms,
                    "gate and up GEMMs with the pointwise kernel combining them (gelu_tanh(g)*u, "
                    "silu(g)*u, ...) as one generated Hopper kernel, sm_90 only: auto (-O2's "
                    "default: where measured faster on this GPU, against the mma.sync kernel too "
                    "at up to 128 rows), on, mma (the mma.sync kernel, sm_80+: decode sizes), "
                    "off (-O0/-O1's default)")
        ->check(CLI::IsMember({"auto", "on", "off", "mma"}));
    cmd->add_option("--fp32-gemms", fp32_gemms,
                    "f32 GEMMs as IEEE fp32 on CUDA cores (ieee, the default at every level: "
                    "PyTorch's with TF32 off) or as three TF32 tensor-core products summed over "
                    "K-chunks of at most 512 (TF32 tensor cores outrun CUDA cores even at three "
                    "products; errors within IEEE fp32's tolerance for K >= 256): auto where "
                    "measured faster and K allows the chunks; tf32x3 for every f32 GEMM (one "
                    "chunk where K does not allow them: less accurate, checked with a wider "
                    "tolerance)")
        ->check(CLI::IsMember({"auto", "ieee", "tf32x3"}));
    cmd->add_option("--transposed-x", transposed_x,
                    "IEEE f32 GEMMs reading their input stored transposed, [K, M], written so by "
                    "the kernel computing it (cuBLAS's CUDA-core SGEMM can be faster reading that "
                    "layout; the same launches and results): auto (-O2's default: where "
                    "measured faster on this GPU), on, off (-O0/-O1's default)")
        ->check(CLI::IsMember({"auto", "on", "off"}));
    cmd->add_option("--fused-mlp", fused_mlp,
                    "chains of narrow layers (each hidden value read only by the next layer) as "
                    "one kernel that keeps the hidden values on chip: auto (-O2's default: where "
                    "measured faster on this GPU than the layers apart), on (wherever the kernel "
                    "takes them), off (-O0/-O1's default)")
        ->check(CLI::IsMember({"auto", "on", "off"}));
  }

  // Flags of the GPU executor (run, bench).
  void add_exec_flags(CLI::App* cmd) {
    cmd->add_flag("--no-cuda-graph", no_cuda_graph,
                  "launch kernel by kernel instead of one CUDA graph per forward");
    cmd->add_flag("--no-gemm-tuning", no_gemm_tuning,
                  "take cuBLASLt's first heuristic choice instead of timing its candidates");
  }
  runtime::ExecutorOptions exec_options() const {
    return {.tune_gemms = !no_gemm_tuning, .cuda_graph = !no_cuda_graph};
  }

  // What to compile at the level asked for (bench compares it with eager).
  CompileOptions options() const {
    CompileOptions o = options_for_level(
        opt_level, {.no_fusion = no_fusion, .merge_gemms = merge_gemms, .small_gemms = small_gemms,
                    .gated_gemms = gated_gemms, .fp32_gemms = fp32_gemms,
                    .transposed_x = transposed_x, .fused_mlp = fused_mlp});
    // Measured at the batch asked for; bench with several sizes decides at each
    // (compiler/batch_plans.h), and its --trace follows the first, as this does.
    o.decide_rows = batch;
    return o;
  }

  // `npy_inputs`: where .npy files among the positionals go (run, bench: `--input a.npy b.npy`
  // gives b.npy as a positional); null where a command takes no inputs.
  ir::Graph load(std::vector<std::string>* npy_inputs = nullptr) {
    for (const std::string& p : positionals) {
      if (p.size() > 4 && p.compare(p.size() - 4, 4, ".npy") == 0) {
        if (!npy_inputs) throw UsageError(fmt::format("{}: this command takes no .npy inputs", p));
        npy_inputs->push_back(p);
      } else if (!file.empty()) {
        throw UsageError(fmt::format("two graph files given: {} and {}", file, p));
      } else {
        file = p;
      }
    }
    positionals.clear();
    if (!sample.empty() && !file.empty())
      throw UsageError("give either --sample NAME or a FILE.mlp, not both");
    if (sample.empty() && file.empty()) throw UsageError("give either --sample NAME or a FILE.mlp");
    ir::Graph g = sample.empty() ? ir::parse_file(file) : make_sample(sample);
    const bool asked_batch = !batches.empty() || batch != 0;
    if (!batches.empty()) batch = batches.front();
    if (batch == 0) batch = sample.empty() ? kFileDefaultBatch : sample_info(sample).default_batch;
    if (batches.empty()) batches = {batch};
    if (!dtype.empty()) g = with_dtype(g, *ir::parse_dtype(dtype));
    const bool batched = std::any_of(g.nodes.begin(), g.nodes.end(), [](const ir::Node& n) {
      return n.op == ir::Op::Input && n.type.shape.has_batch();
    });
    if (!batched && asked_batch)
      fmt::print(stderr, "mlpc: note: @{} has static shapes (no batch dim M): --batch has no "
                 "effect\n", g.name);
    return g;
  }
};

// --weights, --input, --output, --save-weights (run, bench): compiler/data_files.h. Each --input
// and --output takes one file and repeats, so a FILE.mlp after it stays the graph.
void add_data_flags(CLI::App* cmd, DataFiles& f) {
  cmd->add_option("--weights", f.weights, "bind the params by name from FILE.safetensors");
  cmd->add_option("--input", f.inputs, "FILE.npy per graph input, in order (sets the batch)")
      ->allow_extra_args(false);
  cmd->add_option("--output", f.outputs, "write each output to FILE.npy (bf16 as f32)")
      ->allow_extra_args(false);
  cmd->add_option("--save-weights", f.save_weights, "write the params used to FILE.safetensors");
}

void print_outputs(const std::vector<runtime::HostTensor>& outs) {
  for (size_t i = 0; i < outs.size(); ++i) {
    const auto& t = outs[i];
    double sum = 0, sq = 0;
    for (double v : t.data) sum += v, sq += v * v;
    double n = static_cast<double>(t.data.size());
    fmt::print("output {}: {}[{}] mean {:.6g} rms {:.6g}\n  first values:", i,
               ir::dtype_name(t.dtype), fmt::join(t.dims, ", "), sum / n, std::sqrt(sq / n));
    for (size_t j = 0; j < std::min<size_t>(8, t.data.size()); ++j) fmt::print(" {:.5g}", t.data[j]);
    fmt::print("\n");
  }
}

int cmd_samples() {
  size_t width = 0;
  for (const SampleInfo& s : samples()) width = std::max(width, s.name.size());
  for (const SampleInfo& s : samples())
    fmt::print("{:<{}}  {} (default batch {})\n", s.name, width, s.description, s.default_batch);
  return 0;
}

struct CompileArgs {
  GraphArgs graph;
  std::string arch, dump_dir;
  bool json = false, print_ir_after_all = false;
  bool emit_ptx = false;
};

void print_compile(const CompiledGraph& c, const CompileArgs& a) {
  if (a.json) {
    fmt::print("{}\n", plan_json(c, a.graph.batch).dump(2));
    return;
  }
  fmt::print("// IR before the passes\n{}\n", c.pipeline.input_ir);
  const bool fused = a.graph.options().fusion;
  fmt::print("// IR after the passes ({})\n{}\n", fused ? "fused" : "eager: one kernel per op",
             ir::print(c.pipeline.graph));
  if (fused)
    fmt::print("// fusion decisions\n{}\n", c.pipeline.fusion.to_string());
  if (!c.plan.choices.empty()) {
    // Small and gated GEMM kernels vs cuBLASLt, 3xTF32 vs IEEE fp32, x transposed or row-major:
    // each choice with its reason.
    fmt::print("// GEMMs: how each one runs, and why\n");
    for (const codegen::StepChoice& ch : c.plan.choices) fmt::print("{}: {}\n", ch.step, ch.why);
    fmt::print("\n");
  }
  fmt::print("{}", plan_text(c, a.graph.batch));
  fmt::print("kernels for {}: {} built by NVRTC in {:.1f} ms, {} from the on-disk cache\n",
             c.arch, c.cache_misses, c.nvrtc_ms, c.cache_hits);
  fmt::print("compile: passes {:.1f} ms (timed {:.1f} ms), plan {:.1f} ms (waited {:.1f} ms for "
             "kernel builds, timed {:.1f} ms), kernels {:.1f} ms\n",
             c.passes_ms, c.passes_timing_ms, c.plan_ms, c.plan_build_wait_ms, c.plan_timing_ms, c.compile_ms);
}

int cmd_compile(CompileArgs& a) {
  ir::Graph g = a.graph.load();
  CompileOptions options = a.graph.options();
  options.arch = a.arch;
  CompiledGraph c = compile(g, options);
  if (a.print_ir_after_all)
    for (const passes::PassRecord& r : c.pipeline.passes)
      fmt::print(stderr, "// IR after {}{}\n{}\n", r.pass, r.changed ? "" : " (unchanged)",
                 r.changed ? r.ir : "");
  if (!a.dump_dir.empty()) write_dump(a.dump_dir, c, a.graph.batch, {.emit_ptx = a.emit_ptx});
  print_compile(c, a);
  return 0;
}

struct RunArgs {
  GraphArgs graph;
  DataFiles data;
  std::string device = "cuda";
};

int cmd_run(RunArgs& a) {
  const int64_t asked_batch = a.graph.batch;
  ir::Graph g = a.graph.load(&a.data.inputs);
  InputArrays in = read_inputs(g, a.data);
  a.graph.batch = resolve_batch(asked_batch, in, a.graph.batch);
  if (a.device == "cpu") check_reference_fits(g, a.graph.batch);
  Values values = make_values(g, a.graph.batch, a.graph.seed, a.data, in);
  if (a.device == "cpu") {
    std::vector<runtime::HostTensor> outs = [&] {
      TerminalProgress progress("reference (fp64, CPU)");
      return runtime::reference_forward(g, values, progress.callback());
    }();
    // The reference computes in fp64; a run of a bf16 graph gives bf16 values, rounded once.
    for (runtime::HostTensor& t : outs)
      for (double& v : t.data) v = runtime::round_to(t.dtype, v);
    fmt::print("the fp64 reference (CPU), each output rounded to its dtype\n");
    print_outputs(outs);
    write_outputs(outs, a.data);
    return 0;
  }
  if (auto reason = runtime::gpu_unavailable_reason())
    throw NoGpu(*reason + "; `mlpc run --device cpu` runs the fp64 reference instead");
  CompiledGraph c = compile(g, a.graph.options());
  auto outs = run_on_gpu(c, values, a.graph.batch, a.graph.exec_options());
  print_outputs(outs);
  write_outputs(outs, a.data);
  std::vector<int64_t> rows = sample_rows(a.graph.batch);
  Check check = compare_rows(g, outs, rows, reference_on_rows(g, values, rows),
                             codegen::needs_tf32x3_tolerance(c.plan), &values);
  fmt::print("check against the fp64 reference on {} rows: max_abs_err {:.3g}, {}\n",
             check.rows.size(), check.max_abs_err,
             check.ok ? "within tolerance" : "OUT OF TOLERANCE");
  return check.ok ? 0 : 1;
}

struct BenchArgs {
  GraphArgs graph;
  DataFiles data;
  bool json = false;
  bool explain = false;   // --explain: per-kernel verdicts against the calibrated peaks
  std::string trace;      // --trace FILE.json: a Chrome trace of one eager and one compiled forward
};

int cmd_bench(BenchArgs& a) {
  if (a.graph.batches.size() > 1 && (!a.data.inputs.empty() || !a.data.outputs.empty()))
    throw Error("--input and --output take one batch size: give a single --batch (or none)");
  const int64_t asked_batch = a.graph.batches.empty() ? 0 : a.graph.batches.front();
  ir::Graph g = a.graph.load(&a.data.inputs);
  InputArrays in = read_inputs(g, a.data);
  if (in.batch) a.graph.batches = {resolve_batch(asked_batch, in, a.graph.batch)};
  // Files read once (before the GPU check, so their errors show anywhere); at the other batch
  // sizes the inputs are seeded random.
  const int64_t first_batch = a.graph.batches.front();
  const Values first = make_values(g, first_batch, a.graph.seed, a.data, in);
  ValuesFor values_for = [&](int64_t batch) {
    Values v = first;
    if (batch != first_batch)
      for (ir::NodeId id : g.inputs())
        v[g.node(id).name] = runtime::random_input(g, id, batch, a.graph.seed);
    return v;
  };
  if (auto reason = runtime::gpu_unavailable_reason()) throw NoGpu(*reason);
  std::vector<BenchResult> results = bench(g, a.graph.batches, a.graph.seed, a.graph.options(),
                                           a.graph.exec_options(), values_for);
  write_outputs(results.front().compiled.outputs, a.data);
  if (!a.trace.empty())
    write_trace_file(a.trace, trace_bench(g, a.graph.batches.front(), a.graph.seed,
                                          a.graph.options(), a.graph.exec_options()));
  std::optional<runtime::DevicePeaks> peaks;
  if (a.explain) peaks = runtime::device_peaks(*ir::parse_dtype(results.front().dtype));
  bool ok = true;
  nlohmann::json all = nlohmann::json::array();
  for (const BenchResult& r : results) {
    ok = ok && r.eager.check.ok && r.compiled.check.ok;
    if (a.json) {
      all.push_back(to_json(r));
      if (peaks) all.back()["explain"] = explain_bench_json(r, *peaks);
    } else {
      fmt::print("{}", to_text(r));
      if (peaks) fmt::print("{}", explain_bench_text(r, *peaks));
    }
  }
  // One batch: the result object itself; several: {"graph", "results": [one per batch]}.
  if (a.json)
    fmt::print("{}\n", (all.size() == 1 ? all[0]
                                       : nlohmann::json{{"graph", g.name}, {"results", all}})
                           .dump(2));
  return ok ? 0 : 1;
}

// The main job on the built-in default: the GeGLU sample, compiled and shown; benched on a GPU.
int cmd_demo() {
  CompileArgs a;
  a.graph.sample = "geglu";
  cmd_compile(a);
  if (auto reason = runtime::gpu_unavailable_reason()) {
    fmt::print("\nno GPU here ({}), so no benchmark: `mlpc bench --sample geglu` on a GPU.\n",
               *reason);
    return 0;
  }
  fmt::print("\n");
  BenchArgs b;
  b.graph.sample = "geglu";
  return cmd_bench(b);
}

}  // namespace

int run_cli(int argc, char** argv) {
  CLI::App app{"mlpc: a miniature graph compiler for MLP blocks"};
  app.require_subcommand(0, 1);
  app.add_subcommand("samples", "list the built-in samples");
  app.add_subcommand("demo", "compile the geglu sample and show it; bench it on a GPU");

  CompileArgs ca;
  CLI::App* compile_cmd = app.add_subcommand("compile", "compile a graph (no GPU needed)");
  ca.graph.add_to(compile_cmd);
  compile_cmd->add_option("--arch", ca.arch, "target, e.g. sm_90 (default: the GPU's, or sm_90)")
      ->check(check_arch);
  compile_cmd->add_flag("--no-fusion", ca.graph.no_fusion, "eager: one kernel per op (-O0)");
  CLI::Option* dump_opt = compile_cmd->add_option(
      "--dump-dir", ca.dump_dir,
      "write a folder to browse: the IR after each pass, kernels, plan, fusion report, graph, "
      "index.html");
  compile_cmd->add_flag("--emit-ptx", ca.emit_ptx, "also write kernels/NAME.ptx in the dump")
      ->needs(dump_opt);
  compile_cmd->add_flag("--json", ca.json, "print the plan as JSON");
  compile_cmd->add_flag("--print-ir-after-all", ca.print_ir_after_all,
                        "print the IR after every pass (stderr)");

  RunArgs ra;
  CLI::App* run_cmd = app.add_subcommand("run", "run a graph once and print its outputs");
  ra.graph.add_to(run_cmd);
  ra.graph.add_exec_flags(run_cmd);
  add_data_flags(run_cmd, ra.data);
  run_cmd->add_option("--device", ra.device, "cuda, or cpu for the fp64 reference")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  run_cmd->add_flag("--no-fusion", ra.graph.no_fusion, "eager: one kernel per op (-O0)");

  BenchArgs ba;
  CLI::App* bench_cmd = app.add_subcommand("bench", "time eager vs compiled on the GPU");
  ba.graph.add_to(bench_cmd, /*several_batches=*/true);
  ba.graph.add_exec_flags(bench_cmd);
  add_data_flags(bench_cmd, ba.data);
  bench_cmd->add_flag("--json", ba.json, "print the result as JSON");
  bench_cmd->add_flag("--explain", ba.explain,
                      "per kernel: time, FLOPs, bytes, share of the device's calibrated peaks and "
                      "a verdict (overhead-, memory- or compute-bound); the same per forward");
  bench_cmd->add_option("--trace", ba.trace,
                        "write a Chrome/Perfetto trace of one eager and one compiled forward "
                        "(at the first batch size) to this JSON file");

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();
    return 0;
  } catch (const CLI::ParseError& e) {
    fmt::print(stderr, "mlpc: error: {}\n", e.what());
    return 2;
  }

  try {
    if (app.got_subcommand("samples")) return cmd_samples();
    if (app.got_subcommand(compile_cmd)) return cmd_compile(ca);
    if (app.got_subcommand(run_cmd)) return cmd_run(ra);
    if (app.got_subcommand(bench_cmd)) return cmd_bench(ba);
    return cmd_demo();
  } catch (const NoGpu& e) {
    fmt::print(stderr, "mlpc: error: {}\n", e.what());
    return 3;
  } catch (const UsageError& e) {
    fmt::print(stderr, "mlpc: error: {}\n", e.what());
    return 2;
  } catch (const Error& e) {
    std::string msg = e.what();
    // Text errors already say where: "file:line:col: error: ...". Only the first line counts:
    // a kernel's NVRTC log, which follows it, has "error:" lines of its own.
    std::string first = msg.substr(0, msg.find('\n'));
    fmt::print(stderr, "{}{}\n", first.find(": error: ") == std::string::npos ? "mlpc: error: " : "",
               msg);
    return 1;
  } catch (const std::exception& e) {
    fmt::print(stderr, "mlpc: error: {}\n", e.what());
    return 1;
  }
}

}  // namespace mlpc
