"""Pulumi dynamic resources for Together AI post-training (RL) infrastructure."""

__version__ = "0.1.0"
