# PyTorch eager's llama_geglu forward (x[4096, 4096] bf16, hidden 14336), twice: for bench/llama_ncu.sh,
# which profiles the kernels of both with Nsight Compute.
import torch
torch.manual_seed(0)
d, h = 4096, 14336
x = torch.randn(4096, d, dtype=torch.bfloat16, device="cuda")
wg = torch.randn(h, d, dtype=torch.bfloat16, device="cuda") / d ** 0.5
wu = torch.randn(h, d, dtype=torch.bfloat16, device="cuda") / d ** 0.5
wd = torch.randn(d, h, dtype=torch.bfloat16, device="cuda") / h ** 0.5
for _ in range(2):
    y = (torch.nn.functional.gelu(x @ wg.T, approximate="tanh") * (x @ wu.T)) @ wd.T
torch.cuda.synchronize()
print("ok", float(y.float().abs().mean()))
