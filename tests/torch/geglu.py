"""The article's GeGLU MLP: down(gelu_tanh(gate(x)) * up(x)), no biases, 768 -> 3072 -> 768."""
import torch.nn as nn
import torch.nn.functional as F


class GeGLU(nn.Module):
    def __init__(self, d_model=768, hidden=3072):
        super().__init__()
        self.gate = nn.Linear(d_model, hidden, bias=False)
        self.up = nn.Linear(d_model, hidden, bias=False)
        self.down = nn.Linear(hidden, d_model, bias=False)

    def forward(self, x):
        return self.down(F.gelu(self.gate(x), approximate="tanh") * self.up(x))
