#!/usr/bin/env python3
"""The torch.compile backend on the GPU, for every block of tests/python/models.py at published
sizes: mlpc's output against eager, launches per forward, time per forward for eager,
torch.compile (default) and torch.compile(backend="mlpc"), recompiles and NVRTC builds over a run
of batch sizes, and the Python call's overhead over the C++ run. Prints a Markdown table and
writes JSON:

  python3 bench/torch_backend_bench.py --json out/torch_backend.json [--blocks gpt2_mlp,...]

Timing: per forward, host-timed over a stream of calls with one synchronize at the end. Eager,
torch.compile and mlpc take turns, one stream each per round (7 rounds unless --reps says), so
that the clock the power cap leaves and the card's temperature fall on all three alike; each time
is the median of its rounds, and the ratio's spread is that of the rounds' own ratios.

Correctness, by tools/compare_torch.py's rule and tolerance (mlpc's own contract, from the
dtype, the block's longest op chain and longest GEMM reduction): the block run in float64 (same
weights and input) is the exact answer; mlpc must be within the tolerance of it, and within
twice it of eager PyTorch in the same dtype (each rounds its own intermediates: eager stores
gate and up in bf16 before the GELU, mlpc's gated kernel combines them from fp32 accumulators).
Eager's own distance from float64 is printed beside them."""

import argparse
import copy
import json
import os
import statistics
import sys
import time

import torch

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(here), "tests", "python"))
import models  # noqa: E402

try:
    import mlpc  # noqa: E402  (installed: pip install . or the wheel)
except ImportError:  # a checkout: its python/ (the extension must be built beside it)
    sys.path.insert(0, os.path.join(os.path.dirname(here), "python"))
    import mlpc  # noqa: E402
from mlpc import backend as mlpc_backend  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(here), "tools"))
from compare_torch import compare, tolerance  # noqa: E402


def sync():
    torch.cuda.synchronize()


def stream_length(f, x, min_s=0.05):
    """Calls in a stream that lasts at least `min_s` (after one warm-up call)."""
    f(x)
    sync()
    n, t = 1, 0.0
    while t < min_s and n < 100000:
        t0 = time.perf_counter()
        for _ in range(n):
            f(x)
        sync()
        t = time.perf_counter() - t0
        n *= 2 if t < min_s else 1
    return n


def stream_us(f, x, n):
    """µs per call over one stream of `n` calls, one synchronize at its end."""
    t0 = time.perf_counter()
    for _ in range(n):
        f(x)
    sync()
    return (time.perf_counter() - t0) / n * 1e6


def time_us(f, x, reps=5):
    """Best of `reps` streams of calls: µs per call (the call-overhead measurements)."""
    n = stream_length(f, x)
    return min(stream_us(f, x, n) for _ in range(reps))


def time_in_turns(fns, x, rounds=7):
    """µs per call of each of `fns`, timed in turns (one stream of each per round): per function
    the list of its rounds' times."""
    lengths = [stream_length(f, x) for f in fns]
    times = [[] for _ in fns]
    for _ in range(rounds):
        for f, n, t in zip(fns, lengths, times):
            t.append(stream_us(f, x, n))
    return times


def torch_launches(f, x):
    """CUDA kernels one call launches, from the profiler (None where it is unavailable)."""
    try:
        from torch.profiler import ProfilerActivity, profile
        f(x)
        sync()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            f(x)
            sync()
        return sum(1 for e in prof.events() if e.device_type.name == "CUDA")
    except Exception:
        return None


def error(got, ref, tol, scale=1.0):
    """(max |got - ref|, that as a fraction of `scale` times the tolerance `tol` (rtol, floor))."""
    frac, abs_err = compare(got.double(), ref.double(), tol[0] * scale, tol[1] * scale)
    return abs_err, frac


def mlpc_compiled(model, options):
    """torch.compile with the mlpc backend (by name where the entry point is installed) and
    mlpc's `options` (mlpc.compile's keywords, e.g. fp32_gemms="auto")."""
    try:
        from torch._dynamo import lookup_backend
        lookup_backend("mlpc")
        return torch.compile(model, backend="mlpc", options=options or None)
    except Exception:
        return torch.compile(model, backend=mlpc_backend.backend, options=options or None)


