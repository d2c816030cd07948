"""A module the exporter must refuse, naming each op mlpc lacks and where it is."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Unsupported(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x):
        h = F.leaky_relu(self.fc(x), 0.2)  # no leaky_relu in mlpc
        return torch.cumsum(h, dim=-1) + h  # nor cumsum
