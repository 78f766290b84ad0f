"""The Pulumi dynamic resources: :class:`ModelResource` and :class:`TrainingSession` with their Args."""

from .model_resource import ModelResource, ModelResourceArgs
from .training_session import TrainingSession, TrainingSessionArgs

__all__ = ["ModelResource", "ModelResourceArgs", "TrainingSession", "TrainingSessionArgs"]
