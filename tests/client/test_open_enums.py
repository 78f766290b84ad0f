"""Statuses, GPU types and Muon strategies the API adds later parse instead of breaking get/list/refresh."""

from __future__ import annotations

import pickle

import pytest
from pydantic import BaseModel, ValidationError

from pulumi_together_rl.client import (
    RESOURCE_ACTIVE,
    RESOURCE_GONE,
    RESOURCE_PROVISIONING,
    SESSION_GONE,
    SESSION_HOLDS_SLOT,
    ComputeConfigParams,
    GpuType,
    ModelResource,
    ModelResourceCreateRequest,
    ModelResourceList,
    ModelResourceStatus,
    MuonScalingStrategy,
    SupportedModelList,
    TrainingSession,
    TrainingSessionStatus,
)

from .scripted import Script, make_client, page, reply, resource_json, session_json

NEW_RESOURCE_STATUS = "MODEL_RESOURCES_STATUS_DRAINING"
NEW_SESSION_STATUS = "TRAINING_SESSION_STATUS_PAUSED"


def test_unknown_resource_status_parses_with_its_raw_value_and_short_name():
    resource = ModelResource.model_validate(resource_json(status=NEW_RESOURCE_STATUS))
    status = resource.status
    assert isinstance(status, ModelResourceStatus)
    assert status.value == NEW_RESOURCE_STATUS
    assert status == NEW_RESOURCE_STATUS
    assert status.short == "DRAINING"
    assert status.known is False
    assert ModelResourceStatus.READY.known is True
    # One object per value, so `is` comparisons and sets behave.
    assert ModelResourceStatus(NEW_RESOURCE_STATUS) is status
    assert pickle.loads(pickle.dumps(status)) is status


def test_unknown_status_round_trips_through_model_dump_and_to_wire():
    body = resource_json(status=NEW_RESOURCE_STATUS)
    resource = ModelResource.model_validate(body)
    assert resource.model_dump(mode="json")["status"] == NEW_RESOURCE_STATUS
    assert resource.to_wire()["status"] == NEW_RESOURCE_STATUS
    assert ModelResource.model_validate_json(resource.model_dump_json()).status is resource.status
    session = TrainingSession.model_validate(session_json(status=NEW_SESSION_STATUS))
    assert session.status.short == "PAUSED"
    assert session.to_wire()["status"] == NEW_SESSION_STATUS


def test_unknown_status_is_in_no_status_group_so_it_reads_as_active_but_not_ready():
    resource_status = ModelResourceStatus(NEW_RESOURCE_STATUS)
    session_status = TrainingSessionStatus(NEW_SESSION_STATUS)
    for group in (RESOURCE_GONE, RESOURCE_ACTIVE, RESOURCE_PROVISIONING):
        assert resource_status not in group
    for group in (SESSION_GONE, SESSION_HOLDS_SLOT):
        assert session_status not in group
    assert resource_status != ModelResourceStatus.READY
    # The enums still list only the known members (the groups are built from them).
    assert NEW_RESOURCE_STATUS not in {s.value for s in ModelResourceStatus}
    assert len(ModelResourceStatus) == 6


def test_unknown_gpu_type_and_muon_strategy_parse_and_round_trip():
    resource = ModelResource.model_validate(
        resource_json(
            compute_config={"num_generator_replicas": 2, "gpu_type": "H200-141GB"},
            optimizer_config={"muon": {"scaling_strategy": "MUON_SCALING_STRATEGY_SOMETHING_NEW"}},
        )
    )
    assert resource.compute_config.gpu_type == "H200-141GB"
    assert isinstance(resource.compute_config.gpu_type, GpuType)
    assert isinstance(resource.optimizer_config.muon.scaling_strategy, MuonScalingStrategy)
    dumped = resource.model_dump(mode="json")
    assert dumped["compute_config"]["gpu_type"] == "H200-141GB"
    assert dumped["optimizer_config"]["muon"]["scaling_strategy"] == "MUON_SCALING_STRATEGY_SOMETHING_NEW"
    models = SupportedModelList.model_validate(
        {
            "data": [
                {"base_model": "m", "default_gpu_type": "H200-141GB", "compute_configs": [{"gpu_type": "X"}]}
            ]
        }
    )
    assert models.data[0].default_gpu_type.value == "H200-141GB"
    request = ModelResourceCreateRequest(
        base_model="m", compute_config=ComputeConfigParams(gpu_type="H200-141GB")
    )
    assert request.to_wire() == {"base_model": "m", "compute_config": {"gpu_type": "H200-141GB"}}
    assert GpuType.lenient("H200-141GB") is resource.compute_config.gpu_type
    assert pickle.loads(pickle.dumps(resource.compute_config.gpu_type)) is resource.compute_config.gpu_type


def test_bare_gpu_type_and_muon_classes_stay_strict_for_user_input_validation():
    """The resource layer validates user inputs against the classes themselves, to catch typos at preview."""
    with pytest.raises(ValueError):
        GpuType("A100")
    with pytest.raises(ValueError):
        MuonScalingStrategy("MATCH_ADAM")

    class UserInput(BaseModel):
        gpu_type: GpuType

    with pytest.raises(ValidationError):
        UserInput(gpu_type="A100")
    assert UserInput(gpu_type="B200-SXM").gpu_type is GpuType.B200_SXM


@pytest.mark.parametrize("bad", [None, 3, ""])
def test_non_string_or_empty_status_is_still_rejected(bad):
    with pytest.raises(ValueError):
        ModelResourceStatus(bad)


def test_get_list_and_status_filters_work_with_an_unknown_status():
    script = Script(
        reply(200, resource_json("mr_1", status=NEW_RESOURCE_STATUS)),
        page([resource_json("mr_1", status=NEW_RESOURCE_STATUS), resource_json("mr_2")]),
        page([]),
    )
    client = make_client(script)
    assert client.get_model_resource("mr_1").status.short == "DRAINING"
    listed = client.list_model_resources()
    assert isinstance(listed, ModelResourceList)
    assert [r.status.short for r in listed.data] == ["DRAINING", "PENDING"]
    client.list_model_resources(status=[ModelResourceStatus(NEW_RESOURCE_STATUS), "READY"])
    assert script.requests[2].url.params["status"] == f"{NEW_RESOURCE_STATUS},MODEL_RESOURCES_STATUS_READY"
