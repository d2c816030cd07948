"""MLP blocks as their authors write them (after the published architectures and configs; no hub
downloads, no transformers import), for the translation tests and the GPU bench. build(name,
scale) divides every width by `scale`, so CPU tests run small and the bench runs real sizes."""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Conv1D(nn.Module):
    """GPT-2's Conv1D: a Linear whose weight is stored [in, out], applied with addmm."""

    def __init__(self, nf, nx):
        super().__init__()
        self.nf = nf
        self.weight = nn.Parameter(torch.empty(nx, nf))
        self.bias = nn.Parameter(torch.zeros(nf))
        nn.init.normal_(self.weight, std=0.02)

    def forward(self, x):
        size_out = x.size()[:-1] + (self.nf,)
        x = torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight)
        x = x.view(size_out)
        return x


class NewGELUActivation(nn.Module):
    """GPT-2's GELU, the tanh approximation written out."""

    def forward(self, input):
        return 0.5 * input * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) *
                                               (input + 0.044715 * torch.pow(input, 3.0))))


class GPT2MLP(nn.Module):
    def __init__(self, n_embd=768, intermediate_size=3072, resid_pdrop=0.1):
        super().__init__()
        self.c_fc = Conv1D(intermediate_size, n_embd)
        self.c_proj = Conv1D(n_embd, intermediate_size)
        self.act = NewGELUActivation()
        self.dropout = nn.Dropout(resid_pdrop)

    def forward(self, hidden_states):
        hidden_states = self.c_fc(hidden_states)
        hidden_states = self.act(hidden_states)
        hidden_states = self.c_proj(hidden_states)
        hidden_states = self.dropout(hidden_states)
        return hidden_states


class LlamaMLP(nn.Module):
    """Llama, Qwen2 and Mistral: SwiGLU, no biases."""

    def __init__(self, hidden_size=4096, intermediate_size=11008):
        super().__init__()
        self.gate_proj = nn.Linear(hidden_size, intermediate_size, bias=False)
        self.up_proj = nn.Linear(hidden_size, intermediate_size, bias=False)
        self.down_proj = nn.Linear(intermediate_size, hidden_size, bias=False)
        self.act_fn = nn.SiLU()

    def forward(self, x):
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


class LlamaRMSNorm(nn.Module):
    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden_states.to(input_dtype)


class LlamaFFN(nn.Module):
    """A Llama decoder layer's second half: x + mlp(post_attention_layernorm(x))."""

    def __init__(self, hidden_size=4096, intermediate_size=11008, rms_norm_eps=1e-5):
        super().__init__()
        self.post_attention_layernorm = LlamaRMSNorm(hidden_size, eps=rms_norm_eps)
        self.mlp = LlamaMLP(hidden_size, intermediate_size)

    def forward(self, hidden_states):
        residual = hidden_states
        hidden_states = self.post_attention_layernorm(hidden_states)
        hidden_states = self.mlp(hidden_states)
        return residual + hidden_states


class GemmaMLP(nn.Module):
    """Gemma: GeGLU with the tanh GELU (gelu_pytorch_tanh), no biases."""

    def __init__(self, hidden_size=2048, intermediate_size=16384):
        super().__init__()
        self.gate_proj = nn.Linear(hidden_size, intermediate_size, bias=False)
        self.up_proj = nn.Linear(hidden_size, intermediate_size, bias=False)
        self.down_proj = nn.Linear(intermediate_size, hidden_size, bias=False)

    def forward(self, x):
        return self.down_proj(F.gelu(self.gate_proj(x), approximate="tanh") * self.up_proj(x))


class BertIntermediate(nn.Module):
    def __init__(self, hidden_size, intermediate_size):
        super().__init__()
        self.dense = nn.Linear(hidden_size, intermediate_size)
        self.intermediate_act_fn = nn.GELU()

    def forward(self, hidden_states):
        return self.intermediate_act_fn(self.dense(hidden_states))


class BertOutput(nn.Module):
    def __init__(self, hidden_size, intermediate_size, layer_norm_eps=1e-12, dropout=0.1):
        super().__init__()
        self.dense = nn.Linear(intermediate_size, hidden_size)
        self.LayerNorm = nn.LayerNorm(hidden_size, eps=layer_norm_eps)
        self.dropout = nn.Dropout(dropout)

    def forward(self, hidden_states, input_tensor):
        hidden_states = self.dense(hidden_states)
        hidden_states = self.dropout(hidden_states)
        return self.LayerNorm(hidden_states + input_tensor)


