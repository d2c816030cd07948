"""Would running mlp3 (f32, x[8192,1024], 1024->4096->4096->1024, GELU erf, TF32 off) as row
chunks on concurrent streams hide its two GELU kernels behind the SGEMMs? PyTorch's own kernels
(the same cuBLAS SGEMMs mlpc runs), one CUDA graph per variant (chunks of rows, each chunk's
whole chain on one of `streams` streams, forked and joined inside the graph), timed in three
rounds. Not part of mlpc: the answer (docs/benchmarks.md, "What limits") is that it pays a
little but runs chunks x 5 kernels per forward, against issue 3's five launches for this case.

Usage (GPU machine): python3 bench/row_chunks_probe.py"""
import torch, torch.nn.functional as F, statistics, sys
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
dev = "cuda"
M, D, H = 8192, 1024, 4096
g = torch.Generator(device=dev).manual_seed(0)
x = torch.randn(M, D, device=dev, generator=g)
W1 = torch.randn(H, D, device=dev, generator=g) / 32; b1 = torch.randn(H, device=dev, generator=g)
W2 = torch.randn(H, H, device=dev, generator=g) / 64; b2 = torch.randn(H, device=dev, generator=g)
W3 = torch.randn(D, H, device=dev, generator=g) / 64; b3 = torch.randn(D, device=dev, generator=g)

def chain(xs, gelu=True):
    h = F.linear(xs, W1, b1); h = F.gelu(h) if gelu else h
    h = F.linear(h, W2, b2); h = F.gelu(h) if gelu else h
    return F.linear(h, W3, b3)

def variant(chunks, streams, gelu=True):
    out = torch.empty(M, D, device=dev)
    ss = [torch.cuda.Stream() for _ in range(streams)]
    def fwd():
        cur = torch.cuda.current_stream()
        rows = M // chunks
        for s in ss: s.wait_stream(cur)
        for i in range(chunks):
            s = ss[i % streams]
            with torch.cuda.stream(s):
                out[i*rows:(i+1)*rows] = chain(x[i*rows:(i+1)*rows], gelu)
        for s in ss: cur.wait_stream(s)
    s0 = torch.cuda.Stream()
    s0.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s0):
        for _ in range(2): fwd()
    torch.cuda.current_stream().wait_stream(s0)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fwd()
    return graph, out

def time_graph(graph, reps=15, inner=10):
    ts = []
    for _ in range(reps):
        a = torch.cuda.Event(enable_timing=True); b = torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(inner): graph.replay()
        b.record(); b.synchronize()
        ts.append(a.elapsed_time(b) * 1000 / inner)
    return statistics.median(ts)

ref = chain(x)
results = {}
configs = [(1, 1, True), (1, 1, False), (2, 1, True), (2, 2, True), (4, 2, True), (4, 4, True), (8, 2, True)]
graphs = {}
for c in configs:
    graphs[c] = variant(*c)
for rnd in range(3):
    for c in configs:
        gph, out = graphs[c]
        t = time_graph(gph)
        results.setdefault(c, []).append(t)
for c in configs:
    gph, out = graphs[c]
    gph.replay(); torch.cuda.synchronize()
    err = ((out - ref).abs().max() / ref.abs().max()).item() if c[2] else float("nan")
    print(f"chunks={c[0]} streams={c[1]} gelu={c[2]}: " + " ".join(f"{t:.1f}" for t in results[c])
          + f" us  (err {err:.1e})")
