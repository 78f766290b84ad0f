"""The plugin's Pulumi package schema, read from the dynamic face's own tables: one source of truth.

A kind's inputs are the attributes of its Args class, its outputs the attributes of its resource class, and each
one's description is the docstring under it (read with :mod:`ast` from the module's source, which is the only
place Python keeps an attribute's docstring). The object types are the ``TypedDict`` classes those annotations
name (``ComputeConfigArgs`` becomes ``together-rl:index:ComputeConfig``). Which inputs replace comes from the
kind's :class:`~..resources.kind.Kind` (``replace_on_changes``), the required input from ``Kind.required``.
Names are the core's snake_case, shown in Pulumi's camelCase (:func:`camel`); :mod:`.properties` converts.

What the dynamic face has and the plugin does not: ``model_resource=`` (a Resource object: resource references
reach a provider served by the SDK's experimental server without their id, so sessions name the resource by
``modelResourcesId``) and ``model_resource_spec`` (what a session checked against that object's inputs).
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import importlib
import inspect
import json
import re
from typing import Any

from .. import __version__
from ..resources.face import _load  # the one loader of `module:attribute` names
from ..resources.keys import camel

PACKAGE = "together-rl"
"""The package name, the first part of every token. Not ``together``: that is the name an official Together
provider would take (and the dynamic face's config namespace). With a hyphen, the names generated from it stay
clear of this Python package: ``pulumi_together_rl`` is set aside explicitly (:data:`PYTHON_PACKAGE`)."""

PYTHON_PACKAGE = "pulumi_together_rl_sdk"
"""The generated Python SDK's package (the default, ``pulumi_together_rl``, is the dynamic face's)."""

NODE_PACKAGE = "@pulumi-together-rl/sdk"
"""The generated TypeScript SDK's package (the default, ``@pulumi/together-rl``, is Pulumi's own scope)."""

GO_PACKAGE = "togetherrl"
"""The generated Go SDK's package, in the module ``github.com/<repository>/sdk/go`` (:func:`go_module`)."""

JAVA_BASE_PACKAGE = "io.github.pulumitogetherrl"
"""The generated Java SDK's package prefix (its package is ``<this>.togetherrl``) and Maven groupId. Not the
default ``com.pulumi``, Pulumi's own; a Java name takes no hyphen, so not the GitHub owner as it is spelled."""

JAVA_PULUMI_VERSION = "1.36.1"
"""``com.pulumi:pulumi``, the Java SDK the generated one depends on: a version Maven Central serves (the
release tier compiles sdk/java against it)."""

CSHARP_ROOT_NAMESPACE = "PulumiTogetherRl"
"""The generated .NET SDK's root namespace and NuGet package prefix (``PulumiTogetherRl.TogetherRl``). Not the
default ``Pulumi``, which would give ``Pulumi.TogetherRl``: NuGet's ``Pulumi.`` prefix is Pulumi's own."""

DISTRIBUTION = "pulumi-together-rl"
"""This package's distribution: its metadata names the project's repository (pyproject.toml's [project.urls])."""

ANY = {"$ref": "pulumi.json#/Any"}

_DYNAMIC_ONLY = frozenset({"model_resource", "model_resource_spec"})
"""Attributes of the dynamic face that the plugin has no use for (see the module docstring)."""


@dataclasses.dataclass(frozen=True)
class Kind:
    """One resource kind as the plugin serves it."""

    name: str
    """``ModelResource``"""
    module: str
    """The dynamic face's module: its Args class, resource class and TypedDicts are the tables."""
    provider: str
    """The dynamic provider class there, whose ``schema_at`` / ``checks_at`` name the core's schema and check."""

    @property
    def token(self) -> str:
        return f"{PACKAGE}:index:{self.name}"

    @functools.cached_property
    def schema(self) -> Any:
        """The core's :class:`~..resources.kind.Kind` of the kind."""
        return _load(self._provider_class.schema_at)

    @functools.cached_property
    def check(self) -> Any:
        """The core's check of the kind: (olds, news) -> (inputs, failures)."""
        return _load(self._provider_class.checks_at)

    @property
    def _provider_class(self) -> Any:
        return getattr(importlib.import_module(self.module), self.provider)


KINDS = (
    Kind("ModelResource", "pulumi_together_rl.resources.model_resource", "_ModelResourceProvider"),
    Kind("TrainingSession", "pulumi_together_rl.resources.training_session", "_TrainingSessionProvider"),
)
BY_TOKEN = {kind.token: kind for kind in KINDS}

