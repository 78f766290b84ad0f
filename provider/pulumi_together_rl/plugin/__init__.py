"""The plugin face: the same core as the dynamic resources, served as a Pulumi provider plugin with a schema
(package ``together-rl``), so that Pulumi YAML, TypeScript and ``pulumi import`` can use it.

* :mod:`.package_schema`: the package schema, read from the dynamic face's tables (one source of truth);
* :mod:`.properties`: the engine's property bags and the core's plain dicts, both ways;
* :mod:`.provider`: the provider protocol, four beats a method over the shared lifecycle;
* :mod:`.functions`: the invokes (supported models, cost estimate);
* :mod:`.server`: serving it (one-sentence errors, lines to the engine's log).

This folder is the plugin (``PulumiPlugin.yaml`` and ``__main__.py``): a program names it by path.
"""
