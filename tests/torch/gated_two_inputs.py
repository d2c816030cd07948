"""A block with two inputs: down(silu(gate(x)) * up(c)) + x, a conditioning input c beside x."""
import torch.nn as nn
import torch.nn.functional as F


class GatedTwoInputs(nn.Module):
    def __init__(self, d_model=64, d_cond=32, hidden=128):
        super().__init__()
        self.gate = nn.Linear(d_model, hidden)
        self.up = nn.Linear(d_cond, hidden)
        self.down = nn.Linear(hidden, d_model)

    def forward(self, x, c):
        return self.down(F.silu(self.gate(x)) * self.up(c)) + x