GET_SUPPORTED_MODELS = f"{PACKAGE}:index:getSupportedModels"
ESTIMATE_COST = f"{PACKAGE}:index:estimateCost"
GET_CHECKPOINTS = f"{PACKAGE}:index:getCheckpoints"
LATEST_CHECKPOINT = f"{PACKAGE}:index:latestCheckpoint"
FUNCTIONS_MODULE = "pulumi_together_rl.resources.functions"
"""The dynamic face's functions: their query and answer types are the checkpoint functions' schema."""


@dataclasses.dataclass(frozen=True)
class Attribute:
    """One annotated attribute of a class of the dynamic face: its name, annotation and docstring."""

    name: str
    annotation: ast.expr
    doc: str


def _attributes(module: str, class_name: str) -> list[Attribute]:
    tree = _module_tree(module)
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == class_name:
            found: list[Attribute] = []
            body = node.body
            for i, stmt in enumerate(body):
                if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                    nxt = body[i + 1] if i + 1 < len(body) else None
                    doc = (
                        inspect.cleandoc(nxt.value.value)
                        if isinstance(nxt, ast.Expr)
                        and isinstance(nxt.value, ast.Constant)
                        and isinstance(nxt.value.value, str)
                        else ""
                    )
                    found.append(Attribute(stmt.target.id, stmt.annotation, doc))
            return found
    raise LookupError(f"{module} has no class {class_name}")


def _class_doc(module: str, class_name: str) -> str:
    for node in _module_tree(module).body:
        if isinstance(node, ast.ClassDef) and node.name == class_name:
            return inspect.cleandoc(ast.get_docstring(node) or "")
    raise LookupError(f"{module} has no class {class_name}")


@functools.cache
def _module_tree(module: str) -> ast.Module:
    return ast.parse(inspect.getsource(importlib.import_module(module)))


def _markdown(doc: str) -> str:
    """Sphinx's double backquotes as Markdown code; a Python class reference as its name."""
    doc = re.sub(r":(?:class|func|data|mod):`~?\.*([^`]+)`", r"`\1`", doc)
    return doc.replace("``", "`")


class _Types:
    """Turns the dynamic face's annotations into schema type specs, collecting the object types they name."""

    def __init__(self, module: str) -> None:
        self.module = module
        self.objects: dict[str, dict[str, Any]] = {}

    def spec(self, node: ast.expr) -> dict[str, Any] | None:
        """The schema spec of an annotation; None for what the plugin does not carry (a Resource object)."""
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):  # X | None
            side = node.left if _is_none(node.right) else node.right
            return self.spec(side)
        if isinstance(node, ast.Subscript):
            outer = ast.unparse(node.value)
            if outer in ("pulumi.Input", "pulumi.Output"):
                return self.spec(node.slice)
            if outer in ("list", "Sequence"):
                item = self.spec(node.slice)
                return {"type": "array", "items": item or ANY}
            if outer in ("dict", "Mapping"):
                assert isinstance(node.slice, ast.Tuple)
                value = node.slice.elts[1]
                return {"type": "object", "additionalProperties": self.spec(value) or ANY}
        if isinstance(node, ast.Name):
            scalar = {"str": "string", "int": "integer", "float": "number", "bool": "boolean"}.get(node.id)
            if scalar:
                return {"type": scalar}
            if node.id == "Any":
                return dict(ANY)
            if node.id.endswith("Args"):
                return {"$ref": f"#/types/{self.object_type(node.id)}"}
        return None

    def object_type(self, class_name: str) -> str:
        token = f"{PACKAGE}:index:{class_name.removesuffix('Args')}"
        if token not in self.objects:
            self.objects[token] = {}  # placed first: a type that names itself ends here
            attrs = _attributes(self.module, class_name)
            self.objects[token] = {
                "type": "object",
                "description": _markdown(_class_doc(self.module, class_name)),
                "properties": {camel(a.name): self.prop(a) for a in attrs},
            }
        return token

    def prop(self, attr: Attribute, spec: dict[str, Any] | None = None) -> dict[str, Any]:
        spec = spec if spec is not None else self.spec(attr.annotation)
        assert spec is not None, attr.name
        return {**spec, "description": _markdown(attr.doc)}


