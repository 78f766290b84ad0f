"""A Pulumi policy pack for Together RL stacks: the rules that need the whole stack in view.

One resource's ``check`` validates that resource; these rules see every resource of the stack at once, at
``pulumi preview`` and ``pulumi up``:

``together-rl-budget``
    The stack's total estimated price per hour (the sum of each model resource's ``price_per_hour``) is at
    most ``max_price_per_hour``. The total is reported on every run, under the budget too.
``together-rl-session-caps``
    No model resource has more sessions declared on it than it takes: ``full_weight_sessions`` (1) on a
    full-weight resource, ``lora_sessions_by_model[<base_model>]`` or ``lora_sessions`` (5) on a LoRA one.
``together-rl-idle-ceiling``
    ``inactive_timeout`` (API default 3600 s) is at most ``max_inactive_timeout`` (default 3600).
``together-rl-keep-ceiling``
    No model resource is kept READY (``keep_ready_until``) more than ``max_keep_ready_hours`` (default 24)
    ahead of now.
``together-rl-no-force-stop``
    ``force_stop`` is not set on the stacks in ``stacks`` (default ``["prod", "production"]``).
``together-rl-wandb-metadata``
    Every session has the ``metadata.wandb`` keys in ``required`` (none by default: the rule is off), on the
    stacks in ``stacks`` (all if unset).

Every rule is mandatory unless the config file says otherwise (``"enforcementLevel": "advisory"`` or
``"disabled"``). Needs the ``policy`` extra: ``pip install 'pulumi-together-rl[policy]'``.
"""