class BertFFN(nn.Module):
    """BertLayer's feed-forward chunk: output(intermediate(a), a)."""

    def __init__(self, hidden_size=768, intermediate_size=3072):
        super().__init__()
        self.intermediate = BertIntermediate(hidden_size, intermediate_size)
        self.output = BertOutput(hidden_size, intermediate_size)

    def forward(self, attention_output):
        return self.output(self.intermediate(attention_output), attention_output)


class ViTFFN(nn.Module):
    """ViTLayer's second half: layernorm_after, intermediate (GELU erf), output + residual."""

    def __init__(self, hidden_size=768, intermediate_size=3072, layer_norm_eps=1e-12):
        super().__init__()
        self.layernorm_after = nn.LayerNorm(hidden_size, eps=layer_norm_eps)
        self.intermediate = BertIntermediate(hidden_size, intermediate_size)
        self.dense = nn.Linear(intermediate_size, hidden_size)
        self.dropout = nn.Dropout(0.0)

    def forward(self, hidden_states):
        layer_output = self.intermediate(self.layernorm_after(hidden_states))
        return self.dropout(self.dense(layer_output)) + hidden_states


class T5DenseActDense(nn.Module):
    """T5's DenseReluDense (no biases). The author's cast to wo's dtype when it differs is left
    out: fx cannot trace its data-dependent `if`, and here the dtypes agree."""

    def __init__(self, d_model=512, d_ff=2048, dropout_rate=0.1):
        super().__init__()
        self.wi = nn.Linear(d_model, d_ff, bias=False)
        self.wo = nn.Linear(d_ff, d_model, bias=False)
        self.dropout = nn.Dropout(dropout_rate)
        self.act = nn.ReLU()

    def forward(self, hidden_states):
        hidden_states = self.wi(hidden_states)
        hidden_states = self.act(hidden_states)
        hidden_states = self.dropout(hidden_states)
        return self.wo(hidden_states)


def sequential_mlp(d=1024, hidden=4096):
    return nn.Sequential(nn.Linear(d, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                         nn.Linear(hidden, d))


class LeakyMLP(nn.Module):
    """An op mlpc lacks in the middle (leaky_relu, then a cumsum): torch.compile must partition
    around them, never fail."""

    def __init__(self, d=1024, hidden=4096):
        super().__init__()
        self.fc1 = nn.Linear(d, hidden)
        self.fc2 = nn.Linear(hidden, hidden)
        self.fc3 = nn.Linear(hidden, d)

    def forward(self, x):
        h = F.gelu(self.fc1(x), approximate="tanh")
        h = F.leaky_relu(self.fc2(h), 0.2)
        h = torch.cumsum(h, dim=-1) * 0.01 + h
        return self.fc3(h)


# name -> (constructor, published widths, published dtype); widths are divided by `scale`.
BLOCKS = {
    "gpt2_mlp": (GPT2MLP, dict(n_embd=768, intermediate_size=3072), torch.float32),
    "llama2_7b_mlp": (LlamaMLP, dict(hidden_size=4096, intermediate_size=11008), torch.bfloat16),
    "llama3_8b_ffn": (LlamaFFN, dict(hidden_size=4096, intermediate_size=14336), torch.bfloat16),
    "qwen2_0_5b_mlp": (LlamaMLP, dict(hidden_size=896, intermediate_size=4864), torch.bfloat16),
    "mistral_7b_mlp": (LlamaMLP, dict(hidden_size=4096, intermediate_size=14336), torch.bfloat16),
    "gemma_2b_mlp": (GemmaMLP, dict(hidden_size=2048, intermediate_size=16384), torch.bfloat16),
    "bert_base_ffn": (BertFFN, dict(hidden_size=768, intermediate_size=3072), torch.float32),
    "vit_base_ffn": (ViTFFN, dict(hidden_size=768, intermediate_size=3072), torch.float32),
    "t5_small_ff": (T5DenseActDense, dict(d_model=512, d_ff=2048), torch.float32),
    "sequential_mlp": (sequential_mlp, dict(d=1024, hidden=4096), torch.float32),
    "leaky_mlp": (LeakyMLP, dict(d=1024, hidden=4096), torch.float32),
}


def build(name, scale=1, dtype=None, seed=0):
    """The block `name` in eval mode, widths divided by `scale`, in `dtype` (default: the
    published one). Returns (module, model width d: the last dim of its input)."""
    ctor, widths, published = BLOCKS[name]
    kw = {k: max(8, v // scale) for k, v in widths.items()}
    torch.manual_seed(seed)
    m = ctor(**kw).eval().to(dtype or published)
    return m, next(iter(kw.values()))