def _is_none(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _resource(kind: Kind, types: _Types) -> dict[str, Any]:
    schema = kind.schema
    inputs = {a.name: a for a in _attributes(kind.module, f"{kind.name}Args") if a.name not in _DYNAMIC_ONLY}
    outputs = [a for a in _attributes(kind.module, kind.name) if a.name not in _DYNAMIC_ONLY]
    input_specs: dict[str, Any] = {}
    for name, attr in inputs.items():
        spec = types.prop(attr)
        if name in schema.replace_on_changes:
            spec["replaceOnChanges"] = True
        input_specs[camel(name)] = spec
    output_specs: dict[str, Any] = {}
    for attr in outputs:
        shape = types.spec(attr.annotation)
        declared = inputs.get(attr.name) or inputs.get(attr.name.removeprefix("effective_"))
        if declared is not None and (shape is None or shape.get("additionalProperties") == ANY):
            shape = types.spec(
                declared.annotation
            )  # an input echoed, or the API's view of it: the same shape
        output_specs[camel(attr.name)] = types.prop(attr, shape)
    return {
        "description": _markdown(_class_doc(kind.module, kind.name).split("\n\n")[0])
        + "\n\n"
        + _markdown(_class_doc(kind.module, f"{kind.name}Args")),
        "inputProperties": input_specs,
        "requiredInputs": [camel(schema.required)],
        "properties": output_specs,
        "required": [camel(a.name) for a in outputs if not _optional(a.annotation)],
    }


def _optional(node: ast.expr) -> bool:
    text = ast.unparse(node)
    return "None" in text


CONFIG = {
    "apiKey": {
        "type": "string",
        "secret": True,
        "description": "The Together API key (a secret: `pulumi config set --secret together-rl:apiKey`). "
        "Unset: the `TOGETHER_API_KEY` environment variable of the Pulumi process.",
    },
    "baseUrl": {
        "type": "string",
        "description": "The API's base URL (the bundled emulator's, in tests). Unset: `TOGETHER_BASE_URL`, "
        "else https://api.together.ai.",
    },
    "pollInterval": {
        "type": "number",
        "description": "The longest pause, in seconds, between two polls of a wait. Unset: "
        "`TOGETHER_RL_POLL_INTERVAL`, else 10.",
    },
    "journalUrl": {
        "type": "string",
        "description": "Where the create journal lives (a bucket URL such as `s3://bucket/prefix?region=...`, "
        "or `file:///folder`). `TOGETHER_RL_JOURNAL_URL` wins over it. Unset: beside the stack's state when the "
        "backend is a bucket, else this machine's folder (docs/journal.md).",
    },
    "maxAccountPricePerHour": {
        "type": "number",
        "description": "A cap on the account's estimated price per hour after a change: the API key's user's "
        "active model resources plus this preview's new ones. A preview that would take it over the cap fails, "
        "naming the figures and the largest spenders (docs/cost.md). Unset: no cap.",
    },
}


def _functions(types: _Types, answers: _Types) -> dict[str, Any]:
    mr = {a.name: a for a in _attributes(KINDS[0].module, f"{KINDS[0].name}Args")}
    api_inputs = KINDS[0].schema.replace_on_changes
    query = {
        "type": "object",
        "properties": {
            camel(a.name): answers.prop(a) for a in _attributes(FUNCTIONS_MODULE, "CheckpointQuery")
        },
    }
    checkpoint = answers.object_type("Checkpoint")
    one = answers.objects[checkpoint]
    return {
        GET_CHECKPOINTS: {
            "description": "Every checkpoint of a session (or base model) of a type, from a step on, newest "
            "first (`GET /v1/rl/checkpoints`, every page); an empty list when none matches.",
            "inputs": query,
            "outputs": {
                "type": "object",
                "properties": {
                    "checkpoints": {
                        "type": "array",
                        "items": {"$ref": f"#/types/{checkpoint}"},
                        "description": "The matching checkpoints, newest first.",
                    }
                },
                "required": ["checkpoints"],
            },
        },
        LATEST_CHECKPOINT: {
            "description": "The newest checkpoint of a session (or base model) of a type at or after a step: "
            "`resumeFromCheckpointId: ${fn::invoke ... .id}`. None matching is an error naming the query.",
            "inputs": query,
            "outputs": {
                "type": "object",
                "properties": one["properties"],
                "required": ["id", "type", "step"],
            },
        },
        GET_SUPPORTED_MODELS: {
            "description": "The base models the API offers for post-training (`GET /v1/rl/supported-models`), "
            "each with its default GPU type and the compute layouts (GPU type, generator and trainer "
            "limits) it can run on.",
            "outputs": {
                "type": "object",
                "properties": {
                    "models": {
                        "type": "array",
                        "items": ANY,
                        "description": "`[{base_model, default_gpu_type, compute_configs: [{gpu_type, "
                        "generator_config, trainer_config}]}]`, as the API reports them.",
                    }
                },
                "required": ["models"],
            },
        },
        ESTIMATE_COST: {
            "description": "What a model resource of these inputs would cost per hour while READY "
            "(`POST /v1/rl/model-resources/estimate-cost`). Takes the ModelResource's API inputs.",
            "inputs": {
                "type": "object",
                "properties": {camel(k): types.prop(mr[k]) for k in api_inputs},
                "required": [camel(KINDS[0].schema.required)],
            },
            "outputs": {
                "type": "object",
                "properties": {
                    "pricePerHour": {"type": "number", "description": "The estimated price per hour."},
                    "currency": {"type": "string", "description": "Its ISO 4217 currency (`USD`)."},
                },
                "required": ["pricePerHour", "currency"],
            },
        },
    }


@functools.cache
def repository() -> str:
    """``<owner>/<name>`` of the project's GitHub repository, from the package's metadata: the one place it is
    written is pyproject.toml's ``[project.urls] Repository``."""
    from importlib.metadata import metadata

    urls: dict[str, str] = {}
    for entry in metadata(DISTRIBUTION).get_all("Project-URL") or []:
        label, _, url = entry.partition(",")
        urls[label.strip()] = url.strip()
    match = re.fullmatch(r"https://github\.com/([\w.-]+/[\w.-]+)", urls.get("Repository", ""))
    if not match:
        raise LookupError(
            f"the metadata of {DISTRIBUTION} names no GitHub repository (pyproject.toml's [project.urls])"
        )
    return match.group(1)


def plugin_download_url() -> str:
    """Where the engine fetches the plugin: the repository's GitHub releases, whose assets are the archives
    ``pulumi-resource-together-rl-v<version>-<os>-<arch>.tar.gz`` (``make dist``). The generated SDKs carry it as
    their ``server``, so a program of theirs gets the plugin installed on first use."""
    return f"github://api.github.com/{repository()}"


def logo_url() -> str:
    """The package's logo, docs/logo.png of the repository's main branch (the Registry and NuGet show it)."""
    return f"https://raw.githubusercontent.com/{repository()}/main/docs/logo.png"


def go_module() -> str:
    """The Go SDK's module: sdk/go of the repository, so a Go tag ``sdk/go/v<version>`` releases it."""
    return f"github.com/{repository()}/sdk/go"


@functools.cache
def package_schema() -> dict[str, Any]:
    """The whole package schema (``pulumi package get-schema`` prints it)."""
    resources: dict[str, Any] = {}
    objects: dict[str, Any] = {}
    functions: dict[str, Any] = {}
    answers = _Types(FUNCTIONS_MODULE)
    for kind in KINDS:
        types = _Types(kind.module)
        resources[kind.token] = _resource(kind, types)
        if kind is KINDS[0]:
            functions = _functions(types, answers)
        objects.update(types.objects)
    objects.update(answers.objects)
    return {
        "name": PACKAGE,
        "displayName": "Together AI post-training (RL)",
        "version": __version__,
        "description": "Together AI post-training (RL) infrastructure: model resources (GPUs with a frozen base "
        "model, billed while READY) and the training sessions on them.",
        # category/ and kind/ keywords place the package in the Pulumi Registry's listing (kind/native: a provider
        # of its own, not a component or a bridged Terraform provider).
        "keywords": ["together", "rl", "post-training", "category/cloud", "kind/native"],
        "license": "Apache-2.0",
        "publisher": repository().split("/")[0],
        "homepage": f"https://github.com/{repository()}",
        "repository": f"https://github.com/{repository()}",
        # docs/logo.png on the main branch. The .NET generator fetches it into its SDK (scripts/gen-sdk.sh gives
        # it the file of this checkout instead, offline).
        "logoUrl": logo_url(),
        "pluginDownloadURL": plugin_download_url(),
        "config": {"variables": CONFIG},
        "provider": {"description": "The Together RL provider.", "inputProperties": CONFIG},
        "resources": resources,
        "types": objects,
        "functions": functions,
        "language": {
            "python": {"packageName": PYTHON_PACKAGE, "respectSchemaVersion": True},
            "nodejs": {"packageName": NODE_PACKAGE, "respectSchemaVersion": True},
            # The Go module is sdk/go of the repository (tagged sdk/go/v<version>), its package togetherrl.
            "go": {"importBasePath": f"{go_module()}/{GO_PACKAGE}", "respectSchemaVersion": True},
            # com.pulumi:pulumi named so that build.gradle pins the version tests/e2e compiles against.
            "java": {
                "basePackage": JAVA_BASE_PACKAGE,
                "buildFiles": "gradle",
                "dependencies": {"com.pulumi:pulumi": JAVA_PULUMI_VERSION},
            },
            "csharp": {"rootNamespace": CSHARP_ROOT_NAMESPACE, "respectSchemaVersion": True},
        },
    }


def schema_text() -> str:
    return json.dumps(package_schema(), indent=2, sort_keys=True)