def bench_block(name, rows_list, dtype, reps, options):
    m, d = models.build(name, dtype=dtype)
    m = m.cuda()
    dt = next(m.parameters()).dtype
    out = {"block": name, "dtype": str(dt).replace("torch.", ""), "d": d, "rows": {}}
    torch._dynamo.reset()
    mlpc_backend.reset()
    default = torch.compile(copy.deepcopy(m))  # its own module: Dynamo's caches stay apart
    m64 = copy.deepcopy(m).double()  # the exact answer, from the same rounded weights
    ours = mlpc_compiled(m, options)
    tol = tolerance(m, dt, tf32x3=options.get("fp32_gemms") in ("auto", "tf32x3"))[:2]
    for rows in rows_list:
        x = torch.randn(rows, d, device="cuda", dtype=dt)
        ref = m(x)
        y = ours(x)
        report = mlpc_backend.last_report()
        ref64 = m64(x.double())
        abs_err, frac = error(y, ref64, tol)
        vs_eager, frac_eager = error(y, ref, tol, scale=2.0)
        eager_err, eager_frac = error(ref, ref64, tol)
        r = {
            "max_abs_err": abs_err, "err_of_tolerance": frac,
            "max_abs_err_vs_eager": vs_eager, "err_vs_eager_of_twice_tolerance": frac_eager,
            "eager_err_of_tolerance": eager_frac,
            "within_tolerance": frac <= 1.0 and frac_eager <= 1.0,
            "mlpc_parts": report.parts if report else 0,
            "fallbacks": [row[0] for row in report.fallbacks()] if report else [],
            "launches_mlpc": sum(cm.launches(rows) for cm in report.modules) if report else None,
            "launches_eager": torch_launches(m, x),
            "launches_compile": torch_launches(default, x),
        }
        eager_t, compile_t, mlpc_t = time_in_turns([m, default, ours], x, reps)
        per_round = [b / a for a, b in zip(compile_t, mlpc_t)]
        r.update({
            "eager_us": statistics.median(eager_t),
            "compile_us": statistics.median(compile_t),
            "mlpc_us": statistics.median(mlpc_t),
            "rounds_us": {"eager": eager_t, "compile": compile_t, "mlpc": mlpc_t},
            "mlpc_over_compile_rounds": [min(per_round), max(per_round)],
        })
        r["eager_over_mlpc"] = r["eager_us"] / r["mlpc_us"]
        r["compile_over_mlpc"] = r["compile_us"] / r["mlpc_us"]
        out["rows"][rows] = r
        if rows == 16 and report and len(report.modules) == 1:
            out["overhead_b16"] = overhead(report.modules[0], ours, x, reps)
    return out


def overhead(cm, compiled_fn, x, reps):
    """µs per call at batch 16: the C++ run alone (run_ptrs), the Python CompiledModule call, and
    the torch.compile'd function (Dynamo's guards on top)."""
    cm = cm.with_calling(None, False)  # called with x alone, not Dynamo's argument list
    y = cm(x)
    stream = torch.cuda.current_stream().cuda_stream
    ptrs_in, ptrs_out, rows = [x.data_ptr()], [y.data_ptr()], x.shape[0]
    run = cm._module.run_ptrs
    cpp = time_us(lambda _: run(ptrs_in, ptrs_out, rows, stream), x, reps)
    py = time_us(cm, x, reps)
    dyn = time_us(compiled_fn, x, reps)
    return {"cpp_run_us": cpp, "python_call_us": py, "torch_compile_call_us": dyn,
            "python_over_cpp_us": py - cpp}


