#!/usr/bin/env python3
"""PyTorch's side of the comparison: eager, torch.compile (default) and torch.compile
(reduce-overhead, CUDA graphs) on the cases of shared/anchors.md, timed the way `mlpc bench`
times (host clock over a stream of back-to-back forwards, launch overhead included; median of
repetitions). Prints one JSON object per case. TF32 off, as in anchors.md. Each mode's SM clock
and power while timed are sampled through NVML (bench/nvml_monitor.py), as mlpc bench does.

With --save DIR, each case also leaves DIR/CASE/{weights.safetensors, x.npy, torch_out.npy}: the
module's weights (state_dict names, as mlpc's samples name their params), its input and PyTorch's
eager output, so that mlpc runs the same weights and input and the outputs can be compared.

Usage: python3 bench/torch_baseline.py [--cases geglu,linear,...] [--modes eager,default,...]
                                       [--save DIR]
"""
import argparse, json, os, statistics, sys, time

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import mlpc_files  # noqa: E402  (the repo's safetensors / .npy writer, torch only)
import nvml_monitor  # noqa: E402  (bench/: the SM clock and power while timed)

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False


class Linear(nn.Module):  # the article's nn.Linear
    def __init__(self):
        super().__init__()
        self.y = nn.Linear(32, 64)

    def forward(self, x):
        return self.y(x)


class GeGLU(nn.Module):  # the article's GeGLU MLP, no biases, tanh GELU
    def __init__(self, d=768, h=3072):
        super().__init__()
        self.gate = nn.Linear(d, h, bias=False)
        self.up = nn.Linear(d, h, bias=False)
        self.down = nn.Linear(h, d, bias=False)

    def forward(self, x):
        return self.down(F.gelu(self.gate(x), approximate="tanh") * self.up(x))


class MLP3(nn.Module):  # 3 Linear with bias, exact GELU between
    def __init__(self, d, h, act):
        super().__init__()
        self.fc1, self.fc2, self.fc3 = nn.Linear(d, h), nn.Linear(h, h), nn.Linear(h, d)
        self.act = act

    def forward(self, x):
        return self.fc3(self.act(self.fc2(self.act(self.fc1(x)))))


class FFN(nn.Module):  # anchors.md's FFN block: RMSNorm -> GeGLU -> residual add, no biases
    def __init__(self, d=768, h=3072):
        super().__init__()
        self.norm = nn.RMSNorm(d, eps=1e-5)
        self.gate = nn.Linear(d, h, bias=False)
        self.up = nn.Linear(d, h, bias=False)
        self.down = nn.Linear(h, d, bias=False)

    def forward(self, x):
        n = self.norm(x)
        return x + self.down(F.gelu(self.gate(n), approximate="tanh") * self.up(n))


def narrow_mlp(d_in, width, hidden, d_out, bias, act):
    """A narrow MLP as nn.Sequential: `hidden` Linear layers of `width`, each followed by act(),
    then Linear(width, d_out); state_dict names 0.weight, 2.weight, ... as in samples/tcnn_*.mlp."""
    layers = []
    for i in range(hidden):
        layers += [nn.Linear(d_in if i == 0 else width, width, bias=bias), act()]
    return nn.Sequential(*layers, nn.Linear(width, d_out, bias=bias))


def tcnn_mlp(d_in, width, hidden):  # tiny-cuda-nn's FullyFusedMLP: no biases, ReLU, 16 out
    return narrow_mlp(d_in, width, hidden, 16, False, nn.ReLU)


CASES = {
    # name: (module factory, batch, in_features, dtype, mlpc sample, mlpc args)
    "linear": (Linear, 1024, 32, torch.bfloat16),
    "geglu": (GeGLU, 8192, 768, torch.bfloat16),
    "geglu_m16": (GeGLU, 16, 768, torch.bfloat16),
    "mlp3": (lambda: MLP3(1024, 4096, F.gelu), 8192, 1024, torch.float32),
    "mlp3_small_relu": (lambda: MLP3(256, 256, F.relu), 64, 256, torch.float32),
    "llama_geglu": (lambda: GeGLU(4096, 14336), 4096, 4096, torch.bfloat16),
    "ffn": (FFN, 8192, 768, torch.bfloat16),
    "tcnn_w64": (lambda: tcnn_mlp(64, 64, 5), 262144, 64, torch.float16),
    "tcnn_w128": (lambda: tcnn_mlp(64, 128, 5), 262144, 64, torch.float16),
    "tcnn_w32": (lambda: tcnn_mlp(32, 32, 2), 262144, 32, torch.float16),
    "narrow_gelu": (lambda: narrow_mlp(64, 64, 3, 16, True, lambda: nn.GELU(approximate="tanh")),
                    262144, 64, torch.float16),
}


def host_time_us(fn, x, reps=15, min_rep_s=0.02):
    with torch.no_grad():
        for _ in range(3):
            fn(x)
        torch.cuda.synchronize()
        iters = 1
        while True:  # calibrate: one repetition lasts at least min_rep_s
            t0 = time.perf_counter()
            for _ in range(iters):
                fn(x)
            torch.cuda.synchronize()
            dt = time.perf_counter() - t0
            if dt >= min_rep_s or iters >= 100000:
                break
            iters *= 4
        times = []
        for _ in range(reps):
            t0 = time.perf_counter()
            for _ in range(iters):
                fn(x)
            torch.cuda.synchronize()
            times.append((time.perf_counter() - t0) / iters * 1e6)
    return statistics.median(times), min(times), iters


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--modes", default="eager,default,reduce-overhead")
    ap.add_argument("--save", default=None, help="write weights, input and output per case here")
    args = ap.parse_args()
    torch.manual_seed(0)
    for name in args.cases.split(","):
        make, batch, d, dtype = CASES[name]
        model = make().to("cuda", dtype).eval()
        x = torch.randn(batch, d, device="cuda", dtype=dtype)
        out = {"case": name, "batch": batch, "dtype": str(dtype).replace("torch.", ""),
               "torch": torch.__version__, "device": torch.cuda.get_device_name()}
        if args.save:
            case_dir = os.path.join(args.save, name)
            os.makedirs(case_dir, exist_ok=True)
            mlpc_files.write_safetensors(os.path.join(case_dir, "weights.safetensors"),
                                         {k: v for k, v in model.state_dict().items()})
            mlpc_files.write_npy(os.path.join(case_dir, "x.npy"), x)
            with torch.no_grad():
                mlpc_files.write_npy(os.path.join(case_dir, "torch_out.npy"), model(x).float())
            out["saved"] = case_dir
        for mode in args.modes.split(","):
            torch._dynamo.reset()
            fn = model if mode == "eager" else torch.compile(model, mode=mode)
            t0 = time.perf_counter()
            with torch.no_grad():
                fn(x)
            torch.cuda.synchronize()
            first_ms = (time.perf_counter() - t0) * 1e3
            # every 10 ms: the sampler takes the GIL from the launching thread at each sample
            with nvml_monitor.Monitor(period_s=0.01) as gpu:
                med, mn, iters = host_time_us(fn, x)
            out[mode] = {"median_us": med, "min_us": mn, "first_call_ms": first_ms,
                         "gpu": gpu.summary}
        out["best_us"] = min(out[m]["median_us"] for m in args.modes.split(","))
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    sys.exit(main())
