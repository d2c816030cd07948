"""What the IR can express beyond Linear chains: LayerNorm without affine weights, a scalar on
the left of a subtraction (1.0 - x), softmax over the last dim."""
import torch.nn as nn
import torch.nn.functional as F


class NormSoftmax(nn.Module):
    def __init__(self, d=768, classes=16):
        super().__init__()
        self.norm = nn.LayerNorm(d, elementwise_affine=False)
        self.fc = nn.Linear(d, classes)

    def forward(self, x):
        h = 1.0 - self.norm(x)
        return F.softmax(self.fc(h), dim=-1)
