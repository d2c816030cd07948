"""GPT-2's MLP block (d 768, hidden 3072): c_proj(gelu_tanh(c_fc(x))), both with bias, then
dropout (identity at inference). Hugging Face stores c_fc/c_proj as Conv1D ([in, out] weights);
this is the same block with nn.Linear, the layout mlpc's matmul takes."""
import torch.nn as nn


class GPT2MLP(nn.Module):
    def __init__(self, n_embd=768, hidden=3072):
        super().__init__()
        self.c_fc = nn.Linear(n_embd, hidden)
        self.act = nn.GELU(approximate="tanh")
        self.c_proj = nn.Linear(hidden, n_embd)
        self.dropout = nn.Dropout(0.1)

    def forward(self, x):
        return self.dropout(self.c_proj(self.act(self.c_fc(x))))
