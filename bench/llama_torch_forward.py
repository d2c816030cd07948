# PyTorch's llama_geglu forward (x[4096, 4096] bf16, hidden 14336) for bench/llama_ncu.sh, which
# profiles its kernels with Nsight Compute (`ncu --profile-from-start off`): warm-up forwards
# (torch.compile's compile included) outside the profiled range, then one forward inside it.
# Usage: python3 bench/llama_torch_forward.py eager|compile
import sys

import torch

mode = sys.argv[1] if len(sys.argv) > 1 else "eager"
if mode not in ("eager", "compile"):
    sys.exit(f"llama_torch_forward.py: mode {mode!r} is not eager or compile")
torch.manual_seed(0)
d, h = 4096, 14336
x = torch.randn(4096, d, dtype=torch.bfloat16, device="cuda")
wg = torch.randn(h, d, dtype=torch.bfloat16, device="cuda") / d ** 0.5
wu = torch.randn(h, d, dtype=torch.bfloat16, device="cuda") / d ** 0.5
wd = torch.randn(d, h, dtype=torch.bfloat16, device="cuda") / h ** 0.5


def forward(x):
    return (torch.nn.functional.gelu(x @ wg.T, approximate="tanh") * (x @ wu.T)) @ wd.T


if mode == "compile":  # torch.compile's default mode, the harness's best PyTorch mode here
    forward = torch.compile(forward)
for _ in range(3):
    y = forward(x)
torch.cuda.synchronize()
torch.cuda.profiler.start()
y = forward(x)
torch.cuda.synchronize()
torch.cuda.profiler.stop()
print(mode, "ok", float(y.float().abs().mean()))