def dynamic_batches(name, dtype, options, batches=(1, 16, 1000, 8192), oblivious=False):
    """Batches in a row through one torch.compile(backend="mlpc") with mark_dynamic: Dynamo
    graphs handed to the backend after the first, mlpc compiles, NVRTC builds after them."""
    m, d = models.build(name, dtype=dtype)
    m = m.cuda()
    dt = next(m.parameters()).dtype
    torch._dynamo.reset()
    mlpc_backend.reset()
    if oblivious:  # sizes 0 and 1 not special: batch 1 does not pin the batch dim
        import torch.fx.experimental._config as fx_config
        if not hasattr(fx_config, "backed_size_oblivious"):
            return {"block": name, "errors": ["no backed_size_oblivious in this torch"]}
        fx_config.backed_size_oblivious = True
    f = mlpc_compiled(m, options)
    errors = []
    for b in batches:
        x = torch.randn(b, d, device="cuda", dtype=dt)
        try:
            torch._dynamo.mark_dynamic(x, 0)
            f(x)
        except Exception as e:
            errors.append(f"batch {b}: {type(e).__name__}: {str(e).splitlines()[0]}")
    sync()
    if oblivious:
        fx_config.backed_size_oblivious = False
    modules = [cm for cm, _ in mlpc_backend._cache.values()]
    return {"block": name, "batches": list(batches), "size_oblivious": oblivious,
            "backend_graphs": mlpc_backend.counters["graphs"],
            "recompiles": mlpc_backend.counters["graphs"] - 1,
            "mlpc_compiles": mlpc_backend.counters["mlpc_compiles"],
            "cache_hits": mlpc_backend.counters["cache_hits"],
            "nvrtc_builds_after_compile": sum(cm.nvrtc_builds_since_compile() for cm in modules),
            "errors": errors}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--json", help="write the results here")
    p.add_argument("--blocks", default=",".join(models.BLOCKS))
    p.add_argument("--rows", default="1,16,4096,8192")
    p.add_argument("--dtype", choices=["bf16", "f16", "f32", "published"], default="published",
                   help="the blocks' dtype (default: each block's published one)")
    p.add_argument("--reps", type=int, default=7, help="rounds of turns per row count")
    p.add_argument("--options", default="",
                   help="torch.compile's options for mlpc, KEY=VALUE,... (fp32_gemms=auto: f32 "
                        "GEMMs as 3xTF32 in K-chunks where that times faster)")
    p.add_argument("--no-dynamic", action="store_true", help="skip the batch-sizes-in-a-row runs")
    args = p.parse_args()
    options = {k: int(v) if v.isdigit() else v
               for k, v in (kv.split("=", 1) for kv in args.options.split(",") if kv)}
    if not torch.cuda.is_available():
        print("torch_backend_bench: needs a CUDA GPU", file=sys.stderr)
        return 1
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dtype = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}.get(args.dtype)
    rows_list = [int(r) for r in args.rows.split(",")]
    results = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
               "options": options, "blocks": [], "dynamic": []}
    print("| block | dtype | rows | launches mlpc / eager / compile | eager µs | compile µs | "
          "mlpc µs | eager/mlpc | compile/mlpc | mlpc/compile, rounds | max abs err vs fp64 (of tol; vs eager, of 2 tol; "
          "eager's of tol) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    with torch.no_grad():
        for name in args.blocks.split(","):
            try:
                r = bench_block(name, rows_list, dtype, args.reps, options)
            except Exception as e:
                print(f"| {name} | error: {type(e).__name__}: {str(e).splitlines()[0]} |")
                results["blocks"].append({"block": name, "error": f"{type(e).__name__}: {e}"})
                continue
            results["blocks"].append(r)
            for rows, v in r["rows"].items():
                lo, hi = v["mlpc_over_compile_rounds"]
                print(f"| {name} | {r['dtype']} | {rows} | {v['launches_mlpc']} / "
                      f"{v['launches_eager']} / {v['launches_compile']} | {v['eager_us']:.1f} | "
                      f"{v['compile_us']:.1f} | {v['mlpc_us']:.1f} | {v['eager_over_mlpc']:.2f} | "
                      f"{v['compile_over_mlpc']:.2f} | {lo:.3f}–{hi:.3f} | {v['max_abs_err']:.2e} "
                      f"({v['err_of_tolerance']:.2f}; {v['err_vs_eager_of_twice_tolerance']:.2f}; "
                      f"{v['eager_err_of_tolerance']:.2f}){'' if v['within_tolerance'] else ' FAIL'} |")
            sys.stdout.flush()
        print("\n| block | sizes 0/1 | recompiles | mlpc compiles | NVRTC builds after compile | "
              "errors |")
        print("|---|---|---|---|---|---|")
        for name in [] if args.no_dynamic else args.blocks.split(","):
            for oblivious in (False, True):
                try:
                    dyn = dynamic_batches(name, dtype, options, oblivious=oblivious)
                except Exception as e:
                    dyn = {"block": name, "errors": [f"{type(e).__name__}: {e}"]}
                results["dynamic"].append(dyn)
                print(f"| {name} | {'oblivious' if oblivious else 'specialized'} | "
                      f"{dyn.get('recompiles')} | {dyn.get('mlpc_compiles')} | "
                      f"{dyn.get('nvrtc_builds_after_compile')} | {'; '.join(dyn['errors'])} |")
    print("\n| block | C++ run µs | Python call µs | Python over C++ µs | torch.compile call µs |")
    print("|---|---|---|---|---|")
    for r in results["blocks"]:
        o = r.get("overhead_b16")
        if o:
            print(f"| {r['block']} | {o['cpp_run_us']:.2f} | {o['python_call_us']:.2f} | "
                  f"{o['python_over_cpp_us']:.2f} | {o['torch_compile_call_us']:.2f} |")
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1, default=str)
        print(f"\nwrote {args.json}")
    bad = [r["block"] for r in results["blocks"] if "error" in r or
           not all(v["within_tolerance"] for v in r["rows"].values())]
    bad += [d["block"] for d in results["dynamic"] if d.get("nvrtc_builds_after_compile")]
    if bad:
        print(f"torch_backend_bench: FAIL: {', '.join(sorted(set(bad)))}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
